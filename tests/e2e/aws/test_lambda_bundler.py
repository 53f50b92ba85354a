"""Bundling on AWS is the runner Lambda's (op `bundle`), and the runner has no AWS permission:
LambdaBundler hands it presigned PUT URLs of the bundle's two objects and gets the hash and npm
versions back; a Python container that finds the bundle in the bucket does not ask the runner; a
runner container that has not got it (a fresh /tmp) runs it through the presigned GET the request
carries. No code travels in a payload. Here the emulated runner function (the sandboxed local
runner and bundler) and a moto server standing for S3, reached by HTTP through the URLs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from headwater.adapters.aws.bundle_bucket import S3Bundles
from headwater.adapters.aws.lambda_bundler import LambdaBundler
from headwater.adapters.aws.lambda_runner import LambdaRunner
from headwater.adapters.aws.local_runner_function import LocalRunnerFunction
from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.domain.errors import Invalid
from headwater.emulated.deployment import start_moto
from headwater.ports import Instance, RunnerError
from headwater.settings import Settings

BUCKET = "headwater-bundlebucket"
CODE = """export default {
  key: "bundle-round-trip", name: "Round trip", version: "0.0.1", type: "source", props: {},
  async run(event) { this.$emit({ doubled: event.n * 2 }) },
}"""


@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    """A moto server (real HTTP, so presigned URLs are fetched as the runner fetches them)."""
    server = start_moto()
    host, port = server.get_host_and_port()
    client = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                          aws_access_key_id="t", aws_secret_access_key="t",  # noqa: S106 - moto's
                          config=Config(signature_version="s3v4"))
    client.create_bucket(Bucket=BUCKET)
    yield client
    server.stop()


@pytest.fixture
def bundles(s3: Any) -> Iterator[S3Bundles]:
    yield S3Bundles(s3, BUCKET)
    for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        s3.delete_object(Bucket=BUCKET, Key=item["Key"])


class Container:
    """One runner container: its /tmp (a data dir of its own), its processes, every request seen."""

    def __init__(self, data_dir: Path, processes: int = 1) -> None:
        settings = Settings(data_dir=data_dir, runner_processes=processes)
        self.pool = NodeRunnerPool(settings)
        self.function = LocalRunnerFunction(self.pool, LocalBundler(settings))
        self.requests: list[dict[str, Any]] = []

    def invoke(self, request: dict[str, Any], tenant: str) -> dict[str, Any]:
        self.requests.append({**json.loads(json.dumps(request)), "tenant": tenant})
        return self.function.invoke(request, tenant)


def test_a_bundle_made_by_the_runner_runs_by_hash_from_the_bucket_in_a_fresh_container(tmp_path: Path, s3: Any,
                                                                                          bundles: S3Bundles) -> None:
    first = Container(tmp_path / "first")
    bundler = LambdaBundler(first.invoke, bundles=bundles)
    try:
        bundle = bundler.bundle(CODE)
        assert bundler.bundle(CODE) is bundle
    finally:
        first.pool.close()
    assert [r["op"] for r in first.requests] == ["bundle"]  # once per code in a warm container
    put = first.requests[0]["put"]
    assert set(put) == {"cjs", "json"} and all("X-Amz-Signature=" in url for url in put.values())
    assert bundle.code == "" and len(bundle.hash) == 64 and bundle.packages == {}
    stored = s3.get_object(Bucket=BUCKET, Key=f"bundles/{bundle.hash}.cjs")["Body"].read().decode()
    assert "doubled" in stored
    meta = json.loads(s3.get_object(Bucket=BUCKET, Key=f"bundles/{bundle.hash}.json")["Body"].read())
    assert meta == {"packages": {}, "sha256": hashlib.sha256(stored.encode()).hexdigest()} == {
        "packages": {}, "sha256": bundle.sha256}
    assert [r["tenant"] for r in first.requests] == ["bundler"]  # the bundle op's own tenant

    fresh = Container(tmp_path / "fresh")  # nothing of the first container's /tmp
    other_python_container = LambdaBundler(fresh.invoke, bundles=bundles)
    assert other_python_container.bundle(CODE) == bundle and fresh.requests == []  # from the bucket, unasked
    runner = LambdaRunner(fresh.invoke, on_close=fresh.pool.close, bundles=bundles)
    try:
        assert runner.describe(bundle, 10_000).value.key == "bundle-round-trip"
        result = runner.run(bundle, Instance("dc_1", {}, account="u_1"), {"n": 21}, 10_000)
    finally:
        runner.close()
    assert result.error is None and [e.event for e in result.emits] == [{"doubled": 42}]
    assert all("code" not in r["bundle"] and "X-Amz-Signature=" in r["bundle"]["url"] for r in fresh.requests)
    assert not (tmp_path / "fresh" / "bundles" / f"{bundle.hash}.cjs").exists()


def test_code_that_does_not_bundle_is_invalid_and_nothing_is_stored(tmp_path: Path, s3: Any,
                                                                     bundles: S3Bundles) -> None:
    container = Container(tmp_path)
    try:
        with pytest.raises(Invalid) as refused:
            LambdaBundler(container.invoke, bundles=bundles).bundle(
                'import secrets from "/etc/passwd"\nexport default { run() { return secrets } }')
    finally:
        container.pool.close()
    assert "not allowed" in refused.value.message
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount", 0) == 0


EVIL = """export default {
  key: "bundle-round-trip", name: "Round trip", version: "0.0.1", type: "source", props: {},
  async run() { this.$emit({ evil: true }) },
}"""


def test_a_bundle_changed_in_the_bucket_is_refused_not_run(tmp_path: Path, s3: Any, bundles: S3Bundles) -> None:
    """The bundle bucket is no channel between tenants: whoever rewrites a bundle there (another
    tenant's environment holding a URL it should not, a bucket policy gone wrong) gets nothing run.
    The runner loads a bundle from the bucket only if its content hashes to the name recorded when
    it was made (before: it ran whatever the bucket held under the code's hash)."""
    first = Container(tmp_path / "first")
    try:
        bundle = LambdaBundler(first.invoke, bundles=bundles).bundle(CODE)
        evil = LocalBundler(Settings(data_dir=tmp_path / "first")).bundle(EVIL).code
    finally:
        first.pool.close()
    s3.put_object(Bucket=BUCKET, Key=f"bundles/{bundle.hash}.cjs", Body=evil.encode())
    fresh = Container(tmp_path / "fresh")
    runner = LambdaRunner(fresh.invoke, on_close=fresh.pool.close, bundles=bundles)
    try:
        with pytest.raises(RunnerError) as refused:
            runner.run(bundle, Instance("dc_1", {}, account="u_1"), {"n": 21}, 10_000)
    finally:
        runner.close()
    assert refused.value.code == "BUNDLE_CORRUPT", refused.value
    assert f"does not hash to its name {bundle.sha256}" in refused.value.message


def test_each_tenant_has_runner_processes_of_its_own_and_no_other_tenants_call(tmp_path: Path) -> None:
    """The emulated runner function as Lambda's tenant isolation mode: each account's runs go to a
    runner process of that account's (tenant's) own; an invocation whose request names another
    account than its tenant is refused, and so are the bundle op as an account and a run as the
    bundler's tenant."""
    container = Container(tmp_path, processes=4)
    bundle = LocalBundler(Settings(data_dir=tmp_path)).bundle(PID)
    run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 10_000,
           "bundle": {"hash": bundle.hash, "code": bundle.code}, "event": {}}
    try:
        a = container.invoke({**run, "account": "account:u_a"}, "account:u_a")
        b = container.invoke({**run, "account": "account:u_b"}, "account:u_b")
        assert a["ok"] and b["ok"], (a, b)
        pids = {t: container.pool._processes[t].live.proc.pid for t in ("account:u_a", "account:u_b")}
        assert pids["account:u_a"] != pids["account:u_b"], pids
        refused = [container.invoke({**run, "account": "account:u_b"}, "account:u_a"),
                   container.invoke({"op": "bundle", "code": CODE, "lock": {}}, "account:u_a"),
                   container.invoke({**run, "account": "bundler"}, "bundler")]
        assert [r["error"]["code"] for r in refused] == ["TENANT_REFUSED"] * 3, refused
        assert "a request of account 'account:u_b' is refused" in refused[0]["error"]["message"]
        # no process was started or used for the refused calls: still one per tenant, the same ones
        assert sorted(container.pool._processes) == ["account:u_a", "account:u_b"]
        assert {t: container.pool._processes[t].live.proc.pid for t in pids} == pids
    finally:
        container.pool.close()


PID = """export default { key: "pid", name: "Pid", version: "0.0.1", type: "source", props: {},
  async run() { this.$emit({ ok: true }) } }"""
