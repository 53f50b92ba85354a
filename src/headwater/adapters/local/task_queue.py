"""The durable task queue of the local service, over the `tasks` table.

Three parts, each one idea: the group-commit writer (`group_commit.py`) puts ingested runs in the
table; the lanes (`lanes.py`, pure) decide which committed work goes next; and the runners of that
work, here. Other commands arrive from units of work (their outbox rows commit with the change that
made them). A task leaves the table only after its handler returned, so a crash re-runs it, never
loses it (handlers are idempotent: a run whose results are in is recognised by its task id).

Where work runs: a request waiting for its run's answer (customResponse) has its run started on
the event loop the moment its task is committed, by the handler's non-blocking form (`now`), with
no thread in between; the runner's answer comes back to the loop, and the request gets it as a
value (`Responses`). Work that cannot start without blocking (a source whose state is not in
memory, a lease held elsewhere), and everything else, goes to the worker threads. When a source's
batch finishes, its next batch starts right there, on the thread that finished it.

No tenant holds the workers: one tenant's work holds at most `tenant_share` of them at once (the
lanes count a worker from when it takes a lane until it is free again), and a handler that would
wait on another caller's work (an account's refresh) raises TryLater: its batch is deferred, first
in its lane, for a moment, holding no worker and counting no failed attempt.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import heapq
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from headwater.adapters.local.group_commit import GroupCommitWriter, Pending
from headwater.adapters.local.lanes import Lanes, lane_of
from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.repositories import task_from_row
from headwater.domain.commands import Command, RunSource
from headwater.ports import NowHandler, Responses, Task, TaskHandler, TaskResults, TryLater

log = logging.getLogger("headwater.tasks")

QUIET_S = 0.002  # no request for this long: requests have paused, background work goes
YIELD_CHECK_S = 0.02  # how often yielding work looks again
CPU_SAMPLE_S = 0.05  # how often the process's CPU is read while requests come
POLL_S = 1.0
RETRY_DELAYS_S = (1, 5, 30, 120, 600)

class LocalTaskQueue:
    def __init__(self, db: Database, workers: int, responses: Responses, yield_s: float = 0.0,
                 quiet_s: float = QUIET_S, tenant_share: int | None = None) -> None:
        """`tenant_share`: the workers one tenant's work may hold at once (default a quarter of them)."""
        self.db = db
        self.workers = workers
        self.responses = responses
        self.handlers: dict[str, TaskHandler] = {}
        self.now_handlers: dict[str, NowHandler] = {}
        self.tenant_share = tenant_share or max(1, workers // 4)
        self.lanes = Lanes(time.monotonic, yield_s, quiet_s, tenant_share=self.tenant_share)
        self.writer = GroupCommitWriter(db, self._committed)
        lock = threading.Lock()  # guards the lanes and the delayed tasks
        self._cond = threading.Condition(lock)  # workers wait here for ready lanes
        self._delay_cond = threading.Condition(lock)  # the delay thread waits here for due tasks
        self._delayed: list[tuple[float, str, Task]] = []
        self._stopping = False
        self._watermark = 0
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._nonblocking_threads: set[int] = set()  # event loops that ingest, and the writer
        self._cpu_mark = (time.monotonic(), time.process_time())  # when the process's CPU was last read

    def handle(self, command: type[Command], handler: TaskHandler, now: NowHandler | None = None) -> None:
        self.handlers[command.name] = handler
        if now is not None:
            self.now_handlers[command.name] = now

    def start(self) -> None:
        backlog = self.db.connection().execute("SELECT * FROM tasks ORDER BY id").fetchall()
        for row in backlog:
            self._dispatch(task_from_row(row))
        self._watermark = int(backlog[-1]["id"]) if backlog else self._max_id()
        self.writer.start()
        assert self.writer.thread_id is not None
        self._nonblocking_threads.add(self.writer.thread_id)
        self._spawn(self._poll_loop, "task-poll")
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
        for thread in self._threads:
            thread.join(timeout=5)
        self.writer.stop()  # after the workers: what they finished is deleted with its last group

    # adding tasks

    async def ingest(self, command: RunSource, respond: bool = False) -> str:
        pending = Pending(command, asyncio.get_running_loop(), respond)
        self._nonblocking_threads.add(threading.get_ident())
        with self._cond:
            self.lanes.request_started()
        self.writer.submit(pending)
        try:
            return await pending.committed
        finally:
            with self._cond:
                self.lanes.request_ended()

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

    def _committed(self, group: list[tuple[Pending, str]]) -> None:
        """The writer committed a group of requests' tasks: they join their lanes, a waiting
        request's run is claimed for its event loop when its lane is free, and each loop hears of
        its group in one wake-up (with the runs to start)."""
        by_loop: dict[asyncio.AbstractEventLoop, tuple[list[tuple[Pending, str]], list[tuple[str, list[Task]]]]] = {}
        for p, task_id in group:
            if p.respond:
                self.responses.expect(task_id)
        with self._cond:
            for p, task_id in group:
                settled, starts = by_loop.setdefault(p.loop, ([], []))
                settled.append((p, task_id))
                task = Task(task_id, p.command)
                if not self.lanes.add(task, urgent=p.respond):
                    continue
                claimed = self.lanes.claim(lane_of(task)) if p.respond and p.command.name in self.now_handlers \
                    else None
                if claimed is None:
                    self._cond.notify()
                else:
                    starts.append((lane_of(task), claimed))
        handed = time.monotonic()
        for loop, (settled, starts) in by_loop.items():
            loop.call_soon_threadsafe(self._on_loop, settled, starts, handed)

    def _on_loop(self, settled: list[tuple[Pending, str]], starts: list[tuple[str, list[Task]]],
                 handed: float) -> None:
        now = time.monotonic()
        with self._cond:
            self.lanes.note_commit(len(settled), now - handed)
            if now - self._cpu_mark[0] >= CPU_SAMPLE_S:
                cpu = time.process_time()
                self.lanes.note_cpu((cpu - self._cpu_mark[1]) / (now - self._cpu_mark[0]))
                self._cpu_mark = (now, cpu)
        for p, task_id in settled:
            if not p.committed.done():
                p.committed.set_result(task_id)
        for lane, batch in starts:
            self._start_now(lane, batch)

    def _dispatch(self, task: Task) -> None:
        if task.not_before > time.time() + 0.001:
            with self._cond:
                heapq.heappush(self._delayed, (task.not_before, task.id, task))
                self._delay_cond.notify()
            return
        with self._cond:
            if self.lanes.add(task):
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
        """Dispatches delayed tasks when due, and gives parked and deferred lanes back to the
        workers once they need not yield or wait any more."""
        while True:
            with self._cond:
                while not self._stopping:
                    if self.lanes.unpark():
                        self._cond.notify_all()
                    now = time.time()
                    if self._delayed and self._delayed[0][0] <= now:
                        break
                    waits = [self._delayed[0][0] - now] if self._delayed else []
                    if self.lanes.has_parked:
                        waits.append(YIELD_CHECK_S)
                    deferred = self.lanes.next_wake()
                    if deferred is not None:
                        waits.append(deferred)
                    self._delay_cond.wait(timeout=min(waits) if waits else None)
                if self._stopping:
                    return
                _, _, task = heapq.heappop(self._delayed)
            self._dispatch(Task(task.id, task.command, task.attempts))

    # running tasks

    def _work_loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    taken = self.lanes.next()
                    if self.lanes.has_parked:
                        self._delay_cond.notify()  # a parked lane waits for the delay thread's look
                    if taken is not None:
                        break
                    self._cond.wait()
                if self._stopping:
                    return
            assert taken is not None
            lane, batch = taken
            try:
                self._drive(lane, batch, self._call(self.handlers, batch))
            finally:
                with self._cond:
                    if self.lanes.release(batch):
                        self._cond.notify()

    def _start_now(self, lane: str, batch: list[Task]) -> None:
        """On the event loop: the batch's run started without blocking, or handed to a worker."""
        started = self._call(self.now_handlers, batch)
        if started is None or isinstance(started, BaseException):
            self._give_back(lane, batch)
            return
        self._drive(lane, batch, started)

    def _give_back(self, lane: str, batch: list[Task]) -> None:
        with self._cond:
            self.lanes.give_back(lane, batch)
            self._cond.notify()

    def _call(self, handlers: dict[str, Any], batch: list[Task]) -> TaskResults | BaseException | None:
        handler = handlers.get(batch[0].command.name)
        if handler is None and handlers is self.now_handlers:
            return None
        if handler is None:
            log.error("no handler for %r; %d tasks dropped", batch[0].command.name, len(batch))
            return [None] * len(batch)
        try:
            return handler(batch, self._partial)  # type: ignore[no-any-return, unused-ignore]
        except Exception as e:  # noqa: BLE001 - the tasks are retried
            return e

    def _partial(self, task: Task, response: dict[str, Any]) -> None:
        self.responses.deliver(task.id, ("respond", response))

    def _drive(self, lane: str, batch: list[Task], results: TaskResults | BaseException | None) -> None:
        """Finishes a lane's batch when its results are in (a handler that sent its work off
        returned a Future: the lane stays busy until it completes, so a source's runs stay in
        order and never overlap), then starts the lane's next batch on this same thread: the
        blocking way on a worker, the non-blocking way on the event loop or the writer (which must
        never wait), else it goes to a worker."""
        while True:
            if isinstance(results, Future):
                future = results
                if not future.done():
                    future.add_done_callback(functools.partial(self._drive, lane, batch))
                    return
                error = future.exception()
                results = error if error is not None else future.result()
            if isinstance(results, TryLater):
                self._defer(lane, batch, results)
                return
            self._settle(batch, results)
            with self._cond:
                more = self.lanes.done(lane, batch)
                following = self.lanes.claim(lane) if more else None
            if following is None:
                if more:
                    with self._cond:
                        self._cond.notify()
                return
            if threading.get_ident() in self._nonblocking_threads:
                results = self._call(self.now_handlers, following)
                if results is None or isinstance(results, BaseException):
                    self._give_back(lane, following)
                    return
            else:
                results = self._call(self.handlers, following)
            batch = following

    def _defer(self, lane: str, batch: list[Task], later: TryLater) -> None:
        """The batch waits on another caller's work: back first in its lane for `later.after_s`,
        each task marked with when it was first deferred (its handler bounds the wait in all)."""
        log.debug("%d %s tasks deferred for %.2f s: %s", len(batch), batch[0].command.name, later.after_s, later)
        now = time.time()
        deferred = [task if task.deferred_since is not None else dataclasses.replace(task, deferred_since=now)
                    for task in batch]
        with self._cond:
            self.lanes.defer(lane, deferred, later.after_s)
            self._delay_cond.notify()

    def _settle(self, batch: list[Task], results: list[Any] | BaseException | None) -> None:
        if isinstance(results, BaseException) or results is None:
            error = results if isinstance(results, BaseException) else RuntimeError("no results")
            log.error("%d %s tasks failed (first %s, attempt %d)", len(batch), batch[0].command.name, batch[0].id,
                      batch[0].attempts + 1, exc_info=error)
            for task in batch:
                self.responses.deliver(task.id, ("failed", None))
                self._retry(task)
            return
        self.writer.finished([task.id for task in batch])
        for task, result in zip(batch, results, strict=True):
            self.responses.deliver(task.id, ("done", result))

    def _retry(self, task: Task) -> None:
        if task.attempts >= len(RETRY_DELAYS_S):
            log.error("task %s (%s) dropped after %d attempts", task.id, task.command.name, task.attempts + 1)
            self.writer.finished([task.id])
            return
        run_at = time.time() + RETRY_DELAYS_S[task.attempts]
        with self.db.writing() as conn:
            conn.execute("UPDATE tasks SET attempts = attempts + 1, run_at = ? WHERE id = ?", (run_at, task.id))
        self._dispatch(Task(task.id, task.command, task.attempts + 1, run_at))
