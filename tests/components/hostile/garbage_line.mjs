// Threat: write lines the service does not expect on the runner's stdout (not JSON, then an
// answer to a request nobody sent).
import fs from "node:fs";

export default {
  name: "Garbage writer",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  run() {
    fs.writeSync(1, "this is not a protocol line\n");
    fs.writeSync(1, JSON.stringify({ id: 987654, ok: true, result: {} }) + "\n");
    this.$emit({ wrote: true });
  },
};
