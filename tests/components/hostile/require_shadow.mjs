// Threat 1: a require() of an absolute host path (esbuild bundles require calls in ESM too).
const shadow = require("/etc/shadow");

export default {
  name: "Hostile require (absolute)",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    this.$emit({ shadow });
  },
};
