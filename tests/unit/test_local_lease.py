"""The local source lease across processes (adapters/local/lease.py): a slot another process holds
is waited for, a dead holder's slot is free, and a process knows when another held the source
since it last did (so what it keeps of the source in memory is read again)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from headwater.adapters.local.lease import LocalLease
from headwater.ports import Busy

CONTEXT = multiprocessing.get_context("fork")
WAIT_S = 30.0


def hold_in_child(path: Path, source_id: str, held: Event, release: Event) -> None:
    lease = LocalLease(path)
    with lease.hold(source_id, WAIT_S):
        held.set()
        release.wait(WAIT_S)


def holder(path: Path, source_id: str) -> tuple[multiprocessing.process.BaseProcess, Event]:
    held, release = CONTEXT.Event(), CONTEXT.Event()
    child = CONTEXT.Process(target=hold_in_child, args=(path, source_id, held, release), daemon=True)
    child.start()
    assert held.wait(WAIT_S), "the child did not take the lease"
    return child, release


def test_a_source_another_process_holds_is_waited_for(tmp_path: Path) -> None:
    child, release = holder(tmp_path / "leases", "dc_1")
    lease = LocalLease(tmp_path / "leases")
    with pytest.raises(Busy), lease.hold("dc_1", WAIT_S, wait_s=0.05):
        pass
    with lease.hold("dc_2", WAIT_S):  # another source is free meanwhile
        pass
    release.set()
    with lease.hold("dc_1", WAIT_S):  # waits for the child to let go
        assert lease.taken_elsewhere("dc_1")
    with lease.hold("dc_1", WAIT_S):
        assert not lease.taken_elsewhere("dc_1")  # nobody else held it since
    child.join(WAIT_S)


def test_a_coroutine_waits_for_another_process_holding_no_thread(tmp_path: Path) -> None:
    child, release = holder(tmp_path / "leases", "dc_1")
    lease = LocalLease(tmp_path / "leases")

    async def both() -> list[str]:
        order: list[str] = []

        async def take() -> None:
            async with lease.held("dc_1", WAIT_S):
                order.append("took")

        waiting = asyncio.ensure_future(take())
        await asyncio.sleep(0)
        order.append("loop free")  # the waiter is parked, the loop runs on
        release.set()
        await waiting
        return order

    assert asyncio.run(both()) == ["loop free", "took"]
    child.join(WAIT_S)


def test_a_killed_holders_slot_is_free_at_once(tmp_path: Path) -> None:
    child, _ = holder(tmp_path / "leases", "dc_1")
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(WAIT_S)
    lease = LocalLease(tmp_path / "leases")
    with lease.hold("dc_1", WAIT_S, wait_s=WAIT_S):
        assert lease.taken_elsewhere("dc_1")
