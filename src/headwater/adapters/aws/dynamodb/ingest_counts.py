"""The ingest budget's shared counts: one item per tenant and window in the resources table,
`pk = <tenant>, sk = ingest#<window>`, with `n` (requests leased) and `expires_at` (the TTL).

An add is one `UpdateItem`: `ADD n :n` on the condition that `n` is below the allowance, returning
the count before it. No two instances can both pass the condition at the allowance, and a window
that is full costs a failed condition (one write unit) and adds nothing.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from headwater.adapters.aws.dynamodb.codec import key, n
from headwater.adapters.aws.dynamodb.tables import Tables, error_code


def _window(window: int) -> str:
    return f"ingest#{window}"


class DynamoIngestCounts:
    """The IngestCounts port."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def add(self, tenant: str, window: int, count: int, allowance: int, expires_at: int) -> int:
        try:
            answer = self.tables.client.update_item(
                TableName=self.tables.resources, Key=key(tenant, _window(window)),
                UpdateExpression="SET #e = :e ADD #n :n",
                ConditionExpression="attribute_not_exists(#n) OR #n < :allowance",
                ExpressionAttributeNames={"#n": "n", "#e": "expires_at"},
                ExpressionAttributeValues={":n": n(count), ":allowance": n(allowance), ":e": n(expires_at)},
                ReturnValues="UPDATED_OLD")
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return allowance
            raise
        return int(answer.get("Attributes", {}).get("n", {}).get("N", 0))
