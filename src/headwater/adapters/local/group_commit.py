"""The one writer of ingested tasks: group commit.

Requests hand their task to the writer's thread, which commits whatever has queued up meanwhile in
one transaction (no fsync per row) and deletes, in the same transaction, the tasks whose handlers
have finished since (they wait for the next group, or DONE_FLUSH_S, or the stop, rather than
commit alone: one request at a time would cost a transaction more each). The caller hears of its
commit through `on_committed`, once per group. Other writes may be handed to the same thread
(`call`: the outcomes of runs, awaited by their coroutine), so that the store's writes come from
one thread, in the order they were handed over, and no other thread is woken for them. Nothing
run there may wait for anything but the store.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.repositories import chunks, insert_rows
from headwater.domain.commands import RunSource, message_text

log = logging.getLogger("headwater.tasks")

MAX_GROUP = 1024
DONE_FLUSH_S = 0.2  # finished tasks held this long without a group are deleted on their own
T = TypeVar("T")


class Pending:
    """One request's task on its way to the store."""

    __slots__ = ("command", "loop", "committed", "answered", "handed")

    def __init__(self, command: RunSource, loop: asyncio.AbstractEventLoop, answered: bool = False) -> None:
        """`answered`: the request runs it itself (`LocalTaskQueue.ingest_answered`), not a worker."""
        self.command, self.loop, self.answered = command, loop, answered
        self.committed: asyncio.Future[str] = loop.create_future()
        self.handed = time.monotonic()


class _Finished:
    __slots__ = ("task_ids",)

    def __init__(self, task_ids: list[str]) -> None:
        self.task_ids = task_ids


Committed = Callable[[list[tuple[Pending, str]]], None]
"""What the writer calls with each committed group: the requests with their task ids."""


class GroupCommitWriter:
    def __init__(self, db: Database, on_committed: Committed) -> None:
        self.db = db
        self.on_committed = on_committed
        self._inbox: queue.SimpleQueue[Pending | _Finished | Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="ingest-writer", daemon=True)
        self._thread.start()

    @property
    def thread_id(self) -> int | None:
        return self._thread.ident if self._thread is not None else None

    def run(self, write: Callable[[], None]) -> None:
        """Runs `write` on the writer's thread after the group it arrives with is committed."""
        self._inbox.put(write)

    async def call(self, write: Callable[[], T]) -> T:
        """`run`, awaited by a coroutine: the write's result or its exception (the Writes port)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()

        def run() -> None:
            try:
                result = write()
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                loop.call_soon_threadsafe(_fail, done, e)
                return
            loop.call_soon_threadsafe(_settle, done, result)

        self._inbox.put(run)
        return await done

    def stop(self) -> None:
        self._inbox.put(None)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def submit(self, pending: Pending) -> None:
        self._inbox.put(pending)

    def finished(self, task_ids: list[str]) -> None:
        """Tasks whose handlers returned: deleted with the next group (every handler is
        idempotent, so a crash before then only runs them again)."""
        self._inbox.put(_Finished(task_ids))

    def _loop(self) -> None:
        conn = self.db.connection()
        held: list[int] = []  # finished tasks not yet deleted: they go with the next group
        held_since = 0.0
        while True:
            try:
                first = self._inbox.get(timeout=max(0.0, held_since + DONE_FLUSH_S - time.monotonic())
                                        if held else None)
            except queue.Empty:
                first = _Finished([])  # held long enough: deleted now
            if first is None:
                if held:
                    self._delete(conn, held)
                return
            items = [first]
            while len(items) < MAX_GROUP:
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._inbox.put(None)
                    break
                items.append(item)
            group = [p for p in items if isinstance(p, Pending)]
            finished = [int(task_id) for f in items if isinstance(f, _Finished) for task_id in f.task_ids]
            if finished and not held:
                held_since = time.monotonic()
            held += finished
            writes = [w for w in items if not isinstance(w, Pending | _Finished)]
            due = bool(held) and (group or len(held) >= MAX_GROUP or time.monotonic() - held_since >= DONE_FLUSH_S)
            done, held = (held, []) if due else ([], held)
            try:
                ids = self._commit(conn, group, done) if group or done else []
            except Exception as e:  # noqa: BLE001 - every caller must hear of the failure
                log.exception("ingest group of %d failed", len(group))
                for p in group:
                    p.loop.call_soon_threadsafe(_fail, p.committed, e)
                ids = []
                group = []
            if group:
                self.on_committed(list(zip(group, ids, strict=True)))
            for write in writes:
                try:
                    write()
                except Exception:  # noqa: BLE001 - one failing write must not stop the writer
                    log.exception("a write handed to the writer failed")

    def _delete(self, conn: sqlite3.Connection, done: list[int]) -> None:
        try:
            self._commit(conn, [], done)
        except Exception:  # noqa: BLE001 - they run again after a restart (handlers are idempotent)
            log.exception("deleting %d finished tasks failed", len(done))

    def _commit(self, conn: sqlite3.Connection, group: list[Pending], done: list[int]) -> list[str]:
        now = time.time()
        rows = [(p.command.name, p.command.source_id, message_text(p.command), 0, self.db.origin, now,
                 self.db.origin if p.answered else None) for p in group]
        try:
            with self.db.write_lock:
                conn.execute("BEGIN IMMEDIATE")
                ids = [task_id for part in chunks(rows) for task_id in _insert(conn, part)]
                for part in chunks(done):
                    conn.execute(f"DELETE FROM tasks WHERE id IN ({', '.join('?' * len(part))})", part)
                conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return ids


def _insert(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[str]:
    """Tasks in one statement, their ids in row order: AUTOINCREMENT gives a statement's rows
    consecutive ids under the one writer's lock."""
    if not rows:
        return []
    last = insert_rows(conn, "INSERT INTO tasks (kind, source_id, payload, run_at, origin, created_at, answered_by)",
                       rows)
    assert last is not None
    return [str(task_id) for task_id in range(last - len(rows) + 1, last + 1)]


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)
