// Records every lifecycle hook it goes through, in order, by emitting {"hook": name}.
// The deactivate hook also reports to an optional witness URL, because on delete the
// source's own events are removed together with it.
export default {
  key: "sources-api-lifecycle",
  name: "Lifecycle Recorder",
  description: "Emit one event per hook call so tests can see which hooks ran, and in which order.",
  version: "0.1.0",
  type: "source",
  props: {
    db: "$.service.db",
    label: {
      type: "string",
      label: "Label",
      optional: true,
      default: "v1",
    },
    witnessUrl: {
      type: "string",
      label: "Witness URL",
      description: "Where the deactivate hook reports to (a Headwater HTTP source)",
      optional: true,
    },
  },
  methods: {
    record(hook) {
      const calls = (this.db.get("calls") ?? 0) + 1;
      this.db.set("calls", calls);
      this.$emit({ hook, label: this.label, calls }, { summary: `${hook} hook` });
    },
  },
  hooks: {
    async deploy() {
      this.record("deploy");
    },
    async activate() {
      this.record("activate");
    },
    async deactivate() {
      this.record("deactivate");
      if (this.witnessUrl) {
        await fetch(this.witnessUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ hook: "deactivate", source: process.env.PD_COMPONENT, label: this.label }),
        });
      }
    },
  },
  async run(event) {
    this.$emit({ run: event, label: this.label }, { summary: "manual run" });
  },
};
