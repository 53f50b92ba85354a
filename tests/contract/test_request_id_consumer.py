"""An SQS consumer (runtime.sqs_handler, Powertools batch processing and idempotency on moto) puts
the request id a message carries back: its log lines' correlation id, and bound while the task
queue handles the message (docs/aws.md, Guardrails: the request id through SQS)."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from headwater.adapters.aws import request_ids
from headwater.adapters.aws.dynamodb import DynamoStore, create_tables
from headwater.adapters.aws.sqs_queue import SqsTaskQueue
from headwater.domain.commands import SyncSchedule, to_message
from headwater.entrypoints.aws import runtime
from headwater.ports import Task
from tests.contract.conftest import EVENTS, RESOURCES
from tests.contract.test_sweep import Context


def test_a_consumer_logs_and_handles_a_message_under_its_request_id(
        aws_clients: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    dynamodb, sqs = aws_clients("dynamodb"), aws_clients("sqs")
    create_tables(dynamodb, RESOURCES, EVENTS)
    dynamodb.create_table(TableName="headwater-idempotency", BillingMode="PAY_PER_REQUEST",
                          KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}])
    monkeypatch.setenv("HEADWATER_IDEMPOTENCY_TABLE", "headwater-idempotency")
    monkeypatch.setattr(runtime, "_dynamodb", lambda: dynamodb)
    url = sqs.create_queue(QueueName="runs")["QueueUrl"]
    queue = SqsTaskQueue(sqs, url, DynamoStore(dynamodb, RESOURCES, EVENTS))
    seen: list[tuple[str | None, str | None]] = []

    def sync(tasks: list[Task], _: Any) -> list[Any]:
        seen.append((request_ids.current.get(), runtime.logger.get_correlation_id()))
        return [None for _ in tasks]

    queue.handle(SyncSchedule, sync)
    monkeypatch.setattr(runtime, "services", lambda: SimpleNamespace(adapters=SimpleNamespace(queue=queue)))
    handler = runtime.sqs_handler("Runs")
    record = {"messageId": "m-1", "receiptHandle": "r-1", "body": json.dumps(to_message(SyncSchedule("dc_a"))),
              "attributes": {"ApproximateReceiveCount": "1"}, "eventSource": "aws:sqs",
              "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:runs", "awsRegion": "us-east-1",
              "md5OfBody": "", "messageAttributes": {"request_id": {"stringValue": "req-9", "dataType": "String"}}}
    assert handler({"Records": [record]}, Context()) == {"batchItemFailures": []}
    assert seen == [("req-9", "req-9")]
