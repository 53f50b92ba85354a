"""The two DynamoDB tables and the reads and batch writes every repository shares.

`create_tables` makes the schema `template.yaml` deploys (keys, GSIs, TTL), for moto and
DynamoDB emulators; on AWS, CloudFormation owns the tables. `Tables` wraps the low-level client:
reads are strongly consistent on the tables (never on GSIs, which cannot be), queries page
through DynamoDB's 1 MB pages, and batch writes retry what DynamoDB leaves unprocessed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from headwater.adapters.aws.dynamodb.codec import Item, key, n, number

BATCH_WRITE = 25  # BatchWriteItem's limit
BATCH_GET = 100  # BatchGetItem's limit
_UNPROCESSED_RETRIES = 8
_MADE_MARKERS = 10_000


def create_tables(client: Any, resources_table: str, events_table: str) -> None:
    """The resources table (pk/sk, gsi1 and gsi2 with every attribute, gsi3 with keys only) and the
    events table (pk/sk), both with TTL on `expires_at`, on demand; waits until both are active."""
    def attributes(*names: str) -> list[dict[str, str]]:
        return [{"AttributeName": name, "AttributeType": "S"} for name in names]

    def schema(hash_key: str, range_key: str) -> list[dict[str, str]]:
        return [{"AttributeName": hash_key, "KeyType": "HASH"}, {"AttributeName": range_key, "KeyType": "RANGE"}]

    client.create_table(
        TableName=resources_table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=attributes("pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk", "gsi3pk", "gsi3sk"),
        KeySchema=schema("pk", "sk"),
        GlobalSecondaryIndexes=[
            {"IndexName": index, "KeySchema": schema(f"{index}pk", f"{index}sk"),
             "Projection": {"ProjectionType": projection}}
            for index, projection in (("gsi1", "ALL"), ("gsi2", "ALL"), ("gsi3", "KEYS_ONLY"))
        ],
        SSESpecification={"Enabled": True},
    )
    client.create_table(
        TableName=events_table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=attributes("pk", "sk"),
        KeySchema=schema("pk", "sk"),
        SSESpecification={"Enabled": True},
    )
    for table in (resources_table, events_table):
        client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        client.update_time_to_live(
            TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
        )


@dataclass(frozen=True)
class Query:
    """One Query: a key condition over `pk` (and maybe the sort key) of the table or an index."""

    table: str
    condition: str
    values: dict[str, Any]
    index: str | None = None
    forward: bool = True
    projection: str | None = None

    def request(self) -> dict[str, Any]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": self.condition,
            "ExpressionAttributeValues": self.values,
            "ScanIndexForward": self.forward,
        }
        if self.index is None:
            request["ConsistentRead"] = True
        else:
            request["IndexName"] = self.index
        if self.projection is not None:
            request["ProjectionExpression"] = self.projection
        return request


class Tables:
    def __init__(self, client: Any, resources: str, events: str) -> None:
        self.client = client
        self.resources = resources
        self.events = events
        # (emitter, channel) markers this process made (DynamoEvents reads them rather than writing them
        # again); a set's add and discard are atomic under the GIL, and it is cleared when large.
        self.made_markers: _Bounded = _Bounded(_MADE_MARKERS)

    def get(self, table: str, pk: str, sk: str) -> Item | None:
        return self.client.get_item(TableName=table, Key=key(pk, sk), ConsistentRead=True).get("Item")

    def get_many(self, table: str, keys: list[tuple[str, str]]) -> list[Item]:
        """Consistent BatchGetItem in chunks, retrying unprocessed keys; order is not kept."""
        found: list[Item] = []
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), BATCH_GET):
            pending: dict[str, Any] = {
                table: {"Keys": [key(pk, sk) for pk, sk in unique[start:start + BATCH_GET]], "ConsistentRead": True}
            }
            for attempt in range(_UNPROCESSED_RETRIES + 1):
                response = self.client.batch_get_item(RequestItems=pending)
                found += response.get("Responses", {}).get(table, [])
                pending = response.get("UnprocessedKeys") or {}
                if not pending:
                    break
                _backoff(attempt)
            else:
                raise RuntimeError(f"DynamoDB left {len(pending[table]['Keys'])} keys of {table} unread")
        return found

    def query(self, q: Query, limit: int | None = None) -> list[Item]:
        return list(self.iterate(q, limit))

    def iterate(self, q: Query, limit: int | None = None) -> Iterator[Item]:
        request = q.request()
        left = limit
        while True:
            if left is not None:
                request["Limit"] = left
            response = self.client.query(**request)
            items = response.get("Items", [])
            yield from items
            if left is not None:
                left -= len(items)
                if left <= 0:
                    return
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def count(self, q: Query) -> int:
        request = {**q.request(), "Select": "COUNT"}
        request.pop("ProjectionExpression", None)
        total = 0
        while True:
            response = self.client.query(**request)
            total += int(response.get("Count", 0))
            if "LastEvaluatedKey" not in response:
                return total
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def write_batch(self, table: str, requests: list[dict[str, Any]]) -> None:
        """BatchWriteItem in chunks of 25 (`{"PutRequest": ...}` / `{"DeleteRequest": ...}`),
        retrying what DynamoDB leaves unprocessed under throttling."""
        for start in range(0, len(requests), BATCH_WRITE):
            pending: dict[str, Any] = {table: requests[start:start + BATCH_WRITE]}
            for attempt in range(_UNPROCESSED_RETRIES + 1):
                pending = self.client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break
                _backoff(attempt)
            else:
                raise RuntimeError(f"DynamoDB left {len(pending[table])} writes to {table} unprocessed")

    def delete_keys(self, table: str, keys: list[tuple[str, str]]) -> None:
        self.write_batch(table, [{"DeleteRequest": {"Key": key(pk, sk)}} for pk, sk in dict.fromkeys(keys)])

    def next_seq(self, scope: str, kind: str, count: int = 1) -> int:
        """The next list position of `kind` in `scope` (a namespace, a webhook), or the last of the
        next `count`: an atomic add on a counter item, outside any transaction, so positions only
        ever grow (gaps are harmless)."""
        response = self.client.update_item(
            TableName=self.resources,
            Key=key(scope, f"counter#{kind}"),
            UpdateExpression="ADD #n :one",
            ExpressionAttributeNames={"#n": "n"},
            ExpressionAttributeValues={":one": n(count)},
            ReturnValues="UPDATED_NEW",
        )
        return number(response["Attributes"], "n")


class _Bounded(set[tuple[str, str]]):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def add(self, value: tuple[str, str]) -> None:
        if len(self) >= self.limit:
            self.clear()
        super().add(value)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _backoff(attempt: int) -> None:
    time.sleep(min(1.0, 0.05 * 2**attempt))
