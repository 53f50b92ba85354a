"""The local task queue on real SQLite and real threads: a waiting request runs its own run in its
own coroutine once its task is durable, and its answer comes back as a value; queued runs are
coroutines started on the event loop by the dispatchers, holding no thread while they wait, plain
handlers run on the dispatchers' threads; every committed task runs, in order per source, and
leaves the table."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from headwater.adapters.local.lease import LocalLease
from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.task_queue import LocalTaskQueue
from headwater.domain.commands import RunSource
from headwater.ports import Task, TryLater


class Recorder:
    """Which thread ran each task, in what order; the `custom` source's runs respond. `run` is
    the RunSource handler as the service has it: a coroutine holding the source's lease."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, int, int]] = []  # (source, event n, thread)
        self.changed = threading.Condition()
        self.lease = LocalLease(Path(tempfile.mkdtemp()) / "leases")  # the real lease, its slots' file too
        self.overlaps = 0
        self.running: set[str] = set()
        self.loops: list[asyncio.AbstractEventLoop] = []

    def __call__(self, batch: list[Task], on_respond: Any) -> list[None]:
        with self.changed:
            for task in batch:
                command: RunSource = task.command  # type: ignore[assignment]
                self.ran.append((command.source_id, command.event["n"], threading.get_ident()))
                if command.source_id == "custom":
                    on_respond(task, {"status": 200, "body": str(command.event["n"])})
            self.changed.notify_all()
        return [None] * len(batch)

    async def run(self, batch: list[Task], on_respond: Any) -> list[None]:
        source_id = batch[0].command.lane or ""
        self.loops.append(asyncio.get_running_loop())
        async with self.lease.held(source_id, 30):
            self.overlaps += source_id in self.running
            self.running.add(source_id)
            await asyncio.sleep(0)  # a run waits for its runner
            try:
                return self(batch, on_respond)
            finally:
                self.running.discard(source_id)

    def wait_for(self, runs: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.ran) >= runs, timeout=30), self.ran


def run(source_id: str, n: int) -> RunSource:
    return RunSource(source_id, {"n": n}, 1000, "http")


@pytest.fixture
def database(tmp_path: Path) -> Database:
    return Database(tmp_path / "queue.db")


def started(database: Database, recorder: Recorder, workers: int = 2) -> Iterator[LocalTaskQueue]:
    queue = LocalTaskQueue(database, workers=workers)
    queue.handle(RunSource, recorder.run)
    queue.start()
    try:
        yield queue
    finally:
        queue.stop()


async def ask(queue: LocalTaskQueue, n: int) -> tuple[Any, int]:
    return await queue.ingest_answered(run("custom", n), 30), threading.get_ident()


def test_a_waiting_requests_run_runs_in_its_own_coroutine_and_answers_as_a_value_once_durable(
        database: Database) -> None:
    """The run may start before its task's commit ends (they overlap), and responds at once; the
    answer still comes only once the task is in the table (the run still going on then)."""
    recorder = Recorder()
    finishing = asyncio.Event()
    stored_at_answer: list[bool] = []

    async def handler(batch: list[Task], on_respond: Any) -> list[None]:
        results = await recorder.run(batch, on_respond)
        await finishing.wait()  # the run goes on after its respond()
        return results

    queue = LocalTaskQueue(database, workers=1)
    queue.handle(RunSource, handler)
    queue.start()
    try:
        async def main() -> tuple[Any, int]:
            answer, loop_thread = await ask(queue, 7)
            stored_at_answer.append(_tasks(database) == 1)
            finishing.set()
            return answer, loop_thread

        answer, loop_thread = asyncio.run(main())
        assert answer == {"status": 200, "body": "7"}
        assert recorder.ran == [("custom", 7, loop_thread)]
        assert stored_at_answer == [True]
    finally:
        queue.stop()
    assert _tasks(database) == 0  # finished: deleted with the writer's next group, at the latest as it stops


def _tasks(database: Database) -> int:
    """The tasks in the table as another connection (a crash's restart) would see them."""
    with sqlite3.connect(database.path) as conn:
        return int(conn.execute("SELECT count(*) FROM tasks").fetchone()[0])


def test_a_queued_run_is_a_coroutine_on_the_queues_event_loop(database: Database) -> None:
    recorder = Recorder()
    for queue in started(database, recorder, workers=1):
        asyncio.run(queue.ingest(run("dc_a", 1)))
        recorder.wait_for(1)
        assert recorder.loops == [queue.portal.loop]


def test_every_task_runs_once_in_order_per_source_without_overlap_and_leaves_the_table(database: Database) -> None:
    recorder = Recorder()
    for queue in started(database, recorder):
        async def main(queue: LocalTaskQueue = queue) -> list[Any]:
            plain = [queue.ingest(run(f"dc_{i % 3}", i)) for i in range(60)]
            asked = [ask(queue, i) for i in range(20)]
            results = await asyncio.gather(*plain, *asked)
            return [answer for answer, _ in results[60:]]

        answers = asyncio.run(main())
        recorder.wait_for(80)
        assert answers == [{"status": 200, "body": str(i)} for i in range(20)]
        for source in ("dc_0", "dc_1", "dc_2"):
            numbers = [n for s, n, _ in recorder.ran if s == source]
            assert numbers == sorted(numbers) and len(numbers) == len(set(numbers))
        assert sorted(n for s, n, _ in recorder.ran if s == "custom") == list(range(20))
        assert recorder.overlaps == 0 and len(recorder.ran) == 80
    # finished tasks are deleted with the writer's next group, at the latest as it stops
    assert database.connection().execute("SELECT count(*) FROM tasks").fetchone()[0] == 0


