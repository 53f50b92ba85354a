export default {
  name: "Double",
  key: "test-double",
  version: "0.0.1",
  type: "action",
  props: { n: { type: "integer" } },
  async run({ $, steps }) {
    $.export("seen_trigger", steps.trigger.event);
    return { n: this.n * 2 };
  },
};
