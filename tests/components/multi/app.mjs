import { axios } from "@pipedream/platform";

export default {
  type: "app",
  app: "github",
  propDefinitions: {
    repo: {
      type: "string",
      label: "Repository",
      description: "The repository to watch, as `owner/name`",
      async options({ page, prevContext }) {
        const repos = await this.listRepos({
          page: (prevContext?.page ?? page) + 1,
        });
        return {
          options: repos.map((repo) => ({
            label: repo.full_name,
            value: repo.full_name,
          })),
          context: {
            page: (prevContext?.page ?? page) + 1,
          },
        };
      },
    },
    branch: {
      type: "string",
      label: "Branch",
      description: "Defaults to the repository's default branch",
      optional: true,
    },
  },
  methods: {
    _baseUrl() {
      return "https://api.github.com";
    },
    _headers() {
      return {
        Authorization: `Bearer ${this.$auth.oauth_access_token}`,
        Accept: "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
      };
    },
    _request({ $ = this, path, ...opts }) {
      return axios($, {
        url: `${this._baseUrl()}${path}`,
        headers: this._headers(),
        ...opts,
      });
    },
    listRepos({ page = 1 } = {}) {
      return this._request({
        path: "/user/repos",
        params: {
          per_page: 100,
          sort: "updated",
          page,
        },
      });
    },
    listCommits({ repo, branch, since }) {
      return this._request({
        path: `/repos/${repo}/commits`,
        params: {
          sha: branch,
          since,
          per_page: 100,
        },
      });
    },
  },
};
