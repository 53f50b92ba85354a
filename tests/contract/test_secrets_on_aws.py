"""Secret props on AWS (under moto): envelope encryption with the KMS key (KmsSecrets) through the
AWS adapter set, no key in the environment, data keys cached per container, and the runner given
the decrypted props of the run it executes and nothing else."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from cryptography.exceptions import InvalidTag

from headwater.adapters.aws.dynamodb import create_tables
from headwater.adapters.aws.dynamodb.codec import load
from headwater.adapters.aws.kms_secrets import CONTEXT, KmsSecrets
from headwater.adapters.local.node_runner import instance_request
from headwater.bootstrap import aws_adapters, bootstrap
from headwater.domain.runs import RunResult
from headwater.ports import Instance
from headwater.services.sources import SourceRequest
from headwater.settings import Settings
from tests.contract.conftest import EVENTS, REGION, RESOURCES
from tests.fakes import FakeBundler, FakeRunner, to_end
from tests.services.test_services import HTTP, component_code

SECRET_PROPS = [*HTTP, {"name": "token", "type": "string", "secret": True},
                {"name": "region", "type": "string"}]


def kms_key(kms: Any) -> str:
    return str(kms.create_key(Description="secret props")["KeyMetadata"]["Arn"])


def test_values_round_trip_and_the_token_holds_neither_value_nor_key(aws_clients: Callable[[str], Any]) -> None:
    kms = aws_clients("kms")
    secrets = KmsSecrets(lambda: kms, kms_key(kms))
    for value in ("s3cr3t-value", {"$auth": {"oauth_access_token": "tok-123"}}, 42, ["a", None]):
        token = secrets.encrypt(value)
        assert token.startswith("kms1.") and "s3cr3t" not in token and "tok-123" not in token
        assert secrets.decrypt(token) == value
    assert secrets.encrypt("same") != secrets.encrypt("same")  # a fresh nonce each time
    made = next(kwargs for name, kwargs in kms.calls if name == "generate_data_key")
    assert made["EncryptionContext"] == CONTEXT and made["KeySpec"] == "AES_256"


def test_data_keys_are_cached_per_container_and_renewed(aws_clients: Callable[[str], Any]) -> None:
    kms = aws_clients("kms")
    key = kms_key(kms)
    now = [0.0]
    writer = KmsSecrets(lambda: kms, key, data_key_ttl_s=3600, clock=lambda: now[0])
    tokens = [writer.encrypt(f"value-{i}") for i in range(20)]
    now[0] = 3601.0
    tokens.append(writer.encrypt("after an hour"))
    assert [name for name, _ in kms.calls] == ["create_key", "generate_data_key", "generate_data_key"]

    reader = KmsSecrets(lambda: kms, key)  # another container: nothing cached
    assert [reader.decrypt(t) for t in tokens] == [f"value-{i}" for i in range(20)] + ["after an hour"]
    decrypts = [kwargs for name, kwargs in kms.calls if name == "decrypt"]
    assert len(decrypts) == 2 and all(d["KeyId"] == key and d["EncryptionContext"] == CONTEXT for d in decrypts)


def test_another_key_or_a_changed_value_does_not_decrypt(aws_clients: Callable[[str], Any]) -> None:
    kms = aws_clients("kms")
    ours, theirs = kms_key(kms), kms_key(kms)
    token = KmsSecrets(lambda: kms, ours).encrypt("s3cr3t")
    with pytest.raises(Exception, match="IncorrectKeyException|InvalidCiphertext|AccessDenied"):
        KmsSecrets(lambda: kms, theirs).decrypt(token)
    prefix, wrapped, body = token.split(".")
    other = KmsSecrets(lambda: kms, ours).encrypt("other")
    with pytest.raises(InvalidTag):  # a value moved under another data key
        KmsSecrets(lambda: kms, ours).decrypt(f"{prefix}.{other.split('.')[1]}.{body}")


def test_a_value_of_the_former_fernet_key_is_refused_with_a_reason(aws_clients: Callable[[str], Any]) -> None:
    from cryptography.fernet import Fernet

    from headwater.domain.errors import Unavailable

    kms = aws_clients("kms")
    legacy = Fernet(Fernet.generate_key()).encrypt(b'"s3cr3t"').decode()
    with pytest.raises(Unavailable, match="set it again"):
        KmsSecrets(lambda: kms, kms_key(kms)).decrypt(legacy)


def test_functions_that_never_use_a_secret_make_no_kms_client() -> None:
    connected: list[bool] = []
    KmsSecrets(lambda: connected.append(True), "arn:aws:kms:us-east-1:123456789012:key/x")
    assert connected == []


def test_secret_props_round_trip_through_the_aws_store_and_each_run_gets_only_its_own(
        aws_clients: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The AWS adapter set as a function builds it (HEADWATER_KMS_KEY_ARN, no HEADWATER_SECRET_KEY):
    DynamoDB holds only KMS envelopes, the API masks, and a run's runner request carries its own
    source's decrypted props, not another source's, and no envelope or key."""
    dynamodb, sqs, scheduler, kms = (aws_clients(s) for s in ("dynamodb", "sqs", "scheduler", "kms"))
    create_tables(dynamodb, RESOURCES, EVENTS)
    run_queue = sqs.create_queue(QueueName="runs")["QueueUrl"]
    scheduler.create_schedule_group(Name="timers")
    monkeypatch.delenv("HEADWATER_SECRET_KEY", raising=False)
    for name, value in {"RESOURCES_TABLE": RESOURCES, "EVENTS_TABLE": EVENTS, "RUN_QUEUE_URL": run_queue,
                        "RUN_QUEUE_ARN": "arn:aws:sqs:us-east-1:123456789012:runs", "SCHEDULE_GROUP": "timers",
                        "KMS_KEY_ARN": kms_key(kms)}.items():
        monkeypatch.setenv(f"HEADWATER_{name}", value)
    runner = FakeRunner()
    requests: list[dict[str, Any]] = []

    def script(instance: Instance, event: Any) -> RunResult:
        requests.append(json.loads(json.dumps({**instance_request(instance), "event": event})))
        return RunResult()

    runner.script = script
    settings = Settings(data_dir=tmp_path, backend="aws")
    adapters = aws_adapters(settings, {"dynamodb": dynamodb, "sqs": sqs, "scheduler": scheduler, "kms": kms},
                            runner, FakeBundler())
    services = bootstrap(settings, adapters)
    assert not (tmp_path / "secret.key").exists()  # no file key on AWS
    queue: Any = adapters.queue

    _, api_key = services.accounts.create_user("ada", "ada@example.com", "paid")
    ada = services.accounts.authenticate(api_key)
    code = component_code(configurable_props=SECRET_PROPS)
    mine = to_end(services.sources.create(ada, SourceRequest(component_code=code, name="mine",
                                                      configured_props={"token": "tok-MINE", "region": "eu"}), None))
    theirs = to_end(services.sources.create(ada, SourceRequest(component_code=code, name="theirs",
                                                        configured_props={"token": "tok-THEIRS", "region": "us"}),
                                     None))

    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=RESOURCES)["Items"]
    stored = json.dumps([{k: load(item) if k == "body_z" else v for k, v in item.items()} for item in items])
    assert "tok-MINE" not in stored and "tok-THEIRS" not in stored and stored.count("kms1.") >= 2
    assert services.sources.get(ada, mine.id).configured_props["token"]["$secret"].startswith("kms1.")

    asyncio.run(services.ingest.receive(mine.endpoint_id or "", {"n": 1}))
    while queue.poll_once():
        pass
    request, = requests
    assert request["instance"] == mine.id
    assert request["props"]["token"] == "tok-MINE" and request["props"]["region"] == "eu"
    wire = json.dumps(request)
    assert "tok-THEIRS" not in wire and theirs.id not in wire and "kms1." not in wire
    assert "KMS_KEY" not in wire and "arn:aws:kms" not in wire
