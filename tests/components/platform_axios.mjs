import { axios, ConfigurationError } from "@pipedream/platform";

export default {
  key: "test-platform-list-issues",
  name: "List Repository Issues",
  description: "List the open issues of a public GitHub repository.",
  version: "0.4.0",
  type: "action",
  props: {
    repository: {
      type: "string",
      label: "Repository",
      description: "Full name of the repository, e.g. `nodejs/node`",
    },
    labels: {
      type: "string",
      label: "Labels",
      description: "Comma-separated list of label names",
      optional: true,
    },
  },
  async run({ $ }) {
    if (!/^[\w.-]+\/[\w.-]+$/.test(this.repository)) {
      throw new ConfigurationError(`"${this.repository}" is not a repository name of the form owner/name`);
    }
    const issues = await axios($, {
      url: `https://api.github.com/repos/${this.repository}/issues`,
      headers: {
        Accept: "application/vnd.github+json",
        "User-Agent": "@pipedream/github",
      },
      params: {
        state: "open",
        labels: this.labels,
        per_page: 50,
      },
    });
    $.export("$summary", `Found ${issues.length} open issue${issues.length === 1 ? "" : "s"} in ${this.repository}`);
    return issues;
  },
};
