export default {
  name: "Emit",
  key: "test-emit",
  version: "0.0.1",
  type: "action",
  props: { value: { type: "any" } },
  async run({ $ }) {
    $.send.emit({ raw_event: { total: this.value } });
    $.send.sse({ channel: "live", payload: { total: this.value } });
  },
};
