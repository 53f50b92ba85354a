export default {
  name: "Stop",
  key: "test-stop",
  version: "0.0.1",
  type: "action",
  async run({ $ }) {
    return $.flow.exit("nothing to do");
  },
};
