"""The emulated deployment's moto server keeps SQS's FIFO promise to concurrent long polls (a
group's messages go to one receiver at a time) and does not spin while a poll waits behind a
group in flight (which held the server's interpreter and slowed every other call of the stack)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.sqs.models import Queue

from headwater.emulated import deployment
from headwater.emulated.deployment import start_moto


@pytest.fixture(scope="module")
def sqs() -> Iterator[Any]:
    server = start_moto()
    host, port = server.get_host_and_port()
    yield boto3.session.Session(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x").client(
        "sqs", endpoint_url=f"http://{host}:{port}")
    server.stop()


def fifo(sqs: Any, name: str) -> str:
    return str(sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"])


def test_a_long_poll_behind_a_group_in_flight_waits(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = fifo(sqs, "behind")
    for i in range(50):
        sqs.send_message(QueueUrl=url, MessageBody=str(i), MessageGroupId="g", MessageDeduplicationId=str(i))
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]) == 1  # the group is in flight
    scans = 0
    listed = Queue.messages

    def counted(self: Queue) -> Any:
        nonlocal scans
        scans += 1
        return listed.fget(self)  # type: ignore[attr-defined]

    monkeypatch.setattr(Queue, "messages", property(counted))
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []) == []
    assert scans < 100  # a scan per 50 ms at most; moto's own wait made thousands


def test_two_long_polls_never_hold_one_groups_messages_at_once(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both polls start on an empty queue; of a group's two messages sent then, one is handed out
    and the other waits for it to be deleted (moto gave one to each poll)."""
    url = fifo(sqs, "apart")
    waiting = threading.Semaphore(0)
    wait = deployment._wait_for_change

    def noted(queue: Any, timeout_s: float) -> None:
        waiting.release()
        wait(queue, timeout_s)

    monkeypatch.setattr(deployment, "_wait_for_change", noted)
    received: list[str] = []

    def poll() -> None:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=2).get("Messages", [])
        received.extend(m["Body"] for m in messages)

    polls = [threading.Thread(target=poll) for _ in range(2)]
    for thread in polls:
        thread.start()
    for _ in polls:
        assert waiting.acquire(timeout=30)  # each poll found the queue empty and waits
    for i in ("first", "second"):
        sqs.send_message(QueueUrl=url, MessageBody=i, MessageGroupId="g", MessageDeduplicationId=i)
    for thread in polls:
        thread.join(30)
    assert received == ["first"]
