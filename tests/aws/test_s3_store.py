"""The S3 destination (`$.send.s3`'s adapter, adapters/destinations.py) over moto in-process: it puts
the payload, and a bucket it cannot write to is a failed send. Workflows sending through it, on a
running service: tests/e2e/test_destinations.py."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from headwater.adapters.destinations import S3ObjectStore
from headwater.settings import Settings


def test_the_s3_store_puts_the_payload(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket="orders")
        store = S3ObjectStore(Settings(s3_enabled=True), client)
        assert store.configured
        result = store.put("orders", "in/x.json", json.dumps({"ok": True}).encode(), "application/json")
        assert result.status == 200
        assert json.loads(client.get_object(Bucket="orders", Key="in/x.json")["Body"].read()) == {"ok": True}
        assert store.put("missing-bucket", "k", b"{}", "application/json").status is None
