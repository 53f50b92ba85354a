"""The in-process lease table: a source's waiters, threads and coroutines alike, get it in the
order they asked, one at a time; a waiter that gives up or is cancelled leaves the line."""

from __future__ import annotations

import asyncio
import threading

import pytest

from headwater.adapters.in_process_lease import InProcessLease
from headwater.ports import Busy


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

