"""The durable task queue of the local service, over the `tasks` table.

Four parts, each one idea: the group-commit writer (`group_commit.py`) puts ingested runs in the
table; `shared_table.py` says which rows are this process's, with several on one database; the
lanes (`lanes.py`, pure) decide which committed work goes next; and the runners of that work,
here. Other commands arrive from units of work (their outbox rows commit with the change that
made them). A task leaves the table only after its handler returned, so a crash re-runs it, never
loses it (handlers are idempotent: a run whose results are in is recognised by its task id).

Where work runs: a request waiting for its run's answer (customResponse) runs it itself, in its
own coroutine, once its task is committed (`ingest_answered`): the RunSource handler is a
coroutine holding the source's lease, and the answer is a value it returns. Queued work goes to
the dispatchers (the worker threads): a coroutine handler (a run) is started on the event loop
(`Portal`) and holds no thread while it waits; a plain handler runs on the worker.

No tenant holds more than its share: one tenant's work has at most `tenant_share` batches in
hand at once (the lanes count one from when a dispatcher takes a lane until its batch is over, a
run as a coroutine waiting, not a thread held), and a handler that would wait on another caller's
work (an account's refresh) raises TryLater: its batch is deferred, first in its lane, for a
moment, holding nothing and counting no failed attempt.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import heapq
import inspect
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from headwater.adapters.answered import answer_of
from headwater.adapters.in_process_lease import InProcessLease
from headwater.adapters.local.group_commit import GroupCommitWriter, Pending
from headwater.adapters.local.lanes import MAX_RUN_BATCH, Lanes
from headwater.adapters.local.peers import Peers
from headwater.adapters.local.process_share import ProcessShare
from headwater.adapters.local.shared_table import SharedTable
from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.loops import Portal
from headwater.domain.commands import Command, RunSource
from headwater.ports import (
    AsyncTaskHandler,
    NowHandler,
    OnRespond,
    RunAnswer,
    SourceLease,
    Task,
    TaskHandler,
    TaskResults,
    TryLater,
)

log = logging.getLogger("headwater.tasks")

QUIET_S = 0.002  # no request for this long: requests have paused, background work goes
YIELD_CHECK_S = 0.02  # how often yielding work looks again
CPU_SAMPLE_S = 0.05  # how often the process's CPU is read while requests come
STOP_WAIT_S = 5.0  # how long a stop waits for the runs in flight to finish
RETRY_DELAYS_S = (1, 5, 30, 120, 600)
ANSWERED_DEFER_S = 20.0  # how long a request's run waits in place on another caller's refresh
ANSWERED_LEASE_S = 300.0  # how long a batch of requests' runs may wait for its source's lease


@dataclass(eq=False)
class _Gathered:
    """Requests' runs of one source gathered while its lease is held: the next batch."""

    done: asyncio.Future[list[Any] | None]
    tasks: list[Task] = field(default_factory=list)
    responders: dict[int, OnRespond] = field(default_factory=dict)  # by id() of the task
    committing: list[asyncio.Future[str]] = field(default_factory=list)


