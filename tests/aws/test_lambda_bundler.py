"""Bundling on AWS is the runner Lambda's (op `bundle`): LambdaBundler gets the hash and npm
versions back, the bundle lands in the bundle bucket by code hash, and a runner container that
has not got it (a fresh /tmp) runs it by hash from the bucket; no code travels in a payload.
Here the emulated runner function (the sandboxed local runner and bundler) over moto's S3."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from headwater.adapters.aws.lambda_bundler import LambdaBundler
from headwater.adapters.aws.lambda_runner import LambdaRunner
from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.domain.errors import Invalid
from headwater.emulated.runner import EmulatedRunnerFunction
from headwater.ports import Instance
from headwater.settings import Settings

BUCKET = "headwater-bundlebucket"
CODE = """export default {
  key: "bundle-round-trip", name: "Round trip", version: "0.0.1", type: "source", props: {},
  async run(event) { this.$emit({ doubled: event.n * 2 }) },
}"""


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    credentials = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t"}
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client


class Container:
    """One runner container: its /tmp (a data dir of its own), its processes, every request seen."""

    def __init__(self, data_dir: Path, s3: Any) -> None:
        settings = Settings(data_dir=data_dir, runner_processes=1)
        self.pool = NodeRunnerPool(settings)
        self.function = EmulatedRunnerFunction(self.pool, LocalBundler(settings), s3, BUCKET)
        self.requests: list[dict[str, Any]] = []

    def invoke(self, request: dict[str, Any], account: str) -> dict[str, Any]:
        self.requests.append(json.loads(json.dumps(request)))
        return self.function.invoke(request, account)


def test_a_bundle_made_by_the_runner_runs_by_hash_from_the_bucket_in_a_fresh_container(tmp_path: Path,
                                                                                          s3: Any) -> None:
    first = Container(tmp_path / "first", s3)
    bundler = LambdaBundler(first.invoke)
    try:
        bundle = bundler.bundle(CODE)
        assert bundler.bundle(CODE) is bundle
    finally:
        first.pool.close()
    assert [r["op"] for r in first.requests] == ["bundle"]  # once per code in a warm container
    assert bundle.code == "" and len(bundle.hash) == 64 and bundle.packages == {}
    stored = s3.get_object(Bucket=BUCKET, Key=f"bundles/{bundle.hash}.cjs")["Body"].read().decode()
    assert "doubled" in stored
    meta = json.loads(s3.get_object(Bucket=BUCKET, Key=f"bundles/{bundle.hash}.json")["Body"].read())
    assert meta == {"packages": {}}

    fresh = Container(tmp_path / "fresh", s3)  # nothing of the first container's /tmp
    runner = LambdaRunner(fresh.invoke, on_close=fresh.pool.close)
    try:
        assert runner.describe(bundle, 10_000).key == "bundle-round-trip"
        result = runner.run(bundle, Instance("dc_1", {}, account="u_1"), {"n": 21}, 10_000)
    finally:
        runner.close()
    assert result.error is None and [e.event for e in result.emits] == [{"doubled": 42}]
    assert all("code" not in r.get("bundle", {}) for r in fresh.requests)
    assert not (tmp_path / "fresh" / "bundles" / f"{bundle.hash}.cjs").exists()


def test_code_that_does_not_bundle_is_invalid_and_nothing_is_stored(tmp_path: Path, s3: Any) -> None:
    container = Container(tmp_path, s3)
    try:
        with pytest.raises(Invalid) as refused:
            LambdaBundler(container.invoke).bundle(
                'import secrets from "/etc/passwd"\nexport default { run() { return secrets } }')
    finally:
        container.pool.close()
    assert "not allowed" in refused.value.message
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount", 0) == 0
