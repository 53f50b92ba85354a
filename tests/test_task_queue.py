"""The local task queue's scheduling: work nobody waits on yields to requests, for a bounded time;
a run whose caller waits for its answer never does. Real SQLite, real worker threads."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.task_queue import LocalTaskQueue
from headwater.domain.commands import RunSource
from headwater.ports import Task

STREAM_S = 1.0


class Recorder:
    """The RunSource handler: when each source's runs started; answers the `custom` source's."""

    def __init__(self) -> None:
        self.started: dict[str, list[float]] = {}
        self.changed = threading.Condition()

    def __call__(self, batch: list[Task], on_partial: Any) -> list[None]:
        now = time.monotonic()
        with self.changed:
            for task in batch:
                source_id = task.command.source_id  # type: ignore[attr-defined]
                self.started.setdefault(source_id, []).append(now)
                if source_id == "custom":
                    on_partial(task, {"status": 200})
            self.changed.notify_all()
        return [None] * len(batch)

    def wait_for(self, runs: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: sum(map(len, self.started.values())) >= runs, timeout=30)


def run(source_id: str) -> RunSource:
    return RunSource(source_id, {"n": 1}, 1000, "http")


async def stream_then_ask(queue: LocalTaskQueue) -> tuple[int, float, float]:
    """Four callers send `plain` requests for STREAM_S; once the first is committed, a `custom`
    request waits for its run's answer. Returns (plain requests, when custom was answered, when
    the last plain request was committed)."""
    first = asyncio.Event()
    stop_at = time.monotonic() + STREAM_S
    sent = 0

    async def caller() -> None:
        nonlocal sent
        while time.monotonic() < stop_at:
            await queue.ingest(run("plain"))
            sent += 1
            first.set()

    callers = [asyncio.create_task(caller()) for _ in range(4)]
    await first.wait()
    ingested = await queue.ingest(run("custom"), respond=True)
    kind, _ = await asyncio.wait_for(ingested.outcome, timeout=STREAM_S)
    assert kind == "respond"
    answered = time.monotonic()
    await asyncio.gather(*callers)
    return sent, answered, time.monotonic()


def ran(tmp_path: Path, yield_s: float) -> tuple[Recorder, int, float, float]:
    """The scenario on a queue that yields for `yield_s`, once every run it queued has run."""
    queue = LocalTaskQueue(Database(tmp_path / "queue.db"), workers=2, yield_s=yield_s, quiet_s=0.2)
    recorder = Recorder()
    queue.handle(RunSource, recorder)
    queue.start()
    try:
        plain, answered, last_commit = asyncio.run(stream_then_ask(queue))
        recorder.wait_for(plain + 1)
    finally:
        queue.stop()
    assert len(recorder.started["plain"]) == plain
    return recorder, plain, answered, last_commit


def test_runs_nobody_waits_on_go_after_the_requests_and_a_waiting_caller_does_not_wait(tmp_path: Path) -> None:
    recorder, _, answered, last_commit = ran(tmp_path, yield_s=30.0)
    assert answered < last_commit, "the caller waiting for its answer waited for the stream"
    assert min(recorder.started["plain"]) >= last_commit, "a run nobody waited on went while requests came"


def test_yielding_is_bounded(tmp_path: Path) -> None:
    recorder, _, _, last_commit = ran(tmp_path, yield_s=0.1)
    assert min(recorder.started["plain"]) < last_commit - STREAM_S / 2, "runs waited longer than yield_s"


def test_no_yielding_when_turned_off(tmp_path: Path) -> None:
    recorder, _, _, last_commit = ran(tmp_path, yield_s=0)
    assert min(recorder.started["plain"]) < last_commit - STREAM_S / 2
