// The import's own version wins over the app folder's package.json range.
import uua from "universal-user-agent@6.0.0";

export default {
  key: "hwtest-registry-pinned",
  name: "Registry pinned",
  version: "0.0.1",
  type: "source",
  props: { db: "$.service.db" },
  async run() {
    this.$emit({ agent: uua.getUserAgent() });
  },
};
