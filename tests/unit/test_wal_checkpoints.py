"""WAL checkpoints off the writers' commits (adapters/local/sqlite/checkpoints.py): with the
checkpointer in place a commit never copies the WAL into the database file itself (SQLite's default
does, in the commit that passes 1,000 pages), and the checkpointer's thread does it instead."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from headwater.adapters.local.sqlite.checkpoints import BACKSTOP_PAGES, WalCheckpointer
from headwater.adapters.local.sqlite.database import Database

PAGE = 4096
ROWS = 1_600  # a page each: past SQLite's default auto-checkpoint of 1,000 pages


def write_pages(db: Database) -> None:
    """Commits ROWS pages of data from a thread of its own (a connection made after the start)."""
    def write() -> None:
        conn = db.connection()
        conn.execute("CREATE TABLE IF NOT EXISTS filler (data BLOB)")
        for _ in range(0, ROWS, 100):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO filler VALUES (?)", [(b"x" * (PAGE - 200),)] * 100)
            conn.execute("COMMIT")
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == (db.autocheckpoint_pages or 1000)

    thread = threading.Thread(target=write)
    thread.start()
    thread.join()


def database_pages(path: Path) -> int:
    return path.stat().st_size // PAGE


def test_without_the_checkpointer_the_commits_themselves_checkpoint(tmp_path: Path) -> None:
    db = Database(tmp_path / "h.db")
    write_pages(db)
    assert database_pages(tmp_path / "h.db") >= 500  # copied in by a commit


def test_with_it_no_commit_checkpoints_and_its_thread_does(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    db = Database(path)
    idle = WalCheckpointer(db, every_s=3600)  # started, but not due in this test
    idle.start()
    try:
        write_pages(db)
        assert db.autocheckpoint_pages == BACKSTOP_PAGES
        assert database_pages(path) < 100, "a commit copied the WAL into the database"
    finally:
        idle.stop()

    checkpoints = WalCheckpointer(db, every_s=0.01)
    checkpoints.start()
    try:
        deadline = time.monotonic() + 30
        while database_pages(path) < ROWS and time.monotonic() < deadline:
            time.sleep(0.01)
        assert database_pages(path) >= ROWS, "the checkpointer's thread did not checkpoint"
    finally:
        checkpoints.stop()