def test_a_task_committed_before_a_restart_runs_after_it(database: Database) -> None:
    queue = LocalTaskQueue(database, workers=1)
    queue.writer.start()

    async def commit_only() -> str:
        return await queue.ingest(run("dc_a", 1))

    asyncio.run(commit_only())
    queue.writer.stop()
    recorder = Recorder()
    for _ in started(database, recorder):
        recorder.wait_for(1)
        assert [(s, n) for s, n, _ in recorder.ran] == [("dc_a", 1)]


def tenant_run(source_id: str, n: int, namespace: str) -> RunSource:
    return RunSource(source_id, {"n": n}, 1000, "http", namespace=namespace)


def test_a_tenant_whose_runs_wait_has_only_its_share_in_flight_and_holds_no_thread(database: Database) -> None:
    """One dispatcher, a share of one: tenant A's four runs wait (as coroutines), and yet tenant
    B's run goes at once, through the same one thread, while A's others wait their turn in their
    lanes, not in flight."""
    release: Future[None] = Future()
    blocked: list[str] = []
    recorder = Recorder()

    async def handler(batch: list[Task], on_respond: Any) -> list[None]:
        if batch[0].command.tenant == "u_a":
            with recorder.changed:
                blocked.append(batch[0].id)
            await asyncio.wrap_future(release)
        return recorder(batch, on_respond)

    queue = LocalTaskQueue(database, workers=1, tenant_share=1)
    queue.handle(RunSource, handler)
    queue.start()
    try:
        async def ingest_all() -> None:
            for i in range(4):
                await queue.ingest(tenant_run(f"dc_a{i}", i, "u_a"))
            await queue.ingest(tenant_run("dc_b", 9, "u_b"))

        asyncio.run(ingest_all())
        recorder.wait_for(1)
        assert [(s, n) for s, n, _ in recorder.ran] == [("dc_b", 9)]
        assert len(blocked) == 1  # A's other three lanes wait, not in flight
        release.set_result(None)
        recorder.wait_for(5)
    finally:
        if not release.done():
            release.set_result(None)
        queue.stop()


def test_a_batch_given_back_for_later_runs_again_first_in_its_lane_without_counting_an_attempt(
        database: Database) -> None:
    recorder = Recorder()
    tries: list[list[Task]] = []

    async def handler(batch: list[Task], on_respond: Any) -> list[None]:
        tries.append(batch)
        if len(tries) == 1:
            raise TryLater("waits on another caller", 0.05)
        return recorder(batch, on_respond)

    queue = LocalTaskQueue(database, workers=2)
    queue.handle(RunSource, handler)
    queue.start()
    try:
        async def ingest_two() -> None:
            await queue.ingest(run("dc_a", 1))
            await queue.ingest(run("dc_a", 2))

        asyncio.run(ingest_two())
        recorder.wait_for(2)
        assert [n for _, n, _ in recorder.ran] == [1, 2]
        first, again = tries[0][0], tries[1][0]  # the lane's next batch starts with the one given back
        assert first.deferred_since is None and again.id == first.id
        assert again.deferred_since is not None and again.attempts == 0
    finally:
        queue.stop()
    assert database.connection().execute("SELECT count(*) FROM tasks").fetchone()[0] == 0


def test_a_failed_queued_run_is_retried_and_a_plain_handler_runs_on_a_dispatcher(database: Database) -> None:
    recorder = Recorder()
    tries: list[int] = []

    def plain(batch: list[Task], on_respond: Any) -> list[None]:
        tries.append(threading.get_ident())
        if len(tries) == 1:
            raise RuntimeError("fails once")
        return recorder(batch, on_respond)

    queue = LocalTaskQueue(database, workers=1)
    queue.handle(RunSource, plain)
    queue.start()
    try:
        asyncio.run(queue.ingest(run("dc_a", 1)))
        recorder.wait_for(1)  # after the first retry's delay
        assert len(tries) == 2 and threading.get_ident() not in tries
    finally:
        queue.stop()


def test_requests_to_a_busy_source_gather_and_run_as_its_next_batch_in_the_order_they_came(
        database: Database) -> None:
    """While one request's run holds its source, the requests that come gather: one runner call
    and one commit for all of them, each still getting its own answer."""
    recorder = Recorder()
    batches: list[list[int]] = []
    first_running, release = asyncio.Event(), asyncio.Event()

    async def handler(batch: list[Task], on_respond: Any) -> list[None]:
        batches.append([t.command.event["n"] for t in batch])  # type: ignore[attr-defined]
        if len(batches) == 1:
            first_running.set()
            await release.wait()
        return await recorder.run(batch, on_respond)

    queue = LocalTaskQueue(database, workers=1)
    queue.handle(RunSource, handler)
    queue.start()
    try:
        async def main() -> list[Any]:
            first = asyncio.ensure_future(ask(queue, 0))
            await first_running.wait()
            others = [asyncio.ensure_future(ask(queue, n)) for n in range(1, 6)]
            while len(queue._gathering.get("custom", _no_batch).tasks) < 5:  # noqa: SLF001 - they have gathered
                await asyncio.sleep(0)
            release.set()
            return [answer for answer, _ in await asyncio.gather(first, *others)]

        answers = asyncio.run(main())
    finally:
        queue.stop()
    assert answers == [{"status": 200, "body": str(n)} for n in range(6)]
    assert batches == [[0], [1, 2, 3, 4, 5]]
    assert _tasks(database) == 0


class _NoBatch:
    tasks: list[Task] = []


_no_batch = _NoBatch()
