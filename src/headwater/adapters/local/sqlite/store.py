"""The local store: one SQLite file behind every storage port (the counterpart of DynamoStore)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from headwater.adapters.local.lease import LocalLease
from headwater.adapters.local.peers import Peers
from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.repositories import SqliteIngestCounts, SqliteUsage
from headwater.adapters.local.sqlite.uow import SqliteUnitOfWork
from headwater.ports import Task


class SqliteStore:
    def __init__(self, path: Path, peers: Peers | None = None) -> None:
        """`peers`: the other serving processes on this database (a source's lease let go is said
        to them, so one waiting for it takes it at once)."""
        self.db = Database(path)
        self.usage = SqliteUsage(self.db)
        self.ingest_counts = SqliteIngestCounts(self.db)
        self.lease = LocalLease(path.with_name(path.name + ".leases"), peers)
        self._callbacks: list[Callable[[list[Task]], None]] = []

    def uow(self, readonly: bool = False) -> SqliteUnitOfWork:
        return SqliteUnitOfWork(self.db, readonly, self._committed)

    def on_commit(self, callback: Callable[[list[Task]], None]) -> None:
        """`callback` gets the commands of each committed outbox (the task queue takes them)."""
        self._callbacks.append(callback)

    def _committed(self, tasks: list[Task]) -> None:
        for callback in self._callbacks:
            callback(tasks)
