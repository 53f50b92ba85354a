"""The SQLite unit of work: one transaction on this thread's connection."""

from __future__ import annotations

from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.repositories import (
    SqliteApiKeys,
    SqliteComponents,
    SqliteOrgs,
    SqliteUsage,
    SqliteUsers,
)


class SqliteUnitOfWork:
    def __init__(self, db: Database) -> None:
        self.db = db

    def __enter__(self) -> SqliteUnitOfWork:
        self.conn = self.db.connection()
        self.conn.execute("BEGIN")
        self.users = SqliteUsers(self.conn)
        self.orgs = SqliteOrgs(self.conn)
        self.keys = SqliteApiKeys(self.conn)
        self.components = SqliteComponents(self.conn)
        self.usage = SqliteUsage(self.conn)
        self._done = False
        return self

    def commit(self) -> None:
        self.conn.execute("COMMIT")
        self._done = True

    def __exit__(self, *exc: object) -> None:
        if not self._done:
            self.conn.execute("ROLLBACK")
