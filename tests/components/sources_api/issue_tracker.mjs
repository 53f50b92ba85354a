// A polling source with props of every scalar kind: used for prop validation.
export default {
  key: "sources-api-issue-tracker",
  name: "New Issues (Tracker)",
  description: "Emit new issues of a project.",
  version: "1.2.0",
  type: "source",
  props: {
    db: "$.service.db",
    timer: {
      type: "$.interface.timer",
      label: "Polling interval",
      default: {
        intervalSeconds: 900,
      },
    },
    project: {
      type: "string",
      label: "Project",
      description: "The project key, e.g. `ENG`",
    },
    maxResults: {
      type: "integer",
      label: "Max Results",
      min: 1,
      max: 50,
    },
    includeClosed: {
      type: "boolean",
      label: "Include closed issues",
    },
    query: {
      type: "object",
      label: "Extra query parameters",
    },
    labels: {
      type: "string[]",
      label: "Labels",
    },
    priority: {
      type: "string",
      label: "Priority",
      options: [
        "low",
        "medium",
        "high",
      ],
    },
    region: {
      type: "string",
      label: "Region",
      options: [
        { label: "US East (N. Virginia)", value: "us-east-1" },
        { label: "EU (Frankfurt)", value: "eu-central-1" },
      ],
    },
    sortOrder: {
      type: "string",
      label: "Sort order",
      optional: true,
      default: "desc",
    },
    pageSize: {
      type: "integer",
      label: "Page size",
      optional: true,
      default: 25,
    },
    assignee: {
      type: "string",
      label: "Assignee",
      optional: true,
    },
  },
  async run(event) {
    this.$emit({
      timer: event,
      project: this.project,
      sortOrder: this.sortOrder,
      pageSize: this.pageSize,
      assignee: this.assignee ?? null,
      labels: this.labels,
    }, { summary: `Polled ${this.project}` });
  },
};
