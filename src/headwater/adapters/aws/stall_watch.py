"""The StallWatch port on DynamoDB: one item per watched source (pk = source id, sk = "watch") in
the resources table, in the sparse index gsi1 under `stall-watch#<shard>` sorted by `check_at`
(as the timer chains are: adapters/aws/scheduler.py). A pass queries each shard for what is due:
it reads the index entries of the sources due, not every source."""

from __future__ import annotations

import zlib
from typing import Any

from botocore.exceptions import ClientError

WATCH_SK = "watch"
INDEX = "gsi1"
SHARDS = 8


class DynamoStallWatch:
    def __init__(self, client: Any, table_name: str) -> None:
        self.dynamodb = client
        self.table_name = table_name

    def _key(self, source_id: str) -> dict[str, Any]:
        return {"pk": {"S": source_id}, "sk": {"S": WATCH_SK}}

    def arm(self, source_id: str, check_at: float) -> None:
        self.dynamodb.put_item(TableName=self.table_name, Item={
            **self._key(source_id), "check_at": {"N": repr(check_at)},
            "gsi1pk": {"S": f"stall-watch#{zlib.crc32(source_id.encode()) % SHARDS}"},
            "gsi1sk": {"S": _at_key(check_at)}})

    def disarm(self, source_id: str) -> None:
        self.dynamodb.delete_item(TableName=self.table_name, Key=self._key(source_id))

    def due(self, now: float, limit: int) -> list[tuple[str, float]]:
        found: list[tuple[str, float]] = []
        for shard in range(SHARDS):
            response = self.dynamodb.query(
                TableName=self.table_name, IndexName=INDEX, Limit=limit,
                KeyConditionExpression="gsi1pk = :pk AND gsi1sk <= :now",
                ExpressionAttributeValues={":pk": {"S": f"stall-watch#{shard}"}, ":now": {"S": _at_key(now)}})
            found += [(item["pk"]["S"], float(item["check_at"]["N"])) for item in response.get("Items", [])]
        return sorted(found, key=lambda f: f[1])[:limit]

    def move(self, source_id: str, seen: float, check_at: float) -> bool:
        try:
            self.dynamodb.update_item(
                TableName=self.table_name, Key=self._key(source_id),
                UpdateExpression="SET check_at = :next, gsi1sk = :next_sk",
                ConditionExpression="check_at = :seen",
                ExpressionAttributeValues={":next": {"N": repr(check_at)}, ":next_sk": {"S": _at_key(check_at)},
                                           ":seen": {"N": repr(seen)}})
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False
        return True


def _at_key(at: float) -> str:
    """Milliseconds, zero-padded: string order is time order."""
    return f"{max(0, int(at * 1000)):016d}"
