"""lambda.mjs itself, in Node as the nodejs22.x runtime calls it, with an S3 client standing in
for the runtime's @aws-sdk/client-s3 (objects as files): its `bundle` op puts the bundle in the
bucket, a container with an empty /tmp runs it by hash from there, and component code cannot
read the bundles the container keeps."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from headwater.settings import Settings

LAMBDA = Path(__file__).resolve().parents[2] / "layers" / "runner" / "src" / "lambda.mjs"
FAKE_S3 = """import fs from 'node:fs'
const DIR = process.env.FAKE_S3_DIR
const file = (i) => `${DIR}/${i.Bucket}/${i.Key}`
export class S3Client { async send(command) { return command.run() } }
export class GetObjectCommand {
  constructor(i) { this.i = i }
  run() {
    if (!fs.existsSync(file(this.i))) throw Object.assign(new Error('no such key'), { name: 'NoSuchKey' })
    const text = fs.readFileSync(file(this.i), 'utf8')
    return { Body: { transformToString: async () => text } }
  }
}
export class PutObjectCommand {
  constructor(i) { this.i = i }
  run() {
    fs.mkdirSync(file(this.i).replace(/\\/[^/]*$/, ''), { recursive: true })
    fs.writeFileSync(file(this.i), this.i.Body)
    return {}
  }
}
"""
HOOKS = """export async function resolve(spec, context, next) {
  if (spec === '@aws-sdk/client-s3') return { url: new URL('./fake-s3.mjs', import.meta.url).href, shortCircuit: true }
  return next(spec, context)
}
"""
DRIVER = """import { register } from 'node:module'
register(new URL('./hooks.mjs', import.meta.url).href)
const { handler } = await import(process.env.LAMBDA_MJS)
const answers = []
for (const event of JSON.parse(process.argv[2])) {
  if (event.op === 'run' && event.bundle.hash === '$previous') event.bundle.hash = answers.at(-1).result.hash
  answers.push(await handler(event))
}
console.log(JSON.stringify(answers))
process.exit(0)
"""
CODE = """export default { key: 'doubler', name: 'Doubler', version: '0.0.1', type: 'source', props: {},
  async run(event) { this.$emit({ doubled: event.n * 2 }) } }"""
SNOOP = """export default { key: 'snoop', name: 'Snoop', version: '0.0.1', type: 'source', props: {},
  async run() { const fs = await import('node:fs'); this.$emit(fs.readdirSync(process.env.DIR)) } }"""


def invoke(tmp_path: Path, container: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for name, text in {"fake-s3.mjs": FAKE_S3, "hooks.mjs": HOOKS, "driver.mjs": DRIVER}.items():
        (tmp_path / name).write_text(text)
    env = {"PATH": "/usr/bin:/bin", "HEADWATER_BUNDLE_BUCKET": "bundles-bucket", "FAKE_S3_DIR": str(tmp_path / "s3"),
           "HEADWATER_RUNNER_TMP": str(tmp_path / container), "LAMBDA_MJS": str(LAMBDA)}
    (tmp_path / container).mkdir(exist_ok=True)
    proc = subprocess.run([str(Settings().node), str(tmp_path / "driver.mjs"), json.dumps(events)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_the_bundle_op_stores_in_the_bucket_and_a_fresh_container_runs_by_hash(tmp_path: Path) -> None:
    made, = invoke(tmp_path, "first", [{"id": 1, "op": "bundle", "code": CODE, "lock": {}}])
    assert made["ok"] and made["result"]["packages"] == {} and "code" not in made["result"], made
    digest = made["result"]["hash"]
    stored = tmp_path / "s3" / "bundles-bucket" / "bundles"
    assert "doubled" in (stored / f"{digest}.cjs").read_text()
    assert json.loads((stored / f"{digest}.json").read_text()) == {"packages": {}}

    run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 5000}
    ran, missing, snooped_bundle, snooped = invoke(tmp_path, "fresh", [
        {**run, "id": 2, "bundle": {"hash": digest}, "event": {"n": 21}},
        {**run, "id": 3, "bundle": {"hash": "f" * 64}, "event": {"n": 1}},
        {"id": 4, "op": "bundle", "code": SNOOP},
        {**run, "id": 5, "instance": "dc_2", "bundle": {"hash": "$previous"}, "event": {},
         "env": {"DIR": str(tmp_path / "fresh" / "bundles")}},
    ])
    assert ran["ok"] and [e["event"] for e in ran["result"]["emits"]] == [{"doubled": 42}], ran
    assert not missing["ok"] and missing["error"]["code"] == "BUNDLE_MISSING"
    assert snooped_bundle["ok"], snooped_bundle
    assert snooped["ok"] and snooped["result"]["emits"] == [], snooped
    assert "restricted" in snooped["result"]["error"]["message"]


def test_code_that_does_not_bundle_is_a_bundle_failure_and_nothing_is_stored(tmp_path: Path) -> None:
    failed, = invoke(tmp_path, "c", [{"id": 1, "op": "bundle", "code": 'import "/etc/passwd"\nexport default {}'}])
    assert not failed["ok"] and failed["error"]["code"] == "BUNDLE_FAILED"
    assert "not allowed" in failed["error"]["message"]
    assert not (tmp_path / "s3").exists()


def test_a_bundle_found_in_the_bucket_is_fetched_and_one_missing_its_code_is_made_again(tmp_path: Path) -> None:
    made, = invoke(tmp_path, "a", [{"id": 1, "op": "bundle", "code": CODE}])
    stored = tmp_path / "s3" / "bundles-bucket" / "bundles" / f"{made['result']['hash']}.cjs"
    found, = invoke(tmp_path, "b", [{"id": 2, "op": "bundle", "code": CODE}])
    assert found == {**made, "id": 2} and (tmp_path / "b" / "bundles" / stored.name).exists()
    stored.unlink()
    again, = invoke(tmp_path, "c", [{"id": 3, "op": "bundle", "code": CODE}])
    assert again["ok"] and "doubled" in stored.read_text()
