"""The SQLite unit of work: one transaction on this thread's connection."""

from __future__ import annotations

from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.repositories import (
    SqliteApiKeys,
    SqliteComponents,
    SqliteEvents,
    SqliteOrgs,
    SqliteSources,
    SqliteState,
    SqliteTasks,
    SqliteTimers,
    SqliteUsage,
    SqliteUsers,
)


class SqliteUnitOfWork:
    """Writers begin IMMEDIATE (they queue for the one write lock instead of failing to upgrade);
    readers begin deferred and see one consistent snapshot."""

    def __init__(self, db: Database, readonly: bool = False) -> None:
        self.db = db
        self.readonly = readonly

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
        self.usage = SqliteUsage(self.conn)
        self.sources = SqliteSources(self.conn)
        self.state = SqliteState(self.conn)
        self.events = SqliteEvents(self.conn)
        self.tasks = SqliteTasks(self.conn)
        self.timers = SqliteTimers(self.conn)
        self._done = False
        return self

    def commit(self) -> None:
        self.conn.execute("COMMIT")
        self._done = True

    def __exit__(self, *exc: object) -> None:
        try:
            if not self._done:
                self.conn.execute("ROLLBACK")
        finally:
            if not self.readonly:
                self.db.write_lock.release()
