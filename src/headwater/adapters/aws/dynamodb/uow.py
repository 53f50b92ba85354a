"""The DynamoDB unit of work: writes buffered, then committed by one TransactWriteItems.

DynamoDB has no interactive transactions, so the unit of work reads straight from the tables
(consistently) and collects its writes; `commit` sends them in one transaction of at most 100
items (`max_writes`), each with its condition (a single write goes as the one item's own call,
as atomic and half the price). A failed condition cancels the whole transaction
and comes back as `Conflict` naming the field of the first write that failed (a taken username,
a stale state version). Work that is idempotent and need not be atomic with the rest runs around
the transaction instead: channel markers are written before it, trims, usage counts and
subscription clean-up after it, and the outbox's commands go to the task queue once it committed.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from headwater.adapters.aws.dynamodb.connected_accounts import DynamoConnectedAccounts
from headwater.adapters.aws.dynamodb.events import DynamoEvents
from headwater.adapters.aws.dynamodb.oauth import DynamoOAuthClients, DynamoPendingConnects
from headwater.adapters.aws.dynamodb.repositories import (
    DynamoApiKeys,
    DynamoComponents,
    DynamoDeliveries,
    DynamoOrgs,
    DynamoSources,
    DynamoState,
    DynamoSubscriptions,
    DynamoUsers,
    DynamoWebhooks,
    DynamoWorkflows,
)
from headwater.adapters.aws.dynamodb.runs import DynamoRunRecords
from headwater.adapters.aws.dynamodb.snapshots import DynamoSnapshots
from headwater.adapters.aws.dynamodb.tables import Tables, error_code
from headwater.adapters.aws.dynamodb.tasks import DynamoOutbox
from headwater.adapters.aws.dynamodb.usage import DynamoUsageLog
from headwater.adapters.aws.dynamodb.writes import Write
from headwater.domain.errors import Conflict
from headwater.ports import Task

log = logging.getLogger("headwater.dynamodb")

MAX_WRITES = 100  # TransactWriteItems' item limit
TRANSACTION_BYTES = 3_800_000  # under its 4 MB limit on the items' total size
_CONFLICT_RETRIES = 5  # a transaction cancelled by another one touching the same items is sent again


class ReadOnlyUnitOfWork(RuntimeError):
    """A write through a unit of work opened with readonly=True."""


class DynamoUnitOfWork:
    max_writes: int | None = MAX_WRITES

    def __init__(self, tables: Tables, readonly: bool, on_commit: Callable[[list[Task]], None]) -> None:
        self.tables = tables
        self.readonly = readonly
        self._on_commit = on_commit
        self._writes: dict[tuple[str, str, str], Write] = {}
        self._before: list[Callable[[], None]] = []
        self._after: list[Callable[[], None]] = []
        self._tasks: list[Task] = []
        self.users = DynamoUsers(self)
        self.orgs = DynamoOrgs(self)
        self.keys = DynamoApiKeys(self)
        self.components = DynamoComponents(self)
        self.sources = DynamoSources(self)
        self.state = DynamoState(self)
        self.events = DynamoEvents(self)
        self.runs = DynamoRunRecords(self)
        self.snapshots = DynamoSnapshots(self)
        self.usage = DynamoUsageLog(self)
        self.subscriptions = DynamoSubscriptions(self)
        self.webhooks = DynamoWebhooks(self)
        self.deliveries = DynamoDeliveries(self)
        self.workflows = DynamoWorkflows(self)
        self.outbox = DynamoOutbox(self)
        self.connected_accounts = DynamoConnectedAccounts(self)
        self.oauth_clients = DynamoOAuthClients(self)
        self.pending_connects = DynamoPendingConnects(self)

    def __enter__(self) -> DynamoUnitOfWork:
        return self

    def __exit__(self, *exc: object) -> None:
        self._reset()  # leaving without commit writes nothing

    # what repositories call

    def writable(self) -> None:
        """Raises for a read-only unit of work; repositories call it before any write, including
        the ones that happen at once (a counter, a range deletion)."""
        if self.readonly:
            raise ReadOnlyUnitOfWork("this unit of work was opened read-only")

    def write(self, write: Write) -> None:
        """Buffers one transaction item. A second write to the same item replaces the first (one
        transaction may not touch an item twice; later state wins, as it would in SQL), unless
        both are exclusive: then the second conflicts at once."""
        self.writable()
        previous = self._writes.get((write.table, write.pk, write.sk))
        if previous is not None and previous.exclusive and write.exclusive:
            raise Conflict(_conflict_message(write.conflict), _conflict_details(write.conflict), field=write.conflict)
        self._writes[(write.table, write.pk, write.sk)] = write

    def pending(self, table: str, pk: str, sk: str) -> Write | None:
        return self._writes.get((table, pk, sk))

    def before_commit(self, action: Callable[[], None]) -> None:
        """Idempotent work that must be done if the transaction commits and is harmless if it does
        not. The same action registered twice runs once."""
        self.writable()
        if action not in self._before:
            self._before.append(action)

    def after_commit(self, action: Callable[[], None]) -> None:
        """Idempotent work that may lag the transaction (trims, clean-up); dropped without commit.
        The same action registered twice runs once."""
        self.writable()
        if action not in self._after:
            self._after.append(action)

    def will_run_before_commit(self, action: Callable[[], None]) -> bool:
        return action in self._before

    def will_run_after_commit(self, action: Callable[[], None]) -> bool:
        return action in self._after

    def add_task(self, task: Task) -> None:
        self._tasks.append(task)

    # committing

    def commit(self) -> None:
        writes = list(self._writes.values())
        if len(writes) > MAX_WRITES:
            raise ValueError(f"a unit of work writes at most {MAX_WRITES} items at once, not {len(writes)}")
        before, after, tasks = self._before, self._after, self._tasks
        self._reset()
        for action in before:
            action()
        deferred = _over_budget(writes)
        if deferred:
            writes = [w for w in writes if w not in deferred]
        if writes:
            self._transact(writes)
        for table in {w.table for w in deferred}:
            self.tables.write_batch(table, [{"PutRequest": {"Item": w.action["Put"]["Item"]}}
                                            for w in deferred if w.table == table])
        for action in after:
            try:
                action()
            except Exception:  # noqa: BLE001 - committed already; the next commit redoes it
                log.exception("after-commit work failed (it is redone by the next commit)")
        if tasks:
            self._on_commit(tasks)

    def _reset(self) -> None:
        self._writes, self._before, self._after, self._tasks = {}, [], [], []

    def _transact(self, writes: list[Write]) -> None:
        if len(writes) == 1 and _single_call(self.tables.client, writes[0]):
            return
        items = [w.action for w in writes]
        for attempt in range(_CONFLICT_RETRIES + 1):
            try:
                self.tables.client.transact_write_items(TransactItems=items)
                return
            except ClientError as exc:
                if error_code(exc) != "TransactionCanceledException":
                    raise
                reasons = _reasons(exc, len(writes))
            for write, reason in zip(writes, reasons, strict=False):
                if reason == "ConditionalCheckFailed":
                    field = write.conflict
                    raise Conflict(_conflict_message(field), _conflict_details(field), field=field) from None
            if "TransactionConflict" not in reasons or attempt == _CONFLICT_RETRIES:
                raise RuntimeError(f"DynamoDB cancelled the transaction: {reasons}")
            # Another transaction touched one of these items meanwhile; nothing was written, and
            # sending it again re-checks every condition.
            time.sleep(random.uniform(0, 0.02 * 2**attempt))


_SINGLE = {"Put": "put_item", "Update": "update_item", "Delete": "delete_item"}


def _single_call(client: Any, write: Write) -> bool:
    """One item's write, conditional as in a transaction but at half the write units: a single
    PutItem, UpdateItem or DeleteItem is atomic on its item. False for a condition check alone."""
    (kind, operation), = write.action.items()
    if kind not in _SINGLE:
        return False
    try:
        getattr(client, _SINGLE[kind])(**operation)
    except ClientError as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            raise Conflict(_conflict_message(write.conflict), _conflict_details(write.conflict),
                           field=write.conflict) from None
        raise
    return True


def _over_budget(writes: list[Write]) -> list[Write]:
    """The deferrable writes to move out of a transaction larger than DynamoDB takes, largest first."""
    total = sum(w.size for w in writes)
    moved: list[Write] = []
    for write in sorted((w for w in writes if w.deferrable), key=lambda w: w.size, reverse=True):
        if total <= TRANSACTION_BYTES:
            break
        moved.append(write)
        total -= write.size
    return moved


def _reasons(exc: ClientError, count: int) -> list[str]:
    """The cancellation reason of each item, in order. botocore parses CancellationReasons when
    the service sends them; otherwise they are in the message, `[ConditionalCheckFailed, None]`."""
    reasons = exc.response.get("CancellationReasons")
    if reasons:
        return [str(r.get("Code") or "None") for r in reasons]
    match = re.search(r"\[([^\]]*)\]\s*$", str(exc.response.get("Error", {}).get("Message", "")))
    return [part.strip() for part in match.group(1).split(",")] if match else ["None"] * count


def _conflict_details(field: str | None) -> dict[str, list[str]] | None:
    if field is None:
        return None
    return {field: ["changed meanwhile" if field == "version" else "is taken"]}


def _conflict_message(field: str | None) -> str:
    if field == "version":
        return "It changed meanwhile; try again."
    if field:
        return f"That {field} is taken."
    return "The change conflicts with another one."
