"""The items of a unit of work's transaction: what to write, on which condition, and what a
failed condition means."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.adapters.aws.dynamodb.codec import Item, size


@dataclass
class Write:
    """One item of the transaction: `action` is its TransactItem ({"Put": ...}, {"Delete": ...},
    {"Update": ...}); `conflict` the field a failed condition means. An `exclusive` write creates
    the item or moves it to a new version, so a second one to the same item in one unit of work
    conflicts, as a second INSERT would in SQL. A `deferrable` write (an event put: idempotent,
    its id reserved by the state it commits with) may go right after the transaction when the
    transaction would be over DynamoDB's size limit."""

    table: str
    pk: str
    sk: str
    action: dict[str, Any]
    conflict: str | None = None
    deferrable: bool = False
    exclusive: bool = False

    @property
    def size(self) -> int:
        operation = next(iter(self.action.values()))
        return size(operation.get("Item") or operation.get("Key") or {}) + len(str(operation.get(
            "ExpressionAttributeValues", "")))


def put(table: str, item: Item, condition: str | None = None, conflict: str | None = None,
        values: dict[str, Any] | None = None, names: dict[str, str] | None = None, deferrable: bool = False,
        exclusive: bool = False) -> Write:
    operation: dict[str, Any] = {"TableName": table, "Item": item}
    _conditions(operation, condition, values, names)
    return Write(table, item["pk"]["S"], item["sk"]["S"], {"Put": operation}, conflict, deferrable, exclusive)


def delete(table: str, pk: str, sk: str) -> Write:
    return Write(table, pk, sk, {"Delete": {"TableName": table, "Key": {"pk": {"S": pk}, "sk": {"S": sk}}}})


def update(table: str, pk: str, sk: str, expression: str, values: dict[str, Any], names: dict[str, str] | None = None,
           condition: str | None = None, conflict: str | None = None, exclusive: bool = False) -> Write:
    operation: dict[str, Any] = {"TableName": table, "Key": {"pk": {"S": pk}, "sk": {"S": sk}},
                                 "UpdateExpression": expression}
    _conditions(operation, condition, values, names)
    return Write(table, pk, sk, {"Update": operation}, conflict, exclusive=exclusive)


def _conditions(operation: dict[str, Any], condition: str | None, values: dict[str, Any] | None,
                names: dict[str, str] | None) -> None:
    if condition:
        operation["ConditionExpression"] = condition
    if values:
        operation["ExpressionAttributeValues"] = values
    if names:
        operation["ExpressionAttributeNames"] = names
