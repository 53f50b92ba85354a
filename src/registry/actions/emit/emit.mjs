import { ConfigurationError } from "@pipedream/platform";

export default {
  key: "headwater-emit",
  name: "Emit Event",
  description: "Emit an event from a workflow. It is stored in the workflow's event summaries and delivered to the workflow's subscribers.",
  version: "0.2.0",
  type: "action",
  props: {
    event: {
      type: "any",
      label: "Event",
      description: "The event to emit: any JSON value (an object, a number, a string...); a string holding JSON is parsed",
    },
  },
  async run({ $ }) {
    let event = this.event;
    if (typeof event === "string") {
      try {
        event = JSON.parse(event);
      } catch {
        // plain text is an event too
      }
    }
    if (event === undefined || event === null) {
      throw new ConfigurationError("Event is required");
    }
    $.send.emit({
      raw_event: event,
    });
    $.export("$summary", "Emitted 1 event");
    return event;
  },
};
