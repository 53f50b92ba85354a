import { ConfigurationError } from "@pipedream/platform";

export default {
  key: "headwater-emit",
  name: "Emit Event",
  description: "Emit an event from a workflow. It is stored in the workflow's event summaries and delivered to the workflow's subscribers.",
  version: "0.1.0",
  type: "action",
  props: {
    event: {
      type: "object",
      label: "Event",
      description: "The event to emit",
    },
  },
  async run({ $ }) {
    let event = this.event;
    if (typeof event === "string") {
      try {
        event = JSON.parse(event);
      } catch {
        throw new ConfigurationError("Event must be a JSON object");
      }
    }
    if (!event || typeof event !== "object") {
      throw new ConfigurationError("Event must be a JSON object");
    }
    $.send.emit({
      raw_event: event,
    });
    $.export("$summary", "Emitted 1 event");
    return event;
  },
};
