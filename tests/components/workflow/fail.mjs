export default {
  name: "Fail",
  key: "test-fail",
  version: "0.0.1",
  type: "action",
  async run({ steps }) {
    throw new Error(`cannot handle ${steps.trigger.event.n}`);
  },
};
