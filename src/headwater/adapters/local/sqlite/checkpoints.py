"""WAL checkpoints on a thread of their own, not in a writer's commit.

By default SQLite checkpoints inside the commit that takes the WAL past 1,000 pages: that commit
copies the pages into the database file and syncs it, and everything waiting on it (a group of
requests, a hot source's next batch) waits for the disk. Here a thread of the serving process
checkpoints every CHECKPOINT_EVERY_S instead, PASSIVE (it neither waits for nor holds up a
writer; with nothing new it does no I/O), and the writers' own checkpoint moves out to
BACKSTOP_PAGES, for a checkpointer that falls behind. Durability is unchanged: a commit is in the
WAL either way. Several serving processes each run one; a checkpoint that finds another under way
is skipped.
"""

from __future__ import annotations

import logging
import threading

from headwater.adapters.local.sqlite.database import Database

log = logging.getLogger("headwater.sqlite")

CHECKPOINT_EVERY_S = 0.5
BACKSTOP_PAGES = 16_384  # 64 MB of WAL at 4 KB pages


class WalCheckpointer:
    def __init__(self, db: Database, every_s: float = CHECKPOINT_EVERY_S) -> None:
        self.db = db
        self.every_s = every_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.db.autocheckpoint_pages = BACKSTOP_PAGES  # connections made from now on
        self._thread = threading.Thread(target=self._loop, name="wal-checkpoints", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        conn = self.db.connection()
        while not self._stopping.wait(self.every_s):
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except Exception:  # noqa: BLE001 - the writers' backstop checkpoints meanwhile
                log.exception("WAL checkpoint failed")
