"""The local task queue on real SQLite and real threads: a waiting request's run starts on its
event loop as soon as its task commits and its answer comes back as a value; what cannot start
there goes to a worker; every committed task runs, in order per source, and leaves the table."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.task_queue import LocalTaskQueue
from headwater.adapters.responses import InProcessResponses
from headwater.domain.commands import RunSource
from headwater.ports import Task, TryLater


class Recorder:
    """The RunSource handler and its non-blocking form: which thread ran each task, in what order;
    the `custom` source's runs respond."""

    def __init__(self, start_now: bool = True) -> None:
        self.start_now = start_now
        self.ran: list[tuple[str, str, int]] = []  # (source, event n, thread)
        self.changed = threading.Condition()

    def __call__(self, batch: list[Task], on_partial: Any) -> list[None]:
        with self.changed:
            for task in batch:
                command: RunSource = task.command  # type: ignore[assignment]
                self.ran.append((command.source_id, command.event["n"], threading.get_ident()))
                if command.source_id == "custom":
                    on_partial(task, {"status": 200, "body": str(command.event["n"])})
            self.changed.notify_all()
        return [None] * len(batch)

    def now(self, batch: list[Task], on_partial: Any) -> list[None] | None:
        return self(batch, on_partial) if self.start_now else None

    def wait_for(self, runs: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.ran) >= runs, timeout=30), self.ran


def run(source_id: str, n: int) -> RunSource:
    return RunSource(source_id, {"n": n}, 1000, "http")


@pytest.fixture
def database(tmp_path: Path) -> Database:
    return Database(tmp_path / "queue.db")


def started(database: Database, recorder: Recorder) -> Iterator[LocalTaskQueue]:
    queue = LocalTaskQueue(database, workers=2, responses=InProcessResponses())
    queue.handle(RunSource, recorder, now=recorder.now)
    queue.start()
    try:
        yield queue
    finally:
        queue.stop()


async def ask(queue: LocalTaskQueue, n: int) -> tuple[Any, int]:
    task_id = await queue.ingest(run("custom", n), respond=True)
    return await queue.responses.wait(task_id, 30), threading.get_ident()


def test_a_waiting_requests_run_starts_on_its_event_loop_and_answers_as_a_value(database: Database) -> None:
    recorder = Recorder()
    for queue in started(database, recorder):
        answer, loop_thread = asyncio.run(ask(queue, 7))
        assert answer == ("respond", {"status": 200, "body": "7"})
        assert recorder.ran == [("custom", 7, loop_thread)]


def test_a_run_that_cannot_start_on_the_loop_goes_to_a_worker(database: Database) -> None:
    recorder = Recorder(start_now=False)
    for queue in started(database, recorder):
        answer, loop_thread = asyncio.run(ask(queue, 1))
        assert answer == ("respond", {"status": 200, "body": "1"})
        assert recorder.ran[0][2] != loop_thread


def test_every_task_runs_once_in_order_per_source_and_leaves_the_table(database: Database) -> None:
    recorder = Recorder()
    for queue in started(database, recorder):
        async def main(queue: LocalTaskQueue = queue) -> list[Any]:
            plain = [queue.ingest(run(f"dc_{i % 3}", i)) for i in range(60)]
            asked = [ask(queue, i) for i in range(20)]
            results = await asyncio.gather(*plain, *asked)
            return [answer for answer, _ in results[60:]]

        answers = asyncio.run(main())
        recorder.wait_for(80)
        assert answers == [("respond", {"status": 200, "body": str(i)}) for i in range(20)]
        for source in ("dc_0", "dc_1", "dc_2", "custom"):
            numbers = [n for s, n, _ in recorder.ran if s == source]
            assert numbers == sorted(numbers) and len(numbers) == len(set(numbers))
        assert len(recorder.ran) == 80
    # finished tasks are deleted with the writer's next group, at the latest as it stops
    assert database.connection().execute("SELECT count(*) FROM tasks").fetchone()[0] == 0


def test_a_task_committed_before_a_restart_runs_after_it(database: Database) -> None:
    queue = LocalTaskQueue(database, workers=1, responses=InProcessResponses())
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


def test_a_tenant_whose_work_blocks_holds_only_its_share_of_the_workers(database: Database) -> None:
    """Four workers, a share of one: tenant A's four runs block their worker, and yet tenant B's
    run goes at once, while A's others wait their turn holding none."""
    release, blocked = threading.Event(), []
    recorder = Recorder(start_now=False)

    def handler(batch: list[Task], on_partial: Any) -> list[None]:
        if batch[0].command.tenant == "u_a":
            with recorder.changed:
                blocked.append(batch[0].id)
            assert release.wait(30)
        return recorder(batch, on_partial)

    queue = LocalTaskQueue(database, workers=4, responses=InProcessResponses())
    assert queue.tenant_share == 1
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
        assert len(blocked) == 1  # A's other three lanes wait, holding no worker
        release.set()
        recorder.wait_for(5)
    finally:
        release.set()
        queue.stop()


def test_a_batch_given_back_for_later_runs_again_first_in_its_lane_without_counting_an_attempt(
        database: Database) -> None:
    recorder = Recorder(start_now=False)
    tries: list[list[Task]] = []

    def handler(batch: list[Task], on_partial: Any) -> list[None]:
        tries.append(batch)
        if len(tries) == 1:
            raise TryLater("waits on another caller", 0.05)
        return recorder(batch, on_partial)

    queue = LocalTaskQueue(database, workers=2, responses=InProcessResponses())
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
