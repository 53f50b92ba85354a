"""The `tasks` table as several processes share it: what this process takes from it, when.

Each process queues the tasks of the lanes in its share (`process_share.py`). Rows committed by
another process (another serving process, the `headwater` command) are found by a watermark
over the table's ids, which become visible in increasing order because writers are serialized:
when that process says so by datagram (`peers.py`), and at least every POLL_S. Before this
process's own new tasks join their lanes, the rows others committed before them do, so a
source's work runs in commit order whichever process took it in. A request's task that a live
process runs for its answer (`answered_by`) is that process's; once it dies, the lane's owner
adopts it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from headwater.adapters.local.peers import Peers
from headwater.adapters.local.process_share import Liveness, ProcessShare
from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.repositories import task_from_row
from headwater.domain.commands import Command
from headwater.ports import Task

POLL_S = 1.0


class SharedTable:
    def __init__(self, db: Database, share: ProcessShare, peers: Peers | None,
                 dispatch: Callable[[Task], None]) -> None:
        """`dispatch`: queues a task of this process's share on its lane."""
        self.db = db
        self.share = share
        self.peers = peers
        self._dispatch = dispatch
        self._liveness = Liveness(share.run_dir, db.origin)
        self._polled = threading.Lock()  # the watermark: one reader of the table's new rows at a time
        self._poll_now = threading.Event()
        self._adopted: set[str] = set()  # requests' tasks of dead processes, queued here
        self._watermark = 0
        if peers is not None:
            peers.on("tasks", lambda _: self._poll_now.set())

    def open(self) -> None:
        """Claims this process's liveness and queues the backlog of its share."""
        self._liveness.claim()
        if self.peers is not None:
            self.peers.open()
        with self._polled:
            conn = self.db.connection()
            backlog = conn.execute("SELECT * FROM tasks ORDER BY id").fetchall()
            for row in backlog:
                if self._takes(row):
                    self._dispatch(task_from_row(row))
            self._watermark = int(backlog[-1]["id"]) if backlog else int(conn.execute(
                "SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'tasks'").fetchone()[0])

    def close(self) -> None:
        if self.peers is not None:
            self.peers.close()
        self._liveness.release()

    def owns(self, command: Command) -> bool:
        return self.share.owns(command.lane or "")

    def tell_owner(self, command: Command) -> None:
        if self.peers is not None:
            self.peers.send(self.share.owner(command.lane or ""), "tasks")

    def catch_up(self) -> None:
        """Other processes' rows committed before this process's new ones join their lanes first."""
        if self.share.count > 1:
            self._poll(self.db.connection())

    def follow(self, stopped: threading.Event) -> None:
        """Until `stopped`: other processes' tasks are taken when their writer says so, or within
        POLL_S (the `headwater` command says nothing); dead processes' requests are adopted."""
        conn = self.db.connection()
        looked = time.monotonic()
        while not stopped.is_set():
            if self.peers is not None and self.peers.listening:
                self.peers.receive(POLL_S)
            else:
                stopped.wait(timeout=POLL_S)
            if stopped.is_set():
                return
            now = time.monotonic()
            if self._poll_now.is_set() or now - looked >= POLL_S:
                self._poll_now.clear()
                self._poll(conn)
            if now - looked >= POLL_S:
                looked = now
                self._adopt(conn)

    def _takes(self, row: Any) -> bool:
        """Whether a task row is this process's to queue: in its share, and not a request's that a
        live process is running for its answer."""
        if not self.share.owns(row["source_id"] or ""):
            return False
        return row["answered_by"] is None or not self._liveness.alive(row["answered_by"])

    def _poll(self, conn: Any) -> None:
        with self._polled:
            rows = conn.execute("SELECT * FROM tasks WHERE id > ? ORDER BY id", (self._watermark,)).fetchall()
            for row in rows:
                self._watermark = max(self._watermark, int(row["id"]))
                # this process's own tasks were dispatched at commit
                if row["origin"] != self.db.origin and row["answered_by"] is None and self._takes(row):
                    self._dispatch(task_from_row(row))

    def _adopt(self, conn: Any) -> None:
        """Requests' tasks whose process died before they were done: their owners queue them."""
        for (origin,) in conn.execute("SELECT DISTINCT answered_by FROM tasks WHERE answered_by IS NOT NULL "
                                      "AND answered_by != ?", (self.db.origin,)).fetchall():
            if self._liveness.alive(origin):
                continue
            for row in conn.execute("SELECT * FROM tasks WHERE answered_by = ? ORDER BY id", (origin,)).fetchall():
                if self.share.owns(row["source_id"] or "") and str(row["id"]) not in self._adopted:
                    self._adopted.add(str(row["id"]))
                    self._dispatch(task_from_row(row))
