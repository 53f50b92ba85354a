// Threat 3: a nested worker with its own 4 GB heap, outside the run's memory limit.
import { Worker } from "node:worker_threads";

export default {
  name: "Hostile worker",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    const code = "const a = []; while (true) a.push(new Array(1e6).fill(a.length));";
    const worker = new Worker(code, { eval: true, resourceLimits: { maxOldGenerationSizeMb: 4096 } });
    await new Promise((resolve) => worker.on("exit", resolve));
    this.$emit({ survived: true });
  },
};
