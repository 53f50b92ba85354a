"""The SQS consumers' idempotency records (Powertools, on moto): a standard queue's message is
handled once per message id through one; a FIFO queue's batch goes whole to the task queue without
one, and so do a webhook attempt that carries its number and an inline run's fallback (docs/aws.md,
Cost)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from headwater.entrypoints.aws import runtime


class Queue:
    def __init__(self) -> None:
        self.handled: list[str] = []
        self.calls: list[list[str]] = []

    def handle_records(self, records: list[dict[str, Any]]) -> dict[str, list[dict[str, str]]]:
        self.handled += [r["messageId"] for r in records]
        self.calls.append([r["messageId"] for r in records])
        return {"batchItemFailures": []}


def record(message_id: str, queue: str, body: str = "{}") -> dict[str, Any]:
    return {"messageId": message_id, "receiptHandle": f"r-{message_id}", "body": body, "attributes": {},
            "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
            "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{queue}", "awsRegion": "us-east-1"}


def context() -> Any:
    return SimpleNamespace(function_name="RunQueueFunction", memory_limit_in_mb=1024, aws_request_id="req-1",
                           invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:RunQueueFunction",
                           get_remaining_time_in_millis=lambda: 60_000)


def test_standard_messages_are_recorded_once_and_fifo_ones_go_without(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t",
                        "HEADWATER_IDEMPOTENCY_TABLE": "idempotency"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(TableName="idempotency", BillingMode="PAY_PER_REQUEST",
                              AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                              KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
        queue = Queue()
        monkeypatch.setattr(runtime, "services", lambda: SimpleNamespace(adapters=SimpleNamespace(queue=queue)))
        monkeypatch.setattr(runtime, "_dynamodb", lambda: dynamodb)
        handler = runtime.sqs_handler("Runs")

        attempt = '{"type": "deliver_webhook", "delivery_id": "msg_1", "manual": false, "attempt": 2}'
        manual = '{"type": "deliver_webhook", "delivery_id": "msg_1", "manual": true, "attempt": null}'
        fallback = '{"type": "run_source", "source_id": "dc_1", "not_before": 0.0, "inline": true}'
        for _ in range(2):  # SQS delivering each twice
            answer = handler({"Records": [record("m-std", "headwater-RunQueue"),
                                          record("m-attempt", "headwater-WebhookDeliveryQueue", attempt),
                                          record("m-manual", "headwater-WebhookDeliveryQueue", manual),
                                          record("m-inline", "headwater-RunQueue", fallback)]}, context())
            assert answer == {"batchItemFailures": []}
            fifo = [record(i, "headwater-RunOrderQueue.fifo") for i in ("m-fifo", "m-fifo-2")]
            assert handler({"Records": fifo}, context()) == {"batchItemFailures": []}

        # the repeats left to the lane's applied task ids, and to the attempts the delivery records
        # and an inline run's fallback to its done mark (or, when it ran, the lane's applied ids)
        assert queue.handled == ["m-std", "m-attempt", "m-manual", "m-inline", "m-fifo", "m-fifo-2",
                                 "m-attempt", "m-inline", "m-fifo", "m-fifo-2"]
        # a FIFO batch goes to the queue whole (a source's runs in it: one runner call, one commit)
        assert [c for c in queue.calls if len(c) > 1] == [["m-fifo", "m-fifo-2"]] * 2
        items = dynamodb.scan(TableName="idempotency")["Items"]
        assert len(items) == 2  # the standard message's and the manual retry's


def test_a_fifo_batch_reports_the_failures_the_queue_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    class Failing(Queue):
        def handle_records(self, records: list[dict[str, Any]]) -> dict[str, list[dict[str, str]]]:
            super().handle_records(records)
            return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records[1:]]}

    queue = Failing()
    monkeypatch.setattr(runtime, "services", lambda: SimpleNamespace(adapters=SimpleNamespace(queue=queue)))
    monkeypatch.setattr(runtime, "idempotency", lambda: None)
    handler = runtime.sqs_handler("Runs")
    fifo = [record(f"m-{i}", "headwater-RunOrderQueue.fifo") for i in range(3)]
    assert handler({"Records": fifo}, context()) == {"batchItemFailures": [{"itemIdentifier": "m-1"},
                                                                           {"itemIdentifier": "m-2"}]}
    assert queue.calls == [["m-0", "m-1", "m-2"]]


def test_the_timer_target_hands_every_delivery_to_the_tick_without_a_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scheduler delivers at least once: the handler keeps no idempotency record (no table here:
    one would fail), each delivery goes to `timers.tick`, whose conditional state save drops a
    repeat (tests/services/test_services.py: a tick delivered twice fires once)."""
    from headwater.domain.commands import SyncSchedule, TimerTick, to_message

    for name, value in {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t",
                        "HEADWATER_IDEMPOTENCY_TABLE": "no-such-table"}.items():
        monkeypatch.setenv(name, value)
    taken: list[str] = []

    class Timers:
        def tick(self, tasks: list[Any]) -> list[bool]:
            fresh = [t.id not in taken for t in tasks]
            taken.extend(t.id for t in tasks)
            return fresh

    with mock_aws():
        monkeypatch.setattr(runtime, "services", lambda: SimpleNamespace(timers=Timers()))
        handler = runtime.timer_handler()
        event = to_message(TimerTick("src_1", 1_795_800_000.0))
        assert [handler(event, context()) for _ in range(2)] == [{"ticked": True}, {"ticked": False}]
        assert taken == ["tick:src_1:1795800000.0"] * 2
        with pytest.raises(ValueError, match="not a timer tick"):
            handler(to_message(SyncSchedule("src_1")), context())
