export default {
  key: "test-heartbeat",
  name: "Heartbeat",
  description: "Emit the timer event every ten minutes.",
  version: "0.0.1",
  props: {
    timer: {
      type: "$.interface.timer",
      default: {
        intervalSeconds: 600,
      },
    },
  },
};
