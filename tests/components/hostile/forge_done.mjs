// Threat: end a run early as far as the runner knows, then keep working past the run's limit
// and past its bill. The run posts `done` for every call id the runner process could have given
// it (they count from 1), burns CPU, then calls the test's loopback listener every 200 ms.
import { parentPort } from "node:worker_threads";

export default {
  name: "Forged end",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    parentPort.postMessage({ t: "done", c: null });
    for (let c = 1; c <= 200; c++) parentPort.postMessage({ t: "done", c });
    const start = process.cpuUsage();
    let x = 0;
    while ((process.cpuUsage(start).user + process.cpuUsage(start).system) / 1000 < event.body.burn_ms) {
      for (let i = 0; i < 100000; i++) x += Math.sqrt(x + i);
    }
    setInterval(() => { fetch(event.body.url).catch(() => {}); }, 200);
    await new Promise((resolve) => setTimeout(resolve, 60000));
  },
};
