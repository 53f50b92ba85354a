"""The SQLite unit of work: one transaction on this thread's connection."""

from __future__ import annotations

from collections.abc import Callable

from headwater.adapters.local.sqlite.connected_accounts import SqliteConnectedAccounts
from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.oauth import SqliteOAuthClients, SqlitePendingConnects
from headwater.adapters.local.sqlite.repositories import (
    SqliteApiKeys,
    SqliteComponents,
    SqliteDeliveries,
    SqliteEvents,
    SqliteOrgs,
    SqliteOutbox,
    SqliteRunRecords,
    SqliteSnapshots,
    SqliteSources,
    SqliteState,
    SqliteSubscriptions,
    SqliteUsageLog,
    SqliteUsers,
    SqliteWebhooks,
    SqliteWorkflows,
)
from headwater.ports import Task


class SqliteUnitOfWork:
    """Writers begin IMMEDIATE (they queue for the one write lock instead of failing to upgrade);
    readers begin deferred and see one consistent snapshot. After a commit, the commands of its
    outbox go to `on_commit` (the task queue)."""

    max_writes: int | None = None

    def __init__(self, db: Database, readonly: bool = False,
                 on_commit: Callable[[list[Task]], None] | None = None) -> None:
        self.db = db
        self.readonly = readonly
        self.on_commit = on_commit

    def __enter__(self) -> SqliteUnitOfWork:
        self.conn = self.db.connection()
        if not self.readonly:
            self.db.write_lock.acquire()
        try:
            self.conn.execute("BEGIN" if self.readonly else "BEGIN IMMEDIATE")
        except BaseException:
            if not self.readonly:
                self.db.write_lock.release()
            raise
        self.users = SqliteUsers(self.conn)
        self.orgs = SqliteOrgs(self.conn)
        self.keys = SqliteApiKeys(self.conn)
        self.components = SqliteComponents(self.conn)
        self.sources = SqliteSources(self.conn)
        self.state = SqliteState(self.conn)
        self.events = SqliteEvents(self.conn)
        self.runs = SqliteRunRecords(self.conn)
        self.snapshots = SqliteSnapshots(self.conn)
        self.usage = SqliteUsageLog(self.conn)
        self.subscriptions = SqliteSubscriptions(self.conn)
        self.webhooks = SqliteWebhooks(self.conn)
        self.deliveries = SqliteDeliveries(self.conn)
        self.workflows = SqliteWorkflows(self.conn)
        self.outbox = SqliteOutbox(self.conn, self.db.origin)
        self.connected_accounts = SqliteConnectedAccounts(self.conn)
        self.oauth_clients = SqliteOAuthClients(self.conn)
        self.pending_connects = SqlitePendingConnects(self.conn)
        self._done = False
        return self

    def commit(self) -> None:
        self.events.flush()
        self.runs.flush()
        self.conn.execute("COMMIT")
        self._done = True

    def __exit__(self, *exc: object) -> None:
        try:
            if not self._done:
                self.conn.execute("ROLLBACK")
        finally:
            if not self.readonly:
                self.db.write_lock.release()
        if self._done and self.outbox.added and self.on_commit is not None:
            self.on_commit(self.outbox.added)
