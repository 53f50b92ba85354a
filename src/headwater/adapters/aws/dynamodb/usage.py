"""Usage counters: one item per user and UTC day, `pk = <user_id>, sk = usage#<YYYY-MM-DD>`.

Every change is an atomic `ADD`, so concurrent runs never lose a count; ISO days sort as
strings, so a range of days is one `sk BETWEEN` Query. The free tier's cap is a conditional add
on `admitted` (the count of runs let in that day), which no two callers can both pass at the cap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from headwater.adapters.aws.dynamodb.codec import key, n, number, s
from headwater.adapters.aws.dynamodb.tables import Query, Tables, error_code

if TYPE_CHECKING:
    from headwater.adapters.aws.dynamodb.uow import DynamoUnitOfWork

_NAMES = {"#i": "invocations", "#c": "compute_ms"}


def _day(day: str) -> str:
    return f"usage#{day}"


class DynamoUsage:
    """The UsageRepository: each method one request of its own, outside any unit of work."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None:
        self._add(user_id, day, "ADD #i :i, #c :c", {":i": n(invocations), ":c": n(compute_ms)}, _NAMES)

    def totals(self, user_id: str, first_day: str, last_day: str) -> tuple[int, int]:
        if last_day < first_day:
            return 0, 0
        q = Query(self.tables.resources, "pk = :pk AND sk BETWEEN :first AND :last",
                  {":pk": s(user_id), ":first": s(_day(first_day)), ":last": s(_day(last_day))})
        items = self.tables.query(q)
        return sum(number(i, "invocations") for i in items), sum(number(i, "compute_ms") for i in items)

    def admit(self, user_id: str, day: str, cap: int) -> bool:
        try:
            self._add(user_id, day, "ADD #a :one", {":one": n(1), ":cap": n(cap)}, {"#a": "admitted"},
                      "attribute_not_exists(#a) OR #a < :cap")
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def release(self, user_id: str, day: str) -> None:
        try:
            self._add(user_id, day, "ADD #a :minus", {":minus": n(-1), ":zero": n(0)}, {"#a": "admitted"}, "#a > :zero")
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise  # nothing admitted that day: nothing to give back

    def _add(self, user_id: str, day: str, expression: str, values: dict[str, Any], names: dict[str, str],
             condition: str | None = None) -> None:
        request: dict[str, Any] = {"TableName": self.tables.resources, "Key": key(user_id, _day(day)),
                                   "UpdateExpression": expression, "ExpressionAttributeValues": values,
                                   "ExpressionAttributeNames": names}
        if condition:
            request["ConditionExpression"] = condition
        self.tables.client.update_item(**request)


class DynamoUsageLog:
    """The UsageLog: the same ADD as one plain UpdateItem right after the unit of work commits
    (half the write units of a transaction item). The count is of what committed only; a crash
    between the commit and the add loses it (a day's usage reads low, never high). A unit of
    work's records of one user and day are summed into one add."""

    def __init__(self, uow: DynamoUnitOfWork) -> None:
        self.uow = uow
        self._sums: dict[tuple[str, str], tuple[int, int]] = {}

    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None:
        if not self.uow.will_run_after_commit(self._add):
            self._sums = {}  # committed (and added) or dropped since: start again
        done_i, done_c = self._sums.get((user_id, day), (0, 0))
        self._sums[(user_id, day)] = (done_i + invocations, done_c + compute_ms)
        self.uow.after_commit(self._add)

    def _add(self) -> None:
        sums, self._sums = self._sums, {}
        usage = DynamoUsage(self.uow.tables)
        for (user_id, day), (invocations, compute_ms) in sums.items():
            usage.record(user_id, day, invocations, compute_ms)
