"""The storage contract's fixtures: the same tests against the SQLite store, the DynamoDB one and
the in-memory fakes the service tests run on (tests/fakes.py), so a service test on fakes stands
for what the real stores do.

DynamoDB runs under moto. moto applies a request in several steps without a lock (a transaction
copies the table, checks, writes, and restores the copy on failure), so two threads could
interleave inside one request, which real DynamoDB never does: `Serialized` makes each request
atomic, as it is on AWS, and leaves the interleaving of requests (what the adapter must handle)
as it is."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from headwater.adapters.aws.dynamodb import DynamoStore, create_tables
from headwater.ports import SourceLease, Task, UnitOfWorkFactory, UsageRepository

REGION = "us-east-1"
RESOURCES = "headwater-resources"
EVENTS = "headwater-events"


class Serialized:
    """A boto3 client whose calls run one at a time; `calls` records (operation, parameters)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls.append((name, kwargs))
                return attr(*args, **kwargs)

        return call


@dataclass
class Backend:
    """What the contract tests use of a store, whichever it is."""

    name: str
    uow: UnitOfWorkFactory
    usage: UsageRepository
    lease: SourceLease
    raw: Any
    committed: list[Task] = field(default_factory=list)


def backend(name: str, store: Any) -> Backend:
    b = Backend(name, store.uow, store.usage, store.lease, store)
    store.on_commit(b.committed.extend)
    return b


class _Fake:
    """The fakes of tests/fakes.py as one store: their unit of work, usage, lease and ingest
    counts; the tasks a commit queues are kept as the stores hand them on (`on_commit`)."""

    def __init__(self) -> None:
        from tests.fakes import FakeIngestCounts, FakeLease, FakeQueue, FakeStore, FakeUsage

        self.queue = FakeQueue()
        self.store = FakeStore(self.queue, FakeUsage())
        self.uow, self.usage, self.lease = self.store.uow, self.store.usage, FakeLease()
        self.ingest_counts = FakeIngestCounts()

    def on_commit(self, hand_on: Callable[[list[Task]], None]) -> None:
        enqueue = self.queue.enqueue

        def enqueue_and_hand_on(commands: list[Any]) -> None:
            before = len(self.queue.pending)
            enqueue(commands)
            now = time.time()
            tasks = [replace(task, not_before=now + delay if delay else 0.0)
                     for task, delay in self.queue.pending[before:]]
            if tasks:
                hand_on(tasks)
        self.queue.enqueue = enqueue_and_hand_on  # type: ignore[method-assign]


def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_DEFAULT_REGION": REGION, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def aws_clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Any]]:
    """moto for the test's duration; yields a factory of serialized boto3 clients."""
    aws_env(monkeypatch)
    with mock_aws():
        yield lambda service: Serialized(boto3.client(service, region_name=REGION))


@pytest.fixture
def dynamo(aws_clients: Callable[[str], Any]) -> DynamoStore:
    client = aws_clients("dynamodb")
    create_tables(client, RESOURCES, EVENTS)
    return DynamoStore(client, RESOURCES, EVENTS)


@pytest.fixture(params=["sqlite", "dynamodb", "fakes"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        from headwater.adapters.local.sqlite.store import SqliteStore

        return backend("sqlite", SqliteStore(tmp_path / "headwater.db"))
    if request.param == "fakes":
        return backend("fakes", _Fake())
    return backend("dynamodb", request.getfixturevalue("dynamo"))


def aws_environment(aws_clients: Callable[[str], Any],
                    monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, str]]:
    """The tables, queues and schedule group of an AWS deployment under moto, and the settings that
    name them: (the clients `aws_adapters` takes, the queue URLs by name)."""
    dynamodb, sqs, scheduler = aws_clients("dynamodb"), aws_clients("sqs"), aws_clients("scheduler")
    create_tables(dynamodb, RESOURCES, EVENTS)
    queues = {name: sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("runs", "webhooks", "deletions")}
    attributes = sqs.get_queue_attributes(QueueUrl=queues["runs"], AttributeNames=["QueueArn"])["Attributes"]
    scheduler.create_schedule_group(Name="timers")
    for name, value in {"RESOURCES_TABLE": RESOURCES, "EVENTS_TABLE": EVENTS, "RUN_QUEUE_URL": queues["runs"],
                        "RUN_QUEUE_ARN": attributes["QueueArn"], "WEBHOOK_QUEUE_URL": queues["webhooks"],
                        "EVENT_DELETION_QUEUE_URL": queues["deletions"], "SCHEDULE_GROUP": "timers",
                        "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler"}.items():
        monkeypatch.setenv(f"HEADWATER_{name}", value)
    return {"dynamodb": dynamodb, "sqs": sqs, "scheduler": scheduler}, queues
