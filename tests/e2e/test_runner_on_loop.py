"""The runner pool read on an event loop (the server's): answers reach the loop's thread without a
reader thread, a long answer is parsed off the loop and still comes in order, and a process that
breaks the protocol fails only its own calls. Real Node, a real loop in a thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater.adapters.local.async_runner import AsyncNodeRunner
from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.ports import Finished, Instance, Responded, RunMessage
from headwater.settings import Settings
from tests.loop_thread import loop_in_thread

ECHO = """export default {
  name: "Echo", version: "1.0.0",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    this.http.respond({ status: 200, body: String(event.n) });
    this.$emit({ n: event.n, big: "x".repeat(event.size || 0) });
  },
};"""


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    with loop_in_thread() as loop:
        yield loop


def test_answers_are_read_on_the_loop_and_a_long_one_off_it_in_order(tmp_path: Path,
                                                                     loop: asyncio.AbstractEventLoop) -> None:
    settings = Settings(data_dir=tmp_path, runner_processes=1)
    bundler, pool = LocalBundler(settings), NodeRunnerPool(settings)
    pool.attach(loop)
    loop_thread = asyncio.run_coroutine_threadsafe(thread_of_the_loop(), loop).result(30)
    responded: list[tuple[int, str, bool]] = []
    try:
        instance = Instance(id="dc_echo", props={}, account="a", http={"endpoint": "x", "customResponse": True})
        events = [{"n": 0}, {"n": 1, "size": 700_000}, {"n": 2, "size": 700_000}, {"n": 3}]
        results = pool.run_many(bundler.bundle(ECHO), instance, events, 10_000,
                                lambda i, r: responded.append((i, r["body"], threading.get_ident() == loop_thread)))
    finally:
        pool.close()
    assert [(i, body) for i, body, _ in responded] == [(0, "0"), (1, "1"), (2, "2"), (3, "3")]
    assert [r.error for r in results] == [None] * 4
    assert [len(r.emits[0].event["big"]) for r in results] == [0, 700_000, 700_000, 0]
    # before the first long answer, each was read on the loop's own thread, no reader thread between
    assert [on_the_loop for _, _, on_the_loop in responded[:2]] == [True, True]


async def thread_of_the_loop() -> int:
    return threading.get_ident()


def test_an_async_run_yields_each_respond_as_it_comes_then_its_outcome_and_starts_processes_off_the_loop(
        tmp_path: Path, loop: asyncio.AbstractEventLoop) -> None:
    """The async Runner on the loop the pool reads on: its messages come in order (each run's
    respond before the outcome), and starting the account's process (blocking) is done on a
    worker thread, never on the loop."""
    settings = Settings(data_dir=tmp_path, runner_processes=1)
    bundler, pool = LocalBundler(settings), NodeRunnerPool(settings)
    pool.attach(loop)
    runner = AsyncNodeRunner(pool)
    started_on: list[int] = []
    start = pool.launcher.start
    pool.launcher.start = lambda account: started_on.append(threading.get_ident()) or start(account)  # type: ignore[method-assign]
    instance = Instance(id="dc_echo", props={}, account="a", http={"endpoint": "x", "customResponse": True})
    bundle = bundler.bundle(ECHO)

    async def run(events: list[dict[str, int]]) -> tuple[int, list[RunMessage]]:
        return threading.get_ident(), [message async for message in runner.run(bundle, instance, events, 10_000)]

    try:
        loop_thread, first = asyncio.run_coroutine_threadsafe(run([{"n": 0}, {"n": 1}]), loop).result(60)
        _, second = asyncio.run_coroutine_threadsafe(run([{"n": 2}]), loop).result(60)
    finally:
        pool.close()
    assert [type(m).__name__ for m in first] == ["Responded", "Responded", "Finished"]
    assert [(m.index, m.response["body"]) for m in first if isinstance(m, Responded)] == [(0, "0"), (1, "1")]
    assert isinstance(first[-1], Finished) and [r.emits[0].event["n"] for r in first[-1].results] == [0, 1]
    assert isinstance(second[-1], Finished) and second[-1].results[0].error is None
    assert len(started_on) == 1 and started_on[0] != loop_thread  # once, off the loop
