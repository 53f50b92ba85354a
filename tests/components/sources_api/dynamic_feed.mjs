import { ConfigurationError } from "@pipedream/platform";

// The fields shown depend on the delivery mode: additionalProps adds them.
export default {
  key: "sources-api-dynamic-feed",
  name: "New Feed Item (Dynamic)",
  description: "Emit new items of a feed, received by webhook or polled.",
  version: "0.2.0",
  type: "source",
  props: {
    db: "$.service.db",
    mode: {
      type: "string",
      label: "Delivery mode",
      options: [
        "webhook",
        "poll",
      ],
      reloadProps: true,
    },
  },
  async additionalProps() {
    if (this.mode === "poll") {
      return {
        feedUrl: {
          type: "string",
          label: "Feed URL",
        },
        everyMinutes: {
          type: "integer",
          label: "Every N minutes",
          min: 1,
          max: 60,
          optional: true,
          default: 15,
        },
      };
    }
    if (this.mode && this.mode !== "webhook") {
      throw new ConfigurationError(`Unknown delivery mode "${this.mode}"`);
    }
    return {};
  },
  async run(event) {
    this.$emit({ mode: this.mode, feedUrl: this.feedUrl ?? null, everyMinutes: this.everyMinutes ?? null, event });
  },
};
