"""Bundling on AWS is the runner Lambda's (op `bundle`), and the runner has no AWS permission:
LambdaBundler hands it presigned PUT URLs of the bundle's two objects and gets the hash and npm
versions back; a Python container that finds the bundle in the bucket does not ask the runner; a
runner container that has not got it (a fresh /tmp) runs it through the presigned GET the request
carries. No code travels in a payload. Here the emulated runner function (the sandboxed local
runner and bundler) and a moto server standing for S3, reached by HTTP through the URLs."""

from __future__ import annotations

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
from headwater.ports import Instance
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

    def __init__(self, data_dir: Path) -> None:
        settings = Settings(data_dir=data_dir, runner_processes=1)
        self.pool = NodeRunnerPool(settings)
        self.function = LocalRunnerFunction(self.pool, LocalBundler(settings))
        self.requests: list[dict[str, Any]] = []

    def invoke(self, request: dict[str, Any], account: str) -> dict[str, Any]:
        self.requests.append(json.loads(json.dumps(request)))
        return self.function.invoke(request, account)


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
    assert meta == {"packages": {}}

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
