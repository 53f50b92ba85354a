// Holds a run in flight without using CPU: it only awaits a timer.
export default {
  name: "Sleeper",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    await new Promise((resolve) => setTimeout(resolve, event.body.sleep_ms));
    this.$emit({ slept: event.body.sleep_ms });
  },
};