class LocalTaskQueue:
    def __init__(self, db: Database, workers: int, yield_s: float = 0.0,
                 quiet_s: float = QUIET_S, tenant_share: int | None = None, portal: Portal | None = None,
                 lease: SourceLease | None = None, share: ProcessShare | None = None,
                 peers: Peers | None = None) -> None:
        """`tenant_share`: the batches one tenant's work may have in hand at once (default a
        quarter of the workers). `portal`: the event loop coroutine handlers run on. `lease`: the
        store's source lease, which requests' runs of one source gather behind. `share`: which
        lanes' queued work is this process's, when several serve the database; `peers`: how it
        tells the others of work for them, and hears of work for it."""
        self.db = db
        self.table = SharedTable(db, share or ProcessShare(0, 1), peers, self._dispatch)
        self.lease: SourceLease = lease or InProcessLease()
        self.workers = workers
        self.portal = portal or Portal()
        self.handlers: dict[str, TaskHandler | AsyncTaskHandler] = {}
        self.tenant_share = tenant_share or max(1, workers // 4)
        self.lanes = Lanes(time.monotonic, yield_s, quiet_s, tenant_share=self.tenant_share)
        self.writer = GroupCommitWriter(db, self._committed)
        lock = threading.Lock()  # guards the lanes and the delayed tasks
        self._cond = threading.Condition(lock)  # workers wait here for ready lanes
        self._delay_cond = threading.Condition(lock)  # the delay thread waits here for due tasks
        self._delayed: list[tuple[float, str, Task]] = []
        self._stopping = False
        self._runs_in_flight = 0  # coroutine batches started and not yet finished (guarded by _cond)
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._answering: set[asyncio.Future[Any]] = set()  # requests' runs (a task is only weakly kept by its loop)
        self._gathering: dict[str, _Gathered] = {}  # by lane: requests' runs waiting for their source's lease
        self._cpu_mark = (time.monotonic(), time.process_time())  # when the process's CPU was last read

    def handle(self, command: type[Command], handler: TaskHandler | AsyncTaskHandler,
               now: NowHandler | None = None) -> None:
        """`now` is not used here: committed work goes to its lane."""
        self.handlers[command.name] = handler

    def start(self) -> None:
        self.table.open()
        self.writer.start()
        self._spawn(functools.partial(self.table.follow, self._stopped), "task-poll")
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
        with self._cond:  # runs in flight on the loop finish first: their tasks' deletion goes to the writer
            self._cond.wait_for(lambda: self._runs_in_flight == 0, timeout=STOP_WAIT_S)
        self.writer.stop()  # after the workers: what they finished is deleted with its last group
        self.portal.close()
        self.table.close()

    # adding tasks

    async def ingest(self, command: RunSource) -> str:
        return await self._commit(Pending(command, asyncio.get_running_loop()))

    async def _commit(self, pending: Pending) -> str:
        with self._cond:
            self.lanes.request_started()
        self.writer.submit(pending)
        try:
            return await pending.committed
        finally:
            with self._cond:
                self.lanes.request_ended()

    async def ingest_answered(self, command: RunSource, timeout_s: float) -> RunAnswer:
        """The task goes into the writer's next group and its run starts at once, overlapping the
        commit, here, in this coroutine; the answer is its first `respond()`, else its result,
        returned once the task is durable. The run goes on after the answer (its outcome is
        committed in a later group: the writer takes what it is handed in order); one that fails
        is retried by the queue. The task's source remembers it by a key of its own
        (`route_key`), known before the commit gives the task its id, so a run of it again
        (after a crash) is recognised."""
        command = dataclasses.replace(command, route_key=command.route_key or f"request:{uuid.uuid4().hex}")
        committing = asyncio.ensure_future(self._commit(Pending(command, asyncio.get_running_loop(), answered=True)))
        try:
            answer = await answer_of(functools.partial(self._join, command, committing), timeout_s, self._answering)
        finally:
            await committing  # durable before any answer; a failed commit fails the request
        return answer

    async def _join(self, command: RunSource, committing: asyncio.Future[str],
                    on_respond: OnRespond) -> list[Any] | None:
        """The request's run, in its source's next batch: the requests that come while the source's
        lease is held by another batch gather, and run together (one runner call, one commit) once
        it is theirs, in the order they came."""
        lane = command.lane or ""
        batch = self._gathering.get(lane)
        if batch is None or len(batch.tasks) >= MAX_RUN_BATCH:
            batch = self._gathering[lane] = _Gathered(asyncio.get_running_loop().create_future())
            running = asyncio.ensure_future(self._run_gathered(lane, batch))
            self._answering.add(running)
            running.add_done_callback(self._answering.discard)
        task = Task("", command)  # its id comes with the commit
        place = len(batch.tasks)  # not tasks.index(task): a dataclass __eq__ per task, n² a batch
        batch.tasks.append(task)
        batch.responders[id(task)] = on_respond
        batch.committing.append(committing)
        results = await asyncio.shield(batch.done)
        return None if results is None else [results[place]]

    async def _run_gathered(self, lane: str, batch: _Gathered) -> None:
        """Holds the source's lease (the handler holds it again: re-entrant), closes the batch, runs
        it: waiting on another caller's refresh (TryLater) it tries again for a while, then leaves
        the tasks to their lane; failing, it leaves them to the queue's retries."""
        results: list[Any] | None = None
        try:
            async with self.lease.held(lane, ANSWERED_LEASE_S):
                if self._gathering.get(lane) is batch:
                    del self._gathering[lane]  # later requests gather for the batch after this one
                results = await self._run_answered(batch)
        except Exception:  # noqa: BLE001 - the lease could not be had: the queue runs them
            log.exception("%d requests' runs of %s could not start; the queue runs them", len(batch.tasks), lane)
            for task, committing in zip(batch.tasks, batch.committing, strict=True):
                self._retry(dataclasses.replace(task, id=await committing))
        finally:
            if self._gathering.get(lane) is batch:
                del self._gathering[lane]
            batch.done.set_result(results)

    async def _run_answered(self, batch: _Gathered) -> list[Any] | None:
        handler = self.handlers[batch.tasks[0].command.name]
        deadline = time.monotonic() + ANSWERED_DEFER_S
        tasks = list(batch.tasks)

        def on_respond(task: Task, response: dict[str, Any]) -> None:
            batch.responders[id(task)](task, response)

        while True:
            try:
                results = list(await handler(tasks, on_respond))  # type: ignore[misc]
            except TryLater as later:
                tasks = [t if t.deferred_since is not None else dataclasses.replace(t, deferred_since=time.time())
                         for t in tasks]
                batch.responders.update({id(t): batch.responders[id(o)] for t, o in zip(tasks, batch.tasks,
                                                                                     strict=True)})
                if time.monotonic() + later.after_s > deadline:
                    for task, committing in zip(tasks, batch.committing, strict=True):
                        self._dispatch(dataclasses.replace(task, id=await committing,
                                                           not_before=time.time() + later.after_s))
                    return None
                await asyncio.sleep(later.after_s)
                continue
            except Exception:  # noqa: BLE001 - its lane retries them
                log.exception("%d requests' runs failed; the queue retries them", len(tasks))
                for task, committing in zip(tasks, batch.committing, strict=True):
                    self._retry(dataclasses.replace(task, id=await committing))
                return None
            self.writer.finished([await committing for committing in batch.committing])
            return results

    def stats(self, now: float) -> tuple[int, float]:
        """(tasks in the table, seconds the oldest due one has waited): what /metrics shows."""
        row = self.db.connection().execute(
            "SELECT count(*), min(CASE WHEN run_at <= ? THEN coalesce(created_at, ?) END) FROM tasks", (now, now)
        ).fetchone()
        return int(row[0]), max(0.0, now - (row[1] if row[1] is not None else now))

    def dispatch(self, tasks: list[Task]) -> None:
        """Committed tasks from a unit of work's outbox (SqliteStore.on_commit): this process's
        share goes to its lanes, after what other processes committed before them."""
        self.table.catch_up()
        for task in tasks:
            if self.table.owns(task.command):
                self._dispatch(task)
            else:
                self.table.tell_owner(task.command)

    def _committed(self, group: list[tuple[Pending, str]]) -> None:
        """The writer committed a group of requests' tasks: those not run by their request join
        their lanes (this process's share; the others' owners are told), and each loop hears of
        its group in one wake-up."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Pending, str]]] = {}
        self.table.catch_up()
        with self._cond:
            for p, task_id in group:
                by_loop.setdefault(p.loop, []).append((p, task_id))
                if p.answered:
                    continue
                if not self.table.owns(p.command):
                    self.table.tell_owner(p.command)
                elif self.lanes.add(Task(task_id, p.command)):
                    self._cond.notify()
        handed = time.monotonic()
        for loop, settled in by_loop.items():
            loop.call_soon_threadsafe(self._on_loop, settled, handed)

    def _on_loop(self, settled: list[tuple[Pending, str]], handed: float) -> None:
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

    def _dispatch(self, task: Task) -> None:
        if task.not_before > time.time() + 0.001:
            with self._cond:
                heapq.heappush(self._delayed, (task.not_before, task.id, task))
                self._delay_cond.notify()
            return
        with self._cond:
            if self.lanes.add(task):
                self._cond.notify()

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
        """A dispatcher: takes the next ready lane's batch; a coroutine handler's goes to the
        event loop (the lane, and its tenant's share, stay taken until it is over), a plain one is
        run here."""
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
            handler = self.handlers.get(batch[0].command.name)
            if handler is not None and inspect.iscoroutinefunction(handler):
                with self._cond:
                    self._runs_in_flight += 1
                started = self.portal.submit(self._awaited(handler, batch))
                started.add_done_callback(functools.partial(self._async_done, lane, batch))
                continue
            try:
                self._finish(lane, batch, self._call(handler, batch))
            finally:
                self._release(batch)

    @staticmethod
    async def _awaited(handler: AsyncTaskHandler, batch: list[Task]) -> list[Any]:
        return list(await handler(batch, _no_respond))

    def _async_done(self, lane: str, batch: list[Task], done: Future[list[Any]]) -> None:
        try:
            self._finish(lane, batch, done.exception() or done.result())
        finally:
            self._release(batch)
            with self._cond:
                self._runs_in_flight -= 1
                self._cond.notify_all()

    def _release(self, batch: list[Task]) -> None:
        with self._cond:
            if self.lanes.release(batch):
                self._cond.notify()

    def _call(self, handler: TaskHandler | AsyncTaskHandler | None,
              batch: list[Task]) -> TaskResults | BaseException | None:
        if handler is None:
            log.error("no handler for %r; %d tasks dropped", batch[0].command.name, len(batch))
            return [None] * len(batch)
        try:
            return handler(batch, _no_respond)  # type: ignore[return-value]
        except Exception as e:  # noqa: BLE001 - the tasks are retried
            return e

    def _finish(self, lane: str, batch: list[Task], results: TaskResults | BaseException | None) -> None:
        """A lane's batch is over when its results are in (a plain handler that sent its work off
        returned a Future: the lane stays busy until it completes, so a source's runs stay in
        order and never overlap); its lane's next batch goes to a dispatcher."""
        if isinstance(results, Future):
            future = results
            if not future.done():
                future.add_done_callback(lambda done: self._finish(lane, batch, done.exception() or done.result()))
                return
            results = future.exception() or future.result()
        if isinstance(results, TryLater):
            self._defer(lane, batch, results)
            return
        self._settle(batch, results)
        with self._cond:
            if self.lanes.done(lane, batch):
                self._cond.notify()

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
                self._retry(task)
            return
        self.writer.finished([task.id for task in batch])

    def _retry(self, task: Task) -> None:
        """Counts the failed attempt and queues the task again after its delay (the update is the
        writer's: this may be the event loop)."""
        if task.attempts >= len(RETRY_DELAYS_S):
            log.error("task %s (%s) dropped after %d attempts", task.id, task.command.name, task.attempts + 1)
            self.writer.finished([task.id])
            return
        run_at = time.time() + RETRY_DELAYS_S[task.attempts]

        def again() -> None:
            with self.db.writing() as conn:
                conn.execute("UPDATE tasks SET attempts = attempts + 1, run_at = ? WHERE id = ?", (run_at, task.id))
            self._dispatch(Task(task.id, task.command, task.attempts + 1, run_at))

        self.writer.run(again)


def _no_respond(_: Task, __: dict[str, Any]) -> None:
    """Queued work has nobody waiting for its respond()."""
