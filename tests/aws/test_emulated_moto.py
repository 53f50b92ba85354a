"""The emulated deployment's moto server: a long poll on a FIFO queue whose visible messages all
wait behind their group's batch in flight waits, rather than scanning the queue in a loop for its
whole wait (which held the server's interpreter and slowed every other call of the stack)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.sqs.models import Queue

from headwater.emulated.deployment import start_moto


@pytest.fixture(scope="module")
def sqs() -> Iterator[Any]:
    server = start_moto()
    host, port = server.get_host_and_port()
    yield boto3.session.Session(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x").client(
        "sqs", endpoint_url=f"http://{host}:{port}")
    server.stop()


def test_a_long_poll_behind_a_group_in_flight_waits(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = sqs.create_queue(QueueName="group.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
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
