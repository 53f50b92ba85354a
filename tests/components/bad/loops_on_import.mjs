let ready = false;

setTimeout(() => {
  ready = true;
}, 100);

while (true) {}

export default {
  key: "bad-busy-wait",
  name: "Wait Until Ready",
  version: "0.0.1",
  type: "action",
  props: {},
  async run({ $ }) {
    $.export("$summary", `ready: ${ready}`);
  },
};
