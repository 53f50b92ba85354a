"""The durable task queue of the local service, over the `tasks` table.

Ingest appends runs through one writer thread that commits whatever has queued up meanwhile in a
single transaction (group commit), and answers each caller once its row is committed. Other
commands arrive from units of work (their outbox rows commit with the change that made them).
Workers run tasks after they are committed, one lane (source) at a time and in commit order; a
task leaves the table only after its handler returned, so a crash re-runs it, never loses it
(handlers are idempotent: a run whose results are in is recognised by its task id).

Answers come first: work nobody is waiting on (a run whose request was already answered, fan-out,
deliveries) waits while requests keep arriving, for at most `yield_s` from when its lane got work.
Runs and answers share one interpreter, so each run during a burst slows every answer; deferred,
a burst is answered at full speed and its runs go after it in batches of MAX_RUN_BATCH, the
cheapest way to run them. A run whose caller waits for its response (customResponse) never waits.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.repositories import chunks, insert_rows, task_from_row
from headwater.domain.commands import Command, RunSource, to_message
from headwater.ports import Ingested, Task, TaskHandler

log = logging.getLogger("headwater.tasks")

MAX_BATCH = 1024
MAX_RUN_BATCH = 64
QUIET_S = 0.002  # no request for this long: requests have paused, background work goes
YIELD_CHECK_S = 0.02  # how often yielding work looks again (each look takes the GIL from answers)
POLL_S = 1.0
RETRY_DELAYS_S = (1, 5, 30, 120, 600)


class _Pending:
    __slots__ = ("command", "loop", "committed", "outcome")

    def __init__(self, command: RunSource, loop: asyncio.AbstractEventLoop, respond: bool) -> None:
        self.command, self.loop = command, loop
        self.committed: asyncio.Future = loop.create_future()
        self.outcome: asyncio.Future | None = loop.create_future() if respond else None


class _Done:
    """Tasks whose handlers returned: their rows go in the writer's next group commit (every
    handler is idempotent, so a crash before then only runs them again)."""

    __slots__ = ("task_ids",)

    def __init__(self, task_ids: list[str]) -> None:
        self.task_ids = task_ids


class LocalTaskQueue:
    def __init__(self, db: Database, workers: int, yield_s: float = 0.0, quiet_s: float = QUIET_S) -> None:
        self.db = db
        self.workers = workers
        self.yield_s = yield_s
        self.quiet_s = quiet_s
        self.handlers: dict[str, TaskHandler] = {}
        self._inbox: queue.SimpleQueue[_Pending | _Done | None] = queue.SimpleQueue()
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # workers wait here for ready lanes
        self._delay_cond = threading.Condition(lock)  # the delay thread waits here for due tasks
        self._lanes: dict[str, deque[Task]] = {}
        self._lane_since: dict[str, float] = {}  # monotonic time each lane got its oldest waiting work
        self._last_request = 0.0
        self._requests = 0  # requests waiting for their commit (read by workers, written by the loop)
        self._ready: deque[str] = deque()
        self._parked: dict[str, None] = {}  # lanes yielding to requests (an ordered set)
        self._busy: set[str] = set()
        self._delayed: list[tuple[float, str, Task]] = []
        self._outcomes: dict[str, asyncio.Future] = {}
        self._stopping = False
        self._watermark = 0
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []

    def handle(self, command: type[Command], handler: TaskHandler) -> None:
        self.handlers[command.name] = handler

    def start(self) -> None:
        backlog = self.db.connection().execute("SELECT * FROM tasks ORDER BY id").fetchall()
        for row in backlog:
            self._dispatch(task_from_row(row))
        self._watermark = int(backlog[-1]["id"]) if backlog else self._max_id()
        self._spawn(self._poll_loop, "task-poll")
        self._spawn(self._write_loop, "ingest-writer")
        self._spawn(self._delay_loop, "task-delays")
        for i in range(self.workers):
            self._spawn(self._work_loop, f"task-worker-{i}")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stopped.set()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            self._delay_cond.notify_all()
        self._inbox.put(None)
        for thread in self._threads:
            thread.join(timeout=5)

    # adding tasks

    async def ingest(self, command: RunSource, respond: bool = False) -> Ingested:
        pending = _Pending(command, asyncio.get_running_loop(), respond)
        self._last_request = time.monotonic()
        self._requests += 1
        self._inbox.put(pending)
        try:
            task_id = await pending.committed
        finally:
            self._requests -= 1
            self._last_request = time.monotonic()
        return Ingested(task_id=task_id, outcome=pending.outcome)

    def stats(self, now: float) -> tuple[int, float]:
        """(tasks in the table, seconds the oldest due one has waited): what /metrics shows."""
        row = self.db.connection().execute(
            "SELECT count(*), min(CASE WHEN run_at <= ? THEN coalesce(created_at, ?) END) FROM tasks", (now, now)
        ).fetchone()
        return int(row[0]), max(0.0, now - (row[1] if row[1] is not None else now))

    def dispatch(self, tasks: list[Task]) -> None:
        """Committed tasks from a unit of work's outbox (SqliteStore.on_commit)."""
        for task in tasks:
            self._dispatch(task)

    def _write_loop(self) -> None:
        conn = self.db.connection()
        while True:
            first = self._inbox.get()
            if first is None:
                return
            items = [first]
            while len(items) < MAX_BATCH:
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._inbox.put(None)
                    break
                items.append(item)
            batch = [p for p in items if isinstance(p, _Pending)]
            done = [int(task_id) for d in items if isinstance(d, _Done) for task_id in d.task_ids]
            now = time.time()
            rows = [(p.command.name, p.command.source_id, json.dumps(to_message(p.command)), 0, self.db.origin, now)
                    for p in batch]
            try:
                with self.db.write_lock:
                    conn.execute("BEGIN IMMEDIATE")
                    ids = [task_id for part in chunks(rows) for task_id in _insert(conn, part)]
                    for part in chunks(done):
                        conn.execute(f"DELETE FROM tasks WHERE id IN ({', '.join('?' * len(part))})", part)
                    conn.execute("COMMIT")
            except Exception as e:  # noqa: BLE001 - every caller must hear of the failure
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                log.exception("ingest batch of %d failed", len(batch))
                for p in batch:
                    p.loop.call_soon_threadsafe(_fail, p.committed, e)
                continue
            for p, task_id in zip(batch, ids, strict=True):
                if p.outcome is not None:
                    self._outcomes[task_id] = p.outcome
            self.dispatch([Task(task_id, p.command) for p, task_id in zip(batch, ids, strict=True)])
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, str]]] = {}
            for p, task_id in zip(batch, ids, strict=True):
                by_loop.setdefault(p.loop, []).append((p.committed, task_id))
            for loop, settled in by_loop.items():  # one wake-up of each loop, not one per request
                loop.call_soon_threadsafe(_resolve_all, settled)

    # running tasks

    def _dispatch(self, task: Task) -> None:
        if task.not_before > time.time() + 0.001:
            with self._cond:
                heapq.heappush(self._delayed, (task.not_before, task.id, task))
                self._delay_cond.notify()
            return
        lane = task.command.lane or f"task:{task.id}"
        with self._cond:
            if lane not in self._lanes:
                self._lanes[lane] = deque()
                self._lane_since[lane] = time.monotonic()
            self._lanes[lane].append(task)
            if lane in self._parked and task.id in self._outcomes:
                del self._parked[lane]  # its caller waits for the answer: no more yielding
            if lane not in self._busy and lane not in self._ready and lane not in self._parked:
                self._ready.append(lane)
                self._cond.notify()

    def _max_id(self) -> int:
        return int(self.db.connection().execute("SELECT coalesce(max(seq), 0) FROM sqlite_sequence "
                                                "WHERE name = 'tasks'").fetchone()[0])

    def _poll_loop(self) -> None:
        """Tasks committed by another process on the same database (the `headwater` command, a
        second server) are picked up within a second; ids become visible in increasing order
        because writers are serialized, so a watermark finds every new one."""
        conn = self.db.connection()
        while not self._stopped.wait(timeout=POLL_S):  # not self._cond: its notify() is the workers'
            rows = conn.execute("SELECT * FROM tasks WHERE id > ? ORDER BY id", (self._watermark,)).fetchall()
            for row in rows:
                self._watermark = max(self._watermark, int(row["id"]))
                if row["origin"] != self.db.origin:  # this process's own tasks were dispatched at commit
                    self._dispatch(task_from_row(row))

    def _delay_loop(self) -> None:
        """Dispatches delayed tasks when due, and gives parked lanes back to the workers once
        requests pause (or the lane has yielded long enough)."""
        while True:
            with self._cond:
                while not self._stopping:
                    self._unpark()
                    now = time.time()
                    if self._delayed and self._delayed[0][0] <= now:
                        break
                    waits = [self._delayed[0][0] - now] if self._delayed else []
                    if self._parked:
                        waits.append(YIELD_CHECK_S)
                    self._delay_cond.wait(timeout=min(waits) if waits else None)
                if self._stopping:
                    return
                _, _, task = heapq.heappop(self._delayed)
            self._dispatch(Task(task.id, task.command, task.attempts))

    def _unpark(self) -> None:
        for lane in [lane for lane in self._parked if not self._yields(lane)]:
            del self._parked[lane]
            self._ready.append(lane)
            self._cond.notify()

    def _work_loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    while not self._stopping and not self._ready:
                        self._cond.wait()
                    if self._stopping:
                        return
                    lane = self._ready.popleft()
                    if not self._yields(lane):
                        break
                    self._parked[lane] = None  # no worker waits with it: a lane in a hurry may need one
                    self._delay_cond.notify()
                if self._stopping:
                    return
                self._busy.add(lane)
                queued = self._lanes[lane]
                batch = [queued.popleft()]
                while queued and queued[0].command.name == batch[0].command.name and len(batch) < MAX_RUN_BATCH:
                    batch.append(queued.popleft())
            self._run(lane, batch)

    def _lane_done(self, lane: str) -> None:
        """The lane's batch is over: its next tasks (if any) are ready for a worker."""
        with self._cond:
            self._busy.discard(lane)
            if self._lanes.get(lane):
                self._ready.append(lane)
                self._cond.notify()
            else:
                self._lanes.pop(lane, None)
                self._lane_since.pop(lane, None)

    def _yields(self, lane: str) -> bool:
        """Whether the lane's work should wait for requests to pause. Called with the lock held."""
        if self.yield_s <= 0:
            return False
        now = time.monotonic()
        if not self._requests and now - self._last_request >= self.quiet_s:
            return False
        if now - self._lane_since.get(lane, now) >= self.yield_s:
            return False
        return not any(task.id in self._outcomes for task in self._lanes.get(lane, ()))

    def _run(self, lane: str, batch: list[Task]) -> None:
        """Runs a lane's batch. A handler that sends its work off returns a Future: the worker goes
        back to other lanes at once, and the batch is finished when the Future is (the lane stays
        busy until then, so a source's runs stay in order and never overlap)."""
        outcomes = {task.id: self._outcomes.pop(task.id, None) for task in batch}

        def on_partial(task: Task, response: dict[str, Any]) -> None:
            outcome = outcomes.get(task.id)
            if outcome is not None:
                outcome.get_loop().call_soon_threadsafe(_resolve, outcome, ("respond", response))

        def settle(task: Task, value: tuple[str, Any]) -> None:
            outcome = outcomes.get(task.id)
            if outcome is not None:
                outcome.get_loop().call_soon_threadsafe(_resolve, outcome, value)

        def failed(error: BaseException) -> None:
            log.error("%d %s tasks failed (first %s, attempt %d)", len(batch), kind, batch[0].id,
                      batch[0].attempts + 1, exc_info=error)
            for task in batch:
                settle(task, ("failed", None))
                self._retry(task)

        def finished(results: list[Any]) -> None:
            self._finish([task.id for task in batch])
            for task, result in zip(batch, results, strict=True):
                settle(task, ("done", result))

        kind = batch[0].command.name
        handler = self.handlers.get(kind)
        if handler is None:
            log.error("no handler for %r; %d tasks dropped", kind, len(batch))
            self._finish([task.id for task in batch])
            self._lane_done(lane)
            return
        try:
            results = handler(batch, on_partial)
        except Exception as e:  # noqa: BLE001 - the tasks are retried
            failed(e)
            self._lane_done(lane)
            return
        if not isinstance(results, Future):
            finished(results)
            self._lane_done(lane)
            return

        def done(future: Future[list[Any]]) -> None:
            try:
                error = future.exception()
                if error is None:
                    finished(future.result())
                else:
                    failed(error)
            finally:
                self._lane_done(lane)

        results.add_done_callback(done)

    def _retry(self, task: Task) -> None:
        if task.attempts >= len(RETRY_DELAYS_S):
            log.error("task %s (%s) dropped after %d attempts", task.id, task.command.name, task.attempts + 1)
            self._finish([task.id])
            return
        run_at = time.time() + RETRY_DELAYS_S[task.attempts]
        self._write("UPDATE tasks SET attempts = attempts + 1, run_at = ? WHERE id = ?", [(run_at, task.id)])
        self._dispatch(Task(task.id, task.command, task.attempts + 1, run_at))

    def _finish(self, task_ids: list[str]) -> None:
        self._inbox.put(_Done(task_ids))

    def _write(self, sql: str, rows: list[tuple]) -> None:
        with self.db.writing() as conn:
            conn.executemany(sql, rows)


def _insert(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[str]:
    """Tasks in one statement, their ids in row order: AUTOINCREMENT gives a statement's rows
    consecutive ids under the one writer's lock."""
    if not rows:
        return []
    last = insert_rows(conn, "INSERT INTO tasks (kind, source_id, payload, run_at, origin, created_at)", rows)
    assert last is not None
    return [str(task_id) for task_id in range(last - len(rows) + 1, last + 1)]


def _resolve_all(settled: list[tuple[asyncio.Future, Any]]) -> None:
    for future, value in settled:
        _resolve(future, value)


def _resolve(future: asyncio.Future, value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future, error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
