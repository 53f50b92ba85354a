// Says when its run started (the runner's clock is the host's).
export default {
  name: "Start time",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  run(event) {
    this.$emit({ started_ms: Date.now(), sent_ms: event.body.sent_ms });
  },
};
