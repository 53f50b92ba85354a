// App prop with managed auth: app methods read this.$auth.
const github = {
  type: "app",
  app: "github",
  methods: {
    token() {
      return this.$auth.oauth_access_token;
    },
    authHeaders() {
      return {
        Authorization: `Bearer ${this.token()}`,
        Accept: "application/vnd.github+json",
      };
    },
  },
};

export default {
  key: "sources-api-github-stars",
  name: "New Stars (GitHub)",
  description: "Emit an event when a repository gets a star.",
  version: "0.3.0",
  type: "source",
  props: {
    github,
    db: "$.service.db",
    repo: {
      type: "string",
      label: "Repository",
      description: "`owner/name`",
    },
  },
  hooks: {
    async deploy() {
      this.$emit({
        hook: "deploy",
        token: this.github.token(),
        authorization: this.github.authHeaders().Authorization,
        direct: this.github.$auth.oauth_access_token,
        repo: this.repo,
      }, { summary: "deployed" });
    },
  },
  async run() {
    this.$emit({ token: this.github.token() });
  },
};
