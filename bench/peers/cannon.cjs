// The load generator of bench/load.py: autocannon (keep-alive, POST with a JSON body), one round per
// JSON line read on stdin, one JSON line written per round. One long-lived process instead of one per
// round keeps Node's start-up out of the benchmark's time and its CPU figures.
// Why not autocannon's own latency figures: its histogram keeps whole milliseconds, which says
// nothing at c=1 on loopback; its per-response event carries the exact time, so p50/p99 come from it.
// Usage: node cannon.cjs <dir whose node_modules holds autocannon>
//   stdin:  {"url": ..., "body": ..., "connections": N, "duration": S}
//   stdout: {"requests", "ok", "non2xx", "errors", "timeouts", "duration_s", "p50_ms", "p99_ms", ...}
"use strict";
const path = require("node:path");
const readline = require("node:readline");
const { createRequire } = require("node:module");

const autocannon = createRequire(path.resolve(process.argv[2], "package.json"))("autocannon");

function quantile(sorted, q) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

function round(opts) {
  return new Promise((resolve, reject) => {
    const durations = [];
    const instance = autocannon(
      {
        url: opts.url,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: opts.body,
        connections: opts.connections,
        duration: opts.duration,
        pipelining: 1,
        timeout: 30,
      },
      (err, result) => {
        if (err) return reject(err);
        durations.sort((a, b) => a - b);
        resolve({
          requests: result.requests.total,
          ok: result["2xx"],
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          duration_s: result.duration,
          p50_ms: quantile(durations, 0.5),
          p99_ms: quantile(durations, 0.99),
          autocannon_p99_ms: result.latency.p99,
        });
      },
    );
    instance.on("response", (_client, _status, _bytes, responseTime) => durations.push(responseTime));
  });
}

let chain = Promise.resolve();
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  chain = chain.then(async () => {
    let out;
    try {
      out = await round(JSON.parse(line));
    } catch (err) {
      out = { error: String(err && err.stack ? err.stack : err) };
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  });
});
