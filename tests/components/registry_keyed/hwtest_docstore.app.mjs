// An API-key app in the public registry's shape: its base URL and its token both come from the
// connected account (`this.$auth.url`, `this.$auth.api_token`), its requests go through the
// platform's `axios($, config)`.
import { axios } from "@pipedream/platform";

export default {
  type: "app",
  app: "hwtest_docstore",
  propDefinitions: {},
  methods: {
    _baseUrl() {
      return `${this.$auth.url}/api/v1`;
    },
    _makeRequest({
      $ = this, path, ...opts
    }) {
      return axios($, {
        ...opts,
        url: `${this._baseUrl()}${path}`,
        headers: {
          Authorization: `${this.$auth.api_token}`,
        },
      });
    },
    listDocuments(opts = {}) {
      return this._makeRequest({
        path: "/documents",
        ...opts,
      });
    },
  },
};
