"""The TaskQueue over SQS (moto) with the DynamoDB store: sending committed tasks, delays beyond
SQS's 900 s, lanes held by leases, retries, and runs done inline for their response.

moto holds delayed messages back for real, so a message sent back with a delay is checked by its
SendMessageBatch parameters and the queue's delayed count, never by waiting for it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from headwater.adapters.aws import request_ids
from headwater.adapters.aws.dynamodb import DynamoStore, create_tables
from headwater.adapters.aws.sqs_queue import SqsTaskQueue
from headwater.domain.commands import (
    Command,
    DeleteEvents,
    DeliverWebhook,
    FanOut,
    RunSource,
    SyncSchedule,
    from_message,
    to_message,
)
from headwater.ports import Task, TryLater
from tests.contract.conftest import EVENTS, RESOURCES

NOW = 1_736_942_400.0


@dataclass
class Setup:
    queue: SqsTaskQueue
    store: DynamoStore
    sqs: Any
    url: str
    seen: list[tuple[str, list[Task]]] = field(default_factory=list)  # (handler, batch) in call order

    def counts(self, url: str | None = None) -> tuple[int, int, int]:
        """(visible, in flight, delayed) messages."""
        a = self.sqs.get_queue_attributes(QueueUrl=url or self.url, AttributeNames=["All"])["Attributes"]
        return (int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"]),
                int(a["ApproximateNumberOfMessagesDelayed"]))

    def sent_back(self) -> list[tuple[dict[str, Any], int]]:
        """Messages sent to the standard queue in batches (the FIFO queue's have no delay)."""
        return [(json.loads(e["MessageBody"]), e["DelaySeconds"]) for name, params in self.sqs.calls
                if name == "send_message_batch" and params["QueueUrl"] == self.url for e in params["Entries"]]

    def commit(self, *commands: Command, delay_s: float = 0.0) -> None:
        with self.store.uow() as uow:
            for command in commands:
                uow.outbox.add(command, delay_s)
            uow.commit()

    def record(self, name: str, fail: bool = False,
               respond: dict[str, Any] | None = None) -> Callable[[list[Task], Any], list[Any]]:
        def handler(tasks: list[Task], on_partial: Any) -> list[Any]:
            self.seen.append((name, tasks))
            if respond is not None:
                on_partial(tasks[0], respond)
            if fail:
                raise RuntimeError("handler failed")
            return [f"{name}:{t.id}" for t in tasks]
        return handler


@pytest.fixture
def setup(aws_clients: Callable[[str], Any]) -> Setup:
    dynamodb, sqs = aws_clients("dynamodb"), aws_clients("sqs")
    create_tables(dynamodb, RESOURCES, EVENTS)
    store = DynamoStore(dynamodb, RESOURCES, EVENTS)
    url = sqs.create_queue(QueueName="runs")["QueueUrl"]
    queue = SqsTaskQueue(sqs, url, store, lease_wait_s=0, inline_fallback_s=0)
    store.on_commit(queue.send)
    return Setup(queue, store, sqs, url)


def run(source_id: str, n: int = 0) -> RunSource:
    return RunSource(source_id, {"n": n}, 1000, "http")


def test_committed_tasks_are_sent_and_leave_the_outbox(setup: Setup) -> None:
    setup.commit(run("dc_a"), DeleteEvents("dc_a", None))
    messages = setup.sqs.receive_message(QueueUrl=setup.url, MaxNumberOfMessages=10)["Messages"]
    bodies = sorted((json.loads(m["Body"]) for m in messages), key=lambda b: b["type"])
    assert [b["type"] for b in bodies] == ["delete_events", "run_source"]
    assert all(b["task_id"] and b["not_before"] == 0.0 for b in bodies)
    assert setup.store.pending_outbox(older_than_s=-60) == []


def test_commands_go_to_the_queue_of_their_type(setup: Setup) -> None:
    deletions = setup.sqs.create_queue(QueueName="deletions")["QueueUrl"]
    setup.queue.routes = {"delete_events": deletions, "purge_source": deletions}
    setup.commit(run("dc_a"), DeleteEvents("dc_a", None))
    assert setup.counts()[0] == 1 and setup.counts(deletions)[0] == 1


def test_a_poll_runs_tasks_grouped_by_type_and_lane_in_order(setup: Setup) -> None:
    setup.queue.handle(RunSource, setup.record("runs"))
    setup.queue.handle(SyncSchedule, setup.record("sync"))
    for command in (run("dc_a", 1), run("dc_b"), SyncSchedule("dc_a"), run("dc_a", 2)):
        setup.commit(command)
    assert setup.queue.poll_once() == 4
    batches = {(name, tasks[0].command.lane): [t.command for t in tasks] for name, tasks in setup.seen}
    assert batches == {("runs", "dc_a"): [run("dc_a", 1), run("dc_a", 2)], ("runs", "dc_b"): [run("dc_b")],
                       ("sync", "dc_a"): [SyncSchedule("dc_a")]}
    assert all(t.attempts == 0 and len(t.id) > 20 for _, tasks in setup.seen for t in tasks)
    assert setup.counts() == (0, 0, 0)


def test_a_message_not_yet_due_goes_back_with_the_rest_of_its_delay(setup: Setup) -> None:
    setup.queue.clock = lambda: NOW
    setup.queue.handle(SyncSchedule, setup.record("sync"))
    for task_id, not_before in (("far", NOW + 2000), ("near", NOW + 30)):
        body = {**to_message(SyncSchedule("dc_a")), "task_id": task_id, "not_before": not_before}
        setup.sqs.send_message(QueueUrl=setup.url, MessageBody=json.dumps(body))
    assert setup.queue.poll_once() == 0
    assert setup.seen == []
    delays = {body["task_id"]: delay for body, delay in setup.sent_back()}
    assert delays == {"far": 900, "near": 30}  # SQS delays at most 900 s: "far" comes early and goes back again
    assert setup.counts() == (0, 0, 2)


def test_a_failed_handler_has_its_messages_retried_later(setup: Setup) -> None:
    setup.queue.handle(SyncSchedule, setup.record("sync", fail=True))
    setup.commit(SyncSchedule("dc_a"))
    assert setup.queue.poll_once() == 0
    assert len(setup.seen) == 1
    assert setup.counts() == (0, 1, 0)  # not deleted: visible again after the backoff
    changes = [p for name, p in setup.sqs.calls if name == "change_message_visibility_batch"]
    assert [e["VisibilityTimeout"] for e in changes[0]["Entries"]] == [1]


def test_a_lane_busy_elsewhere_is_sent_back_shortly(setup: Setup) -> None:
    setup.queue.handle(RunSource, setup.record("runs"))
    setup.commit(run("dc_a"))
    later = str(int(time.time()) + 600)
    setup.store.tables.client.put_item(TableName=RESOURCES, Item={  # another worker holds dc_a
        "pk": {"S": "dc_a"}, "sk": {"S": "lock"}, "owner": {"S": "other"}, "expires_at": {"N": later}})
    assert setup.queue.poll_once() == 0
    assert setup.seen == []
    assert [(body["type"], delay) for body, delay in setup.sent_back()][-1] == ("run_source", 5)
    assert setup.counts() == (0, 0, 1)


def test_a_handler_waiting_on_another_callers_work_is_sent_back_uncounted_marked_when_first(setup: Setup) -> None:
    """TryLater (a run whose account another caller is refreshing): sent back after its `after_s`,
    as a lane busy elsewhere is (no receive counted), with when it was first sent back, which a
    second TryLater keeps and the handler then sees."""
    setup.queue.clock = lambda: NOW
    tries: list[Task] = []

    def waiting(tasks: list[Task], on_partial: Any) -> list[Any]:
        tries.extend(tasks)
        raise TryLater("another caller is refreshing its account", 0.3)
    setup.queue.handle(RunSource, waiting)
    setup.commit(run("dc_a"))
    assert setup.queue.poll_once() == 0
    body, delay = setup.sent_back()[-1]
    assert (body["type"], body["deferred_since"], delay) == ("run_source", NOW, 1)
    assert setup.counts() == (0, 0, 1)
    setup.queue.clock = lambda: NOW + 5
    setup.sqs.send_message(QueueUrl=setup.url, MessageBody=json.dumps(body))  # as SQS gives it back
    assert setup.queue.poll_once() == 0
    assert [t.deferred_since for t in tries] == [None, NOW]
    assert setup.sent_back()[-1][0]["deferred_since"] == NOW  # the first time it was sent back


def test_an_inline_run_waiting_on_another_callers_work_tries_again_in_place(setup: Setup) -> None:
    tries: list[Task] = []

    def waiting_once(tasks: list[Task], on_partial: Any) -> list[Any]:
        tries.extend(tasks)
        if len(tries) == 1:
            raise TryLater("another caller is refreshing its account", 0.01)
        on_partial(tasks[0], {"status": 200})
        return ["ran"]
    setup.queue.handle(RunSource, waiting_once)
    _, outcome = respond_inline(setup, run("dc_a"))
    assert outcome == {"status": 200}
    assert [t.id for t in tries] == [tries[0].id, tries[0].id] and tries[1].deferred_since is not None


def test_a_message_that_is_not_a_command_is_left_for_the_dead_letter_queue(setup: Setup) -> None:
    setup.sqs.send_message(QueueUrl=setup.url, MessageBody='{"type": "nonsense"}')
    assert setup.queue.poll_once() == 0
    assert setup.counts() == (0, 1, 0)


def test_an_ingested_run_is_queued_under_its_message_id(setup: Setup) -> None:
    setup.queue.handle(RunSource, setup.record("runs"))
    task_id = asyncio.run(setup.queue.ingest(run("dc_a")))
    assert setup.queue.poll_once() == 1
    assert [t.id for _, tasks in setup.seen for t in tasks] == [task_id]


def respond_inline(setup: Setup, command: RunSource) -> tuple[str, Any]:
    """The answer of a request that runs its own run, and the task id its run had."""
    async def main() -> Any:
        answer = await setup.queue.ingest_answered(command, 30)
        await setup.queue.drain()
        return answer
    answer = asyncio.run(main())
    task_id = setup.seen[0][1][0].id if setup.seen else ""
    return task_id, answer


def test_a_run_that_must_respond_runs_inline_and_leaves_nothing_to_run_again(setup: Setup) -> None:
    setup.queue.handle(RunSource, setup.record("runs", respond={"status": 201}))
    task_id, outcome = respond_inline(setup, run("dc_a"))
    assert outcome == {"status": 201}
    assert [t.id for _, tasks in setup.seen for t in tasks] == [task_id]
    assert setup.store.pending_outbox(older_than_s=-3600) == []  # its fallback went with the run
    assert setup.queue.recover(older_than_s=-3600) == 0
    assert setup.queue.poll_once() == 0
    assert len(setup.seen) == 1
    assert setup.counts() == (0, 0, 0)
    assert not [name for name, _ in setup.sqs.calls if name.startswith("send_message")]


def test_an_inline_run_whose_process_died_is_sent_by_the_sweep_once_due(setup: Setup) -> None:
    """Its fallback (an outbox item due `inline_fallback_s` later) outlives a process that died
    mid-run; here the item's delete fails, as if the process had died before it."""
    setup.queue.inline_fallback_s = 900
    setup.queue.handle(RunSource, setup.record("runs"))

    def dies(task_ids: list[str]) -> None:
        raise RuntimeError("the process died")

    setup.store.outbox_done = dies  # type: ignore[method-assign]
    task_id, _ = respond_inline(setup, run("dc_a"))
    del setup.store.outbox_done
    assert setup.queue.recover(older_than_s=120) == 0  # not due yet: the run may still be under way
    assert setup.queue.recover(older_than_s=-900) == 1  # due: sent with its task id
    assert setup.store.pending_outbox(older_than_s=-3600) == []
    setup.queue.handle(RunSource, setup.record("again"))
    assert setup.queue.poll_once() == 1
    assert [(name, tasks[0].id) for name, tasks in setup.seen] == [("runs", task_id), ("again", task_id)]


def test_an_inline_run_without_a_response_resolves_with_its_result(setup: Setup) -> None:
    setup.queue.handle(RunSource, setup.record("runs"))
    task_id, outcome = respond_inline(setup, run("dc_a"))
    assert outcome == f"runs:{task_id}"


def test_a_failed_inline_run_runs_again_from_its_message(setup: Setup) -> None:
    setup.queue.handle(RunSource, setup.record("runs", fail=True))
    task_id, outcome = respond_inline(setup, run("dc_a"))
    assert outcome is None
    assert setup.store.pending_outbox(older_than_s=-3600) == []  # sent at once, not left to the sweep
    setup.queue.handle(RunSource, setup.record("again"))
    assert setup.queue.poll_once() == 1
    assert [(name, tasks[0].id) for name, tasks in setup.seen] == [("runs", task_id), ("again", task_id)]


def test_recovery_sends_what_a_crash_left_in_the_outbox(setup: Setup) -> None:
    crashed = DynamoStore(setup.store.tables.client, RESOURCES, EVENTS)  # committed, never handed over
    with crashed.uow() as uow:
        uow.outbox.add(SyncSchedule("dc_a"))
        uow.commit()
    assert setup.queue.recover(older_than_s=3600) == 0
    assert setup.queue.recover(older_than_s=-60) == 1
    assert setup.counts()[0] == 1
    assert setup.store.pending_outbox(older_than_s=-60) == []


def test_a_lambda_batch_reports_only_its_failures(setup: Setup) -> None:
    setup.queue.handle(RunSource, setup.record("runs"))
    setup.queue.handle(SyncSchedule, setup.record("sync", fail=True))
    setup.commit(run("dc_a"), SyncSchedule("dc_b"))
    received = setup.sqs.receive_message(QueueUrl=setup.url, MaxNumberOfMessages=10,
                                         MessageSystemAttributeNames=["All"])["Messages"]
    records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                "attributes": m["Attributes"], "eventSource": "aws:sqs"} for m in received]
    failing = next(m["MessageId"] for m in received if json.loads(m["Body"])["type"] == "sync_schedule")
    assert setup.queue.handle_records(records) == {"batchItemFailures": [{"itemIdentifier": failing}]}
    assert sorted(name for name, _ in setup.seen) == ["runs", "sync"]
    assert not [name for name, _ in setup.sqs.calls if name == "delete_message_batch"]  # Lambda deletes the rest


