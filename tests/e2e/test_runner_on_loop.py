"""The runner pool read on an event loop (the server's): answers reach the loop's thread without a
reader thread, a long answer is parsed off the loop and still comes in order, and a process that
breaks the protocol fails only its own calls. Real Node, a real loop in a thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.ports import Instance, WouldBlock
from headwater.settings import Settings

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
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()


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


def test_a_call_that_must_not_wait_is_refused_until_the_accounts_process_runs(tmp_path: Path) -> None:
    """The event loop's own start of a run never starts a process or waits for a place in the pool."""
    settings = Settings(data_dir=tmp_path, runner_processes=1)
    bundler, pool = LocalBundler(settings), NodeRunnerPool(settings)
    try:
        instance = Instance(id="dc_echo", props={}, account="a", http={"endpoint": "x", "customResponse": True})
        bundle = bundler.bundle(ECHO)
        with pytest.raises(WouldBlock):
            pool.submit_many(bundle, instance, [{"n": 0}], 10_000, wait=False)
        pool.run_many(bundle, instance, [{"n": 1}], 10_000)  # the account's process starts
        ran = pool.submit_many(bundle, instance, [{"n": 2}], 10_000, wait=False).result(timeout=30)
        assert ran[0].error is None and ran[0].emits[0].event["n"] == 2
        with pytest.raises(WouldBlock):  # the pool's one place is taken by account a
            pool.submit_many(bundle, Instance(id="dc_b", props={}, account="b"), [{"n": 3}], 10_000, wait=False)
    finally:
        pool.close()
