const { axios } = require("@pipedream/platform");

module.exports = {
  key: "test-cjs-uptime-check",
  name: "Uptime Check",
  description: "Request a URL on a schedule and emit its status code and latency.",
  version: "0.1.2",
  props: {
    timer: {
      type: "$.interface.timer",
      default: {
        intervalSeconds: 300,
      },
    },
    url: {
      type: "string",
      label: "URL",
      description: "The address to check",
    },
  },
  async run(event) {
    const started = Date.now();
    let status;
    try {
      const response = await axios(this, {
        url: this.url,
        returnFullResponse: true,
        timeout: 10000,
      });
      status = response.status;
    } catch (err) {
      status = err.response ? err.response.status : null;
    }
    const latencyMs = Date.now() - started;
    this.$emit({
      url: this.url,
      status,
      up: status !== null && status < 500,
      latencyMs,
      checkedAt: event.timestamp,
    }, {
      id: `${event.timestamp}`,
      summary: `${this.url} answered ${status ?? "nothing"} in ${latencyMs} ms`,
      ts: started,
    });
  },
};