def test_a_committed_fan_out_is_handled_at_once_where_its_handler_is(setup: Setup) -> None:
    """No queue round trip (an invocation, three SQS requests) between a run and its subscribers."""
    setup.queue.after_commit = frozenset({"fan_out"})
    setup.queue.handle(FanOut, setup.record("fan_out"))
    setup.commit(FanOut("dc_a", "u_1", "", ("1-1",)), run("dc_a"))
    assert [(name, [t.command.name for t in tasks]) for name, tasks in setup.seen] == [("fan_out", ["fan_out"])]
    assert setup.counts()[0] == 1  # the run went to its queue
    assert setup.store.pending_outbox(older_than_s=-60) == []


def test_a_fan_out_that_fails_at_once_goes_to_its_queue(setup: Setup) -> None:
    setup.queue.after_commit = frozenset({"fan_out"})
    setup.queue.handle(FanOut, setup.record("fan_out", fail=True))
    setup.commit(FanOut("dc_a", "u_1", "", ("1-1",)))
    assert len(setup.seen) == 1
    messages = setup.sqs.receive_message(QueueUrl=setup.url, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["type"] for m in messages] == ["fan_out"]
    assert setup.store.pending_outbox(older_than_s=-60) == []


def test_a_committed_attempt_goes_through_its_now_form_and_none_leaves_it_to_its_queue(setup: Setup) -> None:
    """A webhook's first attempt after the run's commit (`Webhooks.deliver_now`): the `now` form is
    called, not the queue's handler; its None (the webhook was slow lately) sends it to its queue."""
    setup.queue.after_commit = frozenset({"deliver_webhook"})
    left = {"msg_slow"}

    def now(tasks: list[Task], _: Any) -> list[Any] | None:
        setup.seen.append(("now", tasks))
        return None if tasks[0].command.delivery_id in left else ["succeeded"]  # type: ignore[attr-defined]

    setup.queue.handle(DeliverWebhook, setup.record("deliver"), now=now)
    setup.commit(DeliverWebhook("msg_fast", attempt=0))
    setup.commit(DeliverWebhook("msg_slow", attempt=0))
    assert [name for name, _ in setup.seen] == ["now", "now"]
    messages = setup.sqs.receive_message(QueueUrl=setup.url, MaxNumberOfMessages=10)["Messages"]
    assert [command_of(m) for m in messages] == [DeliverWebhook("msg_slow", attempt=0)]
    assert setup.store.pending_outbox(older_than_s=-60) == []


