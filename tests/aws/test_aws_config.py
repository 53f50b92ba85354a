"""Which endpoint each AWS client of the functions talks to: under `sam local`, the runner's
Lambda API (`sam local start-lambda`) is apart from the moto server holding the rest."""

from __future__ import annotations

import pytest

from headwater.adapters.aws.config import AwsConfig
from headwater.bootstrap import _client


@pytest.fixture(autouse=True)
def region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def test_the_lambda_client_takes_its_own_endpoint_when_one_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADWATER_AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    monkeypatch.setenv("HEADWATER_LAMBDA_ENDPOINT_URL", "http://127.0.0.1:3001")
    config = AwsConfig()
    assert _client({}, "lambda", config).meta.endpoint_url == "http://127.0.0.1:3001"
    assert _client({}, "kms", config).meta.endpoint_url == "http://127.0.0.1:5000"


def test_without_one_every_client_shares_the_aws_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADWATER_AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    monkeypatch.delenv("HEADWATER_LAMBDA_ENDPOINT_URL", raising=False)
    assert _client({}, "lambda", AwsConfig()).meta.endpoint_url == "http://127.0.0.1:5000"


def test_on_aws_itself_the_lambda_client_uses_the_regional_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADWATER_AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("HEADWATER_LAMBDA_ENDPOINT_URL", "")
    assert _client({}, "lambda", AwsConfig()).meta.endpoint_url == "https://lambda.us-east-1.amazonaws.com"
