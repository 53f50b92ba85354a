// A CommonJS helper of a multi-file component: its require() of an npm package must be bundled.
const { getUserAgent } = require("universal-user-agent");

module.exports = {
  agent() {
    return getUserAgent();
  },
};