def command_of(message: dict[str, Any]) -> Command:
    body = {k: v for k, v in json.loads(message["Body"]).items() if k not in ("task_id", "not_before", "inline")}
    return from_message(body)


@pytest.fixture
def ordered(setup: Setup) -> str:
    """A FIFO queue for the main queue's commands due now, as template.yaml's RunOrderQueue."""
    attributes = {"FifoQueue": "true", "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}
    url = setup.sqs.create_queue(QueueName="runs.fifo", Attributes=attributes)["QueueUrl"]
    setup.queue.ordered_url = url
    return str(url)


def test_runs_due_now_go_to_the_fifo_queue_grouped_by_source(setup: Setup, ordered: str) -> None:
    setup.queue.handle(RunSource, setup.record("runs"))
    for n in range(3):
        setup.commit(run("dc_a", n))
    task_id = asyncio.run(setup.queue.ingest(run("dc_a", 3)))
    setup.commit(run("dc_b"))
    setup.commit(run("dc_a", 9), delay_s=60)  # delayed: the standard queue (FIFO has no per-message delay)
    assert setup.counts(ordered)[0] == 5 and setup.counts() == (0, 0, 1)
    # SQS gives none of a group's messages while some of it are in flight: one batch per source at a time
    first = setup.sqs.receive_message(QueueUrl=ordered, MaxNumberOfMessages=2,
                                      MessageSystemAttributeNames=["All"])["Messages"]
    assert [command_of(m) for m in first] == [run("dc_a", 0), run("dc_a", 1)]
    assert {m["Attributes"]["MessageGroupId"] for m in first} == {"dc_a"}
    rest = setup.sqs.receive_message(QueueUrl=ordered, MaxNumberOfMessages=10)["Messages"]
    assert [command_of(m) for m in rest] == [run("dc_b")]  # dc_b's only
    setup.sqs.change_message_visibility_batch(QueueUrl=ordered, Entries=[  # all visible again
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
        for i, m in enumerate(first + rest)])
    assert setup.queue.poll_once(queue_url=ordered) == 5
    runs = [t for name, tasks in setup.seen for t in tasks if t.command.lane == "dc_a"]
    assert [t.command for t in runs] == [run("dc_a", n) for n in range(4)] and runs[-1].id == task_id
    assert setup.counts(ordered) == (0, 0, 0)


def test_a_task_sent_twice_to_the_fifo_queue_is_taken_once(setup: Setup, ordered: str) -> None:
    with DynamoStore(setup.store.tables.client, RESOURCES, EVENTS).uow() as uow:  # committed, never handed over
        uow.outbox.add(run("dc_a"))
        uow.commit()
    pending = setup.store.pending_outbox(older_than_s=-60)
    setup.queue.send(pending)
    setup.queue.send(pending)  # a recovery racing the first send: the task id deduplicates it
    assert setup.counts(ordered) == (1, 0, 0)


def test_a_fifo_batch_that_fails_is_retried_on_the_fifo_queue(setup: Setup, ordered: str) -> None:
    setup.queue.handle(RunSource, setup.record("runs", fail=True))
    setup.commit(run("dc_a", 1), run("dc_a", 2))
    received = setup.sqs.receive_message(QueueUrl=ordered, MaxNumberOfMessages=10,
                                         MessageSystemAttributeNames=["All"])["Messages"]
    records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                "attributes": m["Attributes"], "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:runs.fifo"} for m in received]
    failures = setup.queue.handle_records(records)["batchItemFailures"]
    assert sorted(f["itemIdentifier"] for f in failures) == sorted(m["MessageId"] for m in received)
    changes = [p for name, p in setup.sqs.calls if name == "change_message_visibility_batch"]
    assert [p["QueueUrl"] for p in changes] == [ordered]  # the whole group waits there, in its order


