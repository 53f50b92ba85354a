// Threat 5: reach addresses the URL policy refuses: with fetch (`url`), or a raw TCP connection
// (`host`, `port`: net.connect passes odd spellings through as given).
import net from "node:net";

export default {
  name: "Hostile egress",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    const { url, host, port } = event.body;
    if (url) {
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(5000) });
        this.$emit({ target: url, reached: true, status: response.status, body: (await response.text()).slice(0, 200) });
      } catch (e) {
        this.$emit({ target: url, reached: false, error: String((e.cause && e.cause.message) || e.message) });
      }
      return;
    }
    const outcome = await new Promise((resolve) => {
      const socket = net.connect({ host, port });
      socket.on("connect", () => { socket.destroy(); resolve({ reached: true }); });
      socket.on("error", (e) => resolve({ reached: false, code: e.code, error: e.message }));
    });
    this.$emit({ target: `${host}:${port}`, ...outcome });
  },
};
