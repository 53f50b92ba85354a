"""The emulated deployment's moto server keeps SQS's FIFO promise to concurrent long polls (a
group's messages go to one receiver at a time) and does not spin while a poll waits behind a
group in flight (which held the server's interpreter and slowed every other call of the stack);
and its DynamoDB transactions roll back what they touched without copying whole tables."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.models.table import Table
from moto.sqs.models import Queue

from headwater.emulated import deployment
from headwater.emulated.deployment import start_moto


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = start_moto()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def client(endpoint: str, service: str) -> Any:
    return boto3.session.Session(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x").client(
        service, endpoint_url=endpoint)


@pytest.fixture(scope="module")
def sqs(endpoint: str) -> Any:
    return client(endpoint, "sqs")


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


def test_a_failed_transaction_puts_back_every_item_it_touched_and_copies_no_table(
        endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A put, an update and a delete, then a condition that fails: the three items are as they were.
    No table is deep-copied on the way (moto copied each table once per item: a commit's cost grew
    with the table, and the emulated stack's answers queued past API Gateway's 30 s)."""
    dynamodb = client(endpoint, "dynamodb")
    dynamodb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                          AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                {"AttributeName": "sk", "AttributeType": "S"}],
                          KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                     {"AttributeName": "sk", "KeyType": "RANGE"}])
    for sk in ("updated", "deleted"):
        dynamodb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": sk}, "n": {"N": "1"}})
    copies = 0

    def counted(self: Table, memo: Any) -> Any:
        nonlocal copies
        copies += 1
        raise AssertionError("a table was deep-copied")

    monkeypatch.setattr(Table, "__deepcopy__", counted, raising=False)  # moto's server runs in this process
    key = lambda sk: {"pk": {"S": "p"}, "sk": {"S": sk}}  # noqa: E731
    with pytest.raises(ClientError) as failed:
        dynamodb.transact_write_items(TransactItems=[
            {"Put": {"TableName": "t", "Item": {**key("new"), "n": {"N": "1"}}}},
            {"Update": {"TableName": "t", "Key": key("updated"), "UpdateExpression": "SET n = :two",
                        "ExpressionAttributeValues": {":two": {"N": "2"}}}},
            {"Delete": {"TableName": "t", "Key": key("deleted")}},
            {"ConditionCheck": {"TableName": "t", "Key": key("absent"), "ConditionExpression": "attribute_exists(pk)"}},
        ])
    assert failed.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert copies == 0
    items = dynamodb.scan(TableName="t", ConsistentRead=True)["Items"]
    assert sorted((i["sk"]["S"], i["n"]["N"]) for i in items) == [("deleted", "1"), ("updated", "1")]
    dynamodb.transact_write_items(TransactItems=[
        {"Put": {"TableName": "t", "Item": {**key("new"), "n": {"N": "1"}}}},
        {"Update": {"TableName": "t", "Key": key("updated"), "UpdateExpression": "SET n = :two",
                    "ExpressionAttributeValues": {":two": {"N": "2"}}}},
        {"Delete": {"TableName": "t", "Key": key("deleted")}},
    ])
    items = dynamodb.scan(TableName="t", ConsistentRead=True)["Items"]
    assert sorted((i["sk"]["S"], i["n"]["N"]) for i in items) == [("new", "1"), ("updated", "2")]