def test_the_request_id_goes_with_every_message_the_request_causes(setup: Setup) -> None:
    """docs/aws.md, Tracing: a commit made while handling a request sends its id as a message
    attribute; the consumer handles the message with that id bound, so what its work commits
    carries it on; a Lambda record's attribute (lower-case keys) counts the same."""
    seen: list[str | None] = []

    def sync(tasks: list[Task], _: Any) -> list[Any]:
        seen.append(request_ids.current.get())
        setup.commit(DeleteEvents(tasks[0].command.source_id, None))  # work the message causes
        return [None for _ in tasks]

    setup.queue.handle(SyncSchedule, sync)
    with request_ids.bound("req-1"):
        setup.commit(SyncSchedule("dc_a"))
    setup.commit(SyncSchedule("dc_b"))  # no request behind it: no attribute, no id
    assert setup.queue.poll_once() == 2
    assert sorted(seen, key=str) == [None, "req-1"]
    caused = setup.sqs.receive_message(QueueUrl=setup.url, MaxNumberOfMessages=10,
                                       MessageAttributeNames=["All"])["Messages"]
    by_source = {json.loads(m["Body"])["source_id"]: request_ids.of_message(m) for m in caused}
    assert by_source == {"dc_a": "req-1", "dc_b": None}

    seen.clear()
    setup.commit(SyncSchedule("dc_c"))
    [message] = [m for m in setup.sqs.receive_message(QueueUrl=setup.url, MaxNumberOfMessages=10)["Messages"]
                 if json.loads(m["Body"]).get("type") == "sync_schedule"]
    record = {"messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"], "body": message["Body"],
              "messageAttributes": {"request_id": {"stringValue": "req-2", "dataType": "String"}}}
    assert setup.queue.handle_records([record]) == {"batchItemFailures": []}
    assert seen == ["req-2"]


