"""The AWS store: the two DynamoDB tables behind every storage port (the counterpart of SqliteStore).

The composition root builds the boto3 `dynamodb` client once per Lambda instance and passes it
in; everything here is safe to share between threads, as the client is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from headwater.adapters.aws.dynamodb.ingest_counts import DynamoIngestCounts
from headwater.adapters.aws.dynamodb.lease import DynamoLease
from headwater.adapters.aws.dynamodb.tables import Tables
from headwater.adapters.aws.dynamodb.tasks import DoneMarks, OutboxTable
from headwater.adapters.aws.dynamodb.uow import DynamoUnitOfWork
from headwater.adapters.aws.dynamodb.usage import DynamoUsage
from headwater.domain.commands import Command
from headwater.ports import Task

log = logging.getLogger("headwater.dynamodb")


class DynamoStore:
    def __init__(self, client: Any, resources_table: str, events_table: str) -> None:
        self.tables = Tables(client, resources_table, events_table)
        self.usage = DynamoUsage(self.tables)
        self.ingest_counts = DynamoIngestCounts(self.tables)
        self.lease = DynamoLease(self.tables)
        self._outbox = OutboxTable(self.tables)
        self._done = DoneMarks(self.tables)
        self._callbacks: list[Callable[[list[Task]], None]] = []

    def uow(self, readonly: bool = False) -> DynamoUnitOfWork:
        return DynamoUnitOfWork(self.tables, readonly, self._committed)

    def on_commit(self, callback: Callable[[list[Task]], None]) -> None:
        """`callback` gets the commands of each committed outbox (the task queue sends them)."""
        self._callbacks.append(callback)

    def outbox_keep(self, command: Command, due_at: float) -> Task:
        """An outbox item of its own (no unit of work) for a task to run at `due_at` unless it is
        `outbox_done` before: the fallback of a run done inline (sqs_queue.py `ingest_answered`)."""
        return self._outbox.keep(command, due_at)

    def outbox_done(self, task_ids: list[str]) -> None:
        """The queue has these tasks: their outbox items go."""
        self._outbox.done(task_ids)

    def pending_outbox(self, older_than_s: float) -> list[Task]:
        """Outbox items older than that, which no queue took: left by a crash between a commit
        and its send (or a send that failed). Sending them again may duplicate a task whose send
        was slow; handlers are idempotent, as for any redelivery."""
        return self._outbox.pending(older_than_s)

    def mark_done(self, task_ids: list[str]) -> None:
        """Tasks finished without their queue message (see DoneMarks)."""
        self._done.mark(task_ids)

    def done_of(self, task_ids: list[str]) -> set[str]:
        return self._done.marked(task_ids)

    def _committed(self, tasks: list[Task]) -> None:
        """A failed hand-over does not undo the commit: the outbox items stay, and the queue's
        recovery sends them later."""
        for callback in self._callbacks:
            try:
                callback(tasks)
            except Exception:  # noqa: BLE001 - the change committed; its commands wait in the outbox
                log.exception("handing %d committed tasks to the queue failed; they stay in the outbox", len(tasks))
