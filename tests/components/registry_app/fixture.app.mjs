// An app as database apps are written: the platform's SQL helpers spread under its own methods.
// It reads no `$auth`, so a component may leave its prop out.
import { sqlProxy, sqlProp } from "@pipedream/platform";

export default {
  type: "app",
  app: "hwtest_fixture",
  methods: {
    ...sqlProxy.methods,
    ...sqlProp.methods,
    async executeQuery({ sql, values = [] } = {}) {
      return [{ sql, values }];
    },
  },
};