def hold_lane(setup: Setup, source_id: str, expires_at: float) -> None:
    """Another worker's lease on the lane (an inline run), kept until `expires_at`."""
    setup.store.tables.client.put_item(TableName=RESOURCES, Item={
        "pk": {"S": source_id}, "sk": {"S": "lock"}, "owner": {"S": "other"},
        "expires_at": {"N": str(int(expires_at))}})


def test_a_fifo_group_finding_its_lane_busy_waits_for_it_and_keeps_its_place(setup: Setup, ordered: str) -> None:
    setup.queue.handle(RunSource, setup.record("runs"))
    setup.commit(run("dc_a", 1), run("dc_a", 2))
    hold_lane(setup, "dc_a", time.time() + 1)  # the inline run's lease, gone within a second or two
    assert setup.queue.poll_once(queue_url=ordered) == 2
    assert [t.command for _, tasks in setup.seen for t in tasks] == [run("dc_a", 1), run("dc_a", 2)]
    assert setup.sent_back() == []  # never off to the standard queue, where order is not kept
    assert setup.counts(ordered) == (0, 0, 0) and setup.counts() == (0, 0, 0)


def test_a_fifo_group_whose_lane_stays_busy_is_sent_back_after_the_wait(setup: Setup, ordered: str) -> None:
    setup.queue.ordered_wait_s = 0  # the holder died: its lease outlives any wait
    setup.queue.handle(RunSource, setup.record("runs"))
    setup.commit(run("dc_a"))
    hold_lane(setup, "dc_a", time.time() + 600)
    assert setup.queue.poll_once(queue_url=ordered) == 0
    assert setup.seen == []
    assert [(body["type"], delay) for body, delay in setup.sent_back()] == [("run_source", 5)]
    assert setup.counts(ordered) == (0, 0, 0) and setup.counts() == (0, 0, 1)
