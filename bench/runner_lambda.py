"""The runner Lambda's warm invocation, in Node as the nodejs22.x runtime calls lambda.mjs's
handler: a run of a small component for one account, again and again (the child warm), and the
cost of stopping and resuming that child between invocations (docs/security.md, "The Lambda
runtime API"):
    .venv/bin/python bench/runner_lambda.py [--calls 500] [--lambda path/to/lambda.mjs]
`--lambda` compares another lambda.mjs (an older one: `git show main:layers/runner/src/lambda.mjs`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from headwater.settings import Settings  # noqa: E402

LAMBDA = Path(__file__).resolve().parents[1] / "layers" / "runner" / "src" / "lambda.mjs"
CODE = """export default { key: 'doubler', name: 'Doubler', version: '0.0.1', type: 'source', props: {},
  async run(event) { this.$emit({ doubled: event.n * 2 }) } }"""
DRIVER = """import fs from 'node:fs'
const { handler } = await import(process.env.LAMBDA_MJS)
const calls = Number(process.argv[2])
const made = await handler({ id: 0, op: 'bundle', code: process.env.CODE })
const run = { op: 'run', instance: 'dc_1', props: {}, timeout_ms: 5000, account: 'account:a',
  bundle: { hash: made.result.hash } }
const ms = (t) => Number(t) / 1e6
const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))]
for (let i = 0; i < 20; i++) await handler({ ...run, id: i, event: { n: i } })
const took = []
for (let i = 0; i < calls; i++) {
  const t0 = process.hrtime.bigint()
  const r = await handler({ ...run, id: i, event: { n: i } })
  took.push(ms(process.hrtime.bigint() - t0))
  if (!r.ok) throw new Error(JSON.stringify(r))
}
took.sort((a, b) => a - b)
// SIGSTOP until every thread shows T in /proc, then SIGCONT: what lambda.mjs adds to a warm call.
const { result } = await handler({ id: 1, op: 'ping', account: 'account:a' })
const pid = result.pid
const stopped = () => fs.readdirSync(`/proc/${pid}/task`).every((t) => {
  const s = fs.readFileSync(`/proc/${pid}/task/${t}/stat`, 'latin1')
  return s[s.lastIndexOf(')') + 2] === 'T'
})
const cycles = []
for (let i = 0; i < calls; i++) {
  process.kill(pid, 'SIGCONT')
  const t0 = process.hrtime.bigint()
  process.kill(pid, 'SIGSTOP')
  while (!stopped()) {}
  process.kill(pid, 'SIGCONT')
  cycles.push(ms(process.hrtime.bigint() - t0) * 1000)
}
cycles.sort((a, b) => a - b)
console.log(JSON.stringify({
  calls, warm_p50_ms: pct(took, 0.5), warm_p90_ms: pct(took, 0.9), warm_mean_ms: took.reduce((a, b) => a + b) / calls,
  threads: fs.readdirSync(`/proc/${pid}/task`).length,
  stop_cont_p50_us: pct(cycles, 0.5), stop_cont_p90_us: pct(cycles, 0.9),
}))
process.exit(0)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--lambda", dest="lambda_mjs", default=str(LAMBDA))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "driver.mjs").write_text(DRIVER)
        env = {"PATH": "/usr/bin:/bin", "HEADWATER_RUNNER_TMP": tmp, "LAMBDA_MJS": str(Path(args.lambda_mjs).resolve()),
               "CODE": CODE,
               "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}  # as on Lambda: each answer's connection check runs
        out = subprocess.run([str(Settings().node), str(Path(tmp) / "driver.mjs"), str(args.calls)], env=env,
                             capture_output=True, text=True, timeout=600, check=True)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                      for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}))


if __name__ == "__main__":
    main()
