"""One SQLite database file in WAL mode, a connection per thread."""

from __future__ import annotations

import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from headwater.adapters.local.sqlite.migrations import migrate
from headwater.adapters.local.sqlite.writer_lock import WriterLock


class Database:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.write_lock = WriterLock(path)  # one writer at a time, across processes
        # Tasks this process writes carry it, so its queue tells them from another process's.
        self.origin = secrets.token_hex(8)
        # None: SQLite's own (checkpoints in the commit past 1,000 pages); set by WalCheckpointer
        self.autocheckpoint_pages: int | None = None
        self._local = threading.local()
        with self.write_lock:  # processes starting together migrate once
            migrate(self.connection())

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction of its own on this thread's connection, one writer at a time."""
        conn = self.connection()
        with self.write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit survives a killed process; only power loss can undo it.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=30000")
            if self.autocheckpoint_pages is not None:
                conn.execute(f"PRAGMA wal_autocheckpoint={int(self.autocheckpoint_pages)}")
            self._local.conn = conn
        return conn
