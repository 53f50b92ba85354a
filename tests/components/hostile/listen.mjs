// Threat 5: accept connections (a server inside the runner).
import net from "node:net";
import http from "node:http";

export default {
  name: "Hostile listen",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    const tried = {};
    for (const [name, make] of [["net", () => net.createServer()], ["http", () => http.createServer()]]) {
      try {
        const server = make();
        await new Promise((resolve, reject) => {
          server.on("error", reject);
          server.listen(0, "127.0.0.1", resolve);
        });
        tried[name] = { listening: true, port: server.address().port };
        server.close();
      } catch (e) {
        tried[name] = { listening: false, code: e.code, error: e.message };
      }
    }
    this.$emit(tried);
  },
};
