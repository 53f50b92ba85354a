import github from "./app.mjs";
import common from "./common.mjs";

export default {
  ...common,
  key: "github-new-commit",
  name: "New Commit",
  description: "Emit new commits pushed to a repository branch.",
  version: "0.2.1",
  type: "source",
  dedupe: "unique",
  props: {
    ...common.props,
    repo: {
      propDefinition: [
        github,
        "repo",
      ],
    },
    branch: {
      propDefinition: [
        github,
        "branch",
      ],
    },
  },
  methods: {
    ...common.methods,
    getItems(since) {
      return this.github.listCommits({
        repo: this.repo,
        branch: this.branch,
        since,
      });
    },
    getTs(commit) {
      return commit.commit.committer.date;
    },
    generateMeta(commit) {
      return {
        id: commit.sha,
        summary: commit.commit.message.split("\n")[0],
        ts: Date.parse(commit.commit.committer.date),
      };
    },
  },
};
