"""The in-process lease table: a source's waiters, threads and coroutines alike, get it in the
order they asked, one at a time; a waiter that gives up or is cancelled leaves the line."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from headwater.adapters.in_process_lease import InProcessLease
from headwater.ports import Busy
from tests.fake_clock import run_on_fake_clock
from tests.loop_thread import loop_in_thread


def test_a_coroutine_waits_for_a_threads_hold_and_the_line_keeps_its_order() -> None:
    lease = InProcessLease()
    order: list[str] = []
    released = threading.Event()

    async def run(name: str) -> None:
        async with lease.held("dc_a", 30):
            order.append(name)

    async def main() -> None:
        first, second = asyncio.ensure_future(run("first")), asyncio.ensure_future(run("second"))
        await asyncio.sleep(0)  # both have asked, behind the thread
        assert order == []
        released.set()
        await asyncio.gather(first, second)

    holding = threading.Event()

    def thread() -> None:
        with lease.hold("dc_a", 30):
            holding.set()
            released.wait(30)
            order.append("thread")

    holder = threading.Thread(target=thread)
    holder.start()
    assert holding.wait(30)
    asyncio.run(main())
    holder.join(30)
    assert order == ["thread", "first", "second"]


def test_a_holder_holds_again_and_a_waiter_that_gives_up_or_is_cancelled_leaves_the_line() -> None:
    lease = InProcessLease()
    order: list[str] = []

    async def run(name: str) -> None:
        async with lease.held("dc_a", 30):
            order.append(name)

    async def holder(holding: asyncio.Event, release: asyncio.Event) -> None:
        async with lease.held("dc_a", 30):
            async with lease.held("dc_a", 30, wait_s=0):
                pass  # re-entrant in its holder's context (a task it starts inherits it too)
            holding.set()
            await release.wait()

    async def main() -> None:
        holding, release = asyncio.Event(), asyncio.Event()
        held = asyncio.ensure_future(holder(holding, release))
        await holding.wait()
        with pytest.raises(Busy):
            async with lease.held("dc_a", 30, wait_s=0):
                pass
        cancelled = asyncio.ensure_future(run("cancelled"))
        following = asyncio.ensure_future(run("following"))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(held, following)
        assert cancelled.cancelled()

    asyncio.run(main())
    assert order == ["following"]
    with lease.hold("dc_a", 30, wait_s=0):  # nothing left holding it
        pass



class _Observed(InProcessLease):
    """Says when a waiter has taken its place in a source's line, so a test asks in a known order."""

    def __init__(self) -> None:
        super().__init__()
        self.queued = threading.Semaphore(0)

    def _try(self, source_id: str, waiter: Any) -> bool:
        free = super()._try(source_id, waiter)
        if not free:
            self.queued.release()
        return free


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A running loop in a thread of its own (the server's), for coroutines asked from the test."""
    with loop_in_thread() as loop:
        yield loop


def test_threads_and_coroutines_asking_in_turn_get_it_in_the_order_they_asked_one_at_a_time(
        loop: asyncio.AbstractEventLoop) -> None:
    """Threads and coroutines ask alternately while a thread holds it (each asks once the one
    before it is in line); a thread that gives up at once leaves the line in the middle."""
    lease = _Observed()
    inside: list[str] = []
    order: list[str] = []
    crowd: list[int] = []  # how many held it at each entry
    guard = threading.Lock()

    def enter(name: str) -> None:
        with guard:
            inside.append(name)
            crowd.append(len(inside))
            order.append(name)

    def leave(name: str) -> None:
        with guard:
            inside.remove(name)

    def thread_waiter(name: str) -> None:
        with lease.hold("dc_a", 60):
            enter(name)
            leave(name)

    async def coroutine_waiter(name: str) -> None:
        async with lease.held("dc_a", 60):
            enter(name)
            await asyncio.sleep(0)  # others run meanwhile, none of them in here
            leave(name)

    gave_up: list[str] = []

    def gives_up() -> None:
        try:
            with lease.hold("dc_a", 60, wait_s=0):
                gave_up.append("held it")
        except Busy:
            gave_up.append("busy")

    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with lease.hold("dc_a", 60):
            enter("holder")
            holding.set()
            release.wait(60)
            leave("holder")

    first = threading.Thread(target=holder)
    first.start()
    assert holding.wait(30)
    threads, runs = [first], []
    kinds = ["thread", "coroutine", "thread", "gives up", "coroutine", "coroutine", "thread", "coroutine"]
    for i, kind in enumerate(kinds):
        name = f"{kind} {i}"
        if kind == "coroutine":
            runs.append(asyncio.run_coroutine_threadsafe(coroutine_waiter(name), loop))
        elif kind == "thread":
            threads.append(threading.Thread(target=thread_waiter, args=(name,)))
            threads[-1].start()
        else:
            quitter = threading.Thread(target=gives_up)
            quitter.start()
        assert lease.queued.acquire(timeout=30)  # in line before the next asks
        if kind == "gives up":
            quitter.join(30)  # and out of it again
            assert not quitter.is_alive()
    release.set()
    for thread in threads:
        thread.join(30)
    for run in runs:
        run.result(30)
    assert gave_up == ["busy"]
    assert order == ["holder"] + [f"{kind} {i}" for i, kind in enumerate(kinds) if kind != "gives up"]
    assert crowd == [1] * len(order)
    with lease.hold("dc_a", 60, wait_s=0):  # nothing left holding it
        pass


def test_a_coroutine_that_times_out_leaves_the_line_and_the_rest_keep_their_order_on_a_fake_clock() -> None:
    """Each waiter's own wait, on a fake clock: the ones whose wait ends first give up Busy at
    exactly their time; the holder lets go at 10 s and the rest follow in the order they asked.
    One waiter's wait ends at the very moment the lease is let go: it gets it or leaves Busy, and
    either way the lease is neither lost nor held twice."""
    lease = InProcessLease()
    log: list[tuple[str, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()

        async def holder() -> None:
            async with lease.held("dc_a", 60):
                log.append(("holder", loop.time() - start))
                await asyncio.sleep(10)

        async def waiter(name: str, wait_s: float) -> None:
            try:
                async with lease.held("dc_a", 60, wait_s=wait_s):
                    log.append((name, loop.time() - start))
                    await asyncio.sleep(1)
            except Busy:
                log.append((f"{name} busy", loop.time() - start))

        await asyncio.gather(holder(), waiter("b", 5), waiter("c", 30), waiter("d", 3), waiter("e", 10),
                             waiter("f", 30))

    run_on_fake_clock(main())
    assert log[:3] == [("holder", 0), ("d busy", 3), ("b busy", 5)]
    assert log[3:] in ([("e", 10), ("c", 11), ("f", 12)],  # granted as its wait ended: it holds it
                       [("e busy", 10), ("c", 10), ("f", 11)])  # or it left, and the next got it
    with lease.hold("dc_a", 60, wait_s=0):
        pass


def test_holding_again_in_the_holders_context_passes_and_lets_nothing_go() -> None:
    """Re-entrant within a context: a thread's nested hold, and a coroutine's tasks and the threads
    it hands work to; the inner block's end leaves the lease held; another context waits."""
    lease = InProcessLease()

    def busy_elsewhere() -> bool:
        """Whether a thread of its own (a context of its own) finds the lease held."""
        found: list[bool] = []

        def attempt() -> None:
            try:
                with lease.hold("dc_a", 60, wait_s=0):
                    found.append(False)
            except Busy:
                found.append(True)

        thread = threading.Thread(target=attempt)
        thread.start()
        thread.join(30)
        return found[0]

    with lease.hold("dc_a", 60):
        with lease.hold("dc_a", 60, wait_s=0):
            pass
        assert busy_elsewhere()
    assert not busy_elsewhere()

    def in_a_thread() -> str:
        with lease.hold("dc_a", 60, wait_s=0):
            return "held"

    async def again() -> str:
        async with lease.held("dc_a", 60, wait_s=0):
            return "held"

    async def main() -> None:
        async with lease.held("dc_a", 60):
            assert await asyncio.create_task(again()) == "held"  # a task it starts
            assert await asyncio.to_thread(in_a_thread) == "held"  # a thread it hands work to
            assert busy_elsewhere()
        assert not busy_elsewhere()
        outsider = asyncio.create_task(again(), context=contextvars.Context())  # not started by a holder
        async with lease.held("dc_a", 60):
            with pytest.raises(Busy):
                await outsider

    asyncio.run(main())
