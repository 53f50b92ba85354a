"""The scheduled sweep (SweepFunction's handler) on moto: an outbox item a crash left behind is sent,
a timer chain whose tick was lost is re-armed, each once however often the sweep runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from headwater.adapters.aws.dynamodb import DynamoStore, create_tables
from headwater.adapters.aws.scheduler import EventBridgeScheduler
from headwater.adapters.aws.sqs_queue import SqsTaskQueue
from headwater.domain.commands import SyncSchedule, from_message
from headwater.domain.timers import Timer
from headwater.entrypoints.aws import runtime
from tests.contract.conftest import EVENTS, RESOURCES

NOW = 1_736_942_400.0
LATER_S = 300.0  # how long after the crash the sweep runs


class Later(DynamoStore):
    """The store as a sweep sees it LATER_S after the outbox item was written."""

    def pending_outbox(self, older_than_s: float) -> list[Any]:
        return super().pending_outbox(older_than_s - LATER_S)


@dataclass
class Context:  # what Powertools' Logger and idempotency read of a Lambda context
    function_name: str = "headwater-SweepFunction"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:headwater-SweepFunction"
    aws_request_id: str = "sweep-1"

    def get_remaining_time_in_millis(self) -> int:  # Powertools' idempotency reads it
        return 60_000


def test_the_sweep_sends_a_crashed_outbox_item_and_rearms_a_lost_chain_once(
        aws_clients: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    dynamodb, sqs = aws_clients("dynamodb"), aws_clients("sqs")
    create_tables(dynamodb, RESOURCES, EVENTS)
    url = sqs.create_queue(QueueName="runs")["QueueUrl"]
    store = Later(dynamodb, RESOURCES, EVENTS)
    queue = SqsTaskQueue(sqs, url, store)
    now = [NOW]
    scheduler = EventBridgeScheduler(aws_clients("scheduler"), sqs, dynamodb, group_name="timers", queue_arn="arn:q",
                                     queue_url=url, role_arn="arn:role", dead_letter_arn=None, table_name=RESOURCES,
                                     clock=lambda: now[0])
    crashed = DynamoStore(dynamodb, RESOURCES, EVENTS)  # committed, then died before handing it to SQS
    with crashed.uow() as uow:
        uow.outbox.add(SyncSchedule("dc_crashed"))
        uow.commit()
    scheduler.set("dc_chain", Timer.from_interval(10))
    sqs.purge_queue(QueueUrl=url)  # the chain's first tick is lost
    now[0] = NOW + LATER_S
    monkeypatch.setattr(runtime, "services", lambda: SimpleNamespace(
        adapters=SimpleNamespace(queue=queue, scheduler=scheduler), stalls=None))
    handler = runtime.sweep_handler()

    assert handler({}, Context()) == {"outbox": 1, "chains": 1}
    assert handler({}, Context(aws_request_id="sweep-2")) == {"outbox": 0, "chains": 0}

    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    bodies = [json.loads(m["Body"]) for m in received]
    assert [from_message({k: v for k, v in b.items() if k not in ("task_id", "not_before")}) for b in bodies] == [
        SyncSchedule("dc_crashed")]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert attributes["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"  # the chain's new tick
    item = dynamodb.get_item(TableName=RESOURCES, Key={"pk": {"S": "dc_chain"}, "sk": {"S": "schedule"}})["Item"]
    assert float(item["due_at"]["N"]) == NOW + LATER_S + 10  # the tick after now, on the chain's grid
