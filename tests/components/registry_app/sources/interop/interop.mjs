// Node's ESM semantics: a default import of a CommonJS package that sets `__esModule` (and has
// no `default` export) is its module.exports.
import uua from "universal-user-agent";
import helper from "../../common/agent.js";
import app from "../../fixture.app.mjs";

export default {
  key: "hwtest-registry-interop",
  name: "Registry interop",
  version: "0.0.1",
  type: "source",
  props: { app, db: "$.service.db" },
  async run() {
    const rows = await this.app.executeQueryWithProxy({ sql: "SELECT ?", values: [1] });
    this.$emit({
      defaultImport: typeof uua,
      getUserAgent: typeof uua?.getUserAgent,
      fromRequire: typeof helper.agent(),
      rows,
    }, { id: String(Date.now()) });
  },
};
