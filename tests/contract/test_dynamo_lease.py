"""The DynamoDB source lease's expiry on a fake clock (its `clock` and `sleep` injected; a
coroutine's waits on a loop whose clock is fake: tests/fake_clock.py), DynamoDB itself under moto.
There is no renewal: a holder keeps the lease for `ttl_s` from when it took it, and only while its
item says so; a holder that died loses it then, and one that overran it loses it to the next."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from headwater.adapters.aws.dynamodb import DynamoStore
from headwater.adapters.aws.dynamodb.lease import DynamoLease
from headwater.ports import Busy
from tests.fake_clock import run_on_fake_clock


class Clock:
    """A fake wall clock that a lease's `sleep` advances."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_lease_is_held_for_its_whole_ttl_and_free_just_after(dynamo: DynamoStore) -> None:
    clock = Clock()
    dead, other = DynamoLease(dynamo.tables, clock, clock.sleep), DynamoLease(dynamo.tables, clock, clock.sleep)
    dying = dead.hold("dc_1", ttl_s=10)  # kept: a hold let go of is released when collected
    dying.__enter__()  # and never left: its process died
    clock.now += 10  # at its expiry, still its own
    with pytest.raises(Busy), other.hold("dc_1", ttl_s=10, wait_s=0):
        pass
    clock.now += 0.5
    with other.hold("dc_1", ttl_s=10, wait_s=0):
        pass
    assert clock.slept == []  # each try was the first: no backoff


def test_a_holder_that_overran_its_ttl_loses_the_lease_and_its_late_release_leaves_the_next_holders(
        dynamo: DynamoStore) -> None:
    clock = Clock()
    slow, next_, third = (DynamoLease(dynamo.tables, clock, clock.sleep) for _ in range(3))
    slow_hold = slow.hold("dc_1", ttl_s=10)
    slow_hold.__enter__()
    clock.now += 11  # its run went on past the ttl (nothing renews it)
    next_hold = next_.hold("dc_1", ttl_s=10, wait_s=0)
    next_hold.__enter__()
    slow_hold.__exit__(None, None, None)  # the slow one lets go late: of nothing it still holds
    with pytest.raises(Busy), third.hold("dc_1", ttl_s=10, wait_s=0):
        pass
    next_hold.__exit__(None, None, None)
    with third.hold("dc_1", ttl_s=10, wait_s=0):
        pass


def test_a_waiting_thread_backs_off_doubling_up_to_a_second_and_gives_up_at_its_wait(dynamo: DynamoStore) -> None:
    clock = Clock()
    dead, other = DynamoLease(dynamo.tables, clock, clock.sleep), DynamoLease(dynamo.tables, clock, clock.sleep)
    dying = dead.hold("dc_1", ttl_s=60)
    dying.__enter__()
    with pytest.raises(Busy), other.hold("dc_1", ttl_s=60, wait_s=5):
        pass
    assert clock.now == pytest.approx(1_000_005.0)  # exactly its wait, the last backoff cut short
    assert clock.slept[:6] == pytest.approx([0.02, 0.04, 0.08, 0.16, 0.32, 0.64])
    assert max(clock.slept) == 1.0


def test_a_coroutine_waits_out_a_dead_holders_lease_on_the_fake_clock(dynamo: DynamoStore) -> None:
    """`held`: its DynamoDB calls on worker threads (no fake time passes in them), its backoff
    awaited on the loop's fake clock: Busy at exactly its wait, and the lease had just after the
    dead holder's expiry, within one backoff."""
    times: dict[str, float] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        dead, other = DynamoLease(dynamo.tables, loop.time), DynamoLease(dynamo.tables, loop.time)
        dying = dead.held("dc_1", ttl_s=10)
        await dying.__aenter__()  # never leaves
        with pytest.raises(Busy):
            async with other.held("dc_1", ttl_s=10, wait_s=5):
                pass
        times["busy"] = loop.time() - start
        async with other.held("dc_1", ttl_s=10, wait_s=10):
            times["held"] = loop.time() - start
        async with DynamoLease(dynamo.tables, loop.time).held("dc_1", ttl_s=10, wait_s=0):  # let go: free at once
            times["free"] = loop.time() - start

    run_on_fake_clock(main())
    assert times["busy"] == pytest.approx(5)
    assert 10 < times["held"] <= 11
    assert times["free"] == times["held"]


def test_coroutines_of_one_process_line_up_before_asking_dynamodb_in_order_on_the_fake_clock(
        dynamo: DynamoStore) -> None:
    """One process's coroutines wait in its in-process line (in the order they asked), and only
    the first of them asks DynamoDB; one whose wait ends while another process holds the item
    leaves Busy, and the rest keep their order."""
    log: list[tuple[str, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        elsewhere, here = DynamoLease(dynamo.tables, loop.time), DynamoLease(dynamo.tables, loop.time)
        dying = elsewhere.held("dc_1", ttl_s=10)
        await dying.__aenter__()  # another process's, which died

        async def run(name: str, wait_s: float) -> None:
            try:
                async with here.held("dc_1", ttl_s=10, wait_s=wait_s):
                    log.append((name, loop.time() - start))
                    await asyncio.sleep(2)
            except Busy:
                log.append((f"{name} busy", loop.time() - start))

        await asyncio.gather(run("a", 30), run("b", 3), run("c", 30), run("d", 30))

    run_on_fake_clock(main())
    names = [name for name, _ in log]
    assert names == ["b busy", "a", "c", "d"]
    assert log[0][1] == pytest.approx(3)
    assert [t - log[1][1] for _, t in log[1:]] == pytest.approx([0, 2, 4])  # back to back
    assert 10 < log[1][1] <= 11


class _Gated(DynamoLease):
    """A lease whose conditional put waits, in its worker thread, for the test to let it go on."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.asking, self.go_on, self.released = threading.Event(), threading.Event(), threading.Event()

    def _try(self, source_id: str, ttl_s: float, token: str) -> bool:
        self.asking.set()
        self.go_on.wait(30)
        return super()._try(source_id, ttl_s, token)

    def _release(self, source_id: str, token: str) -> None:
        super()._release(source_id, token)
        self.released.set()


def test_a_coroutine_cancelled_while_its_put_is_on_the_way_leaves_no_lock_behind(dynamo: DynamoStore) -> None:
    """A run's coroutine can be cancelled while it asks DynamoDB (its caller went away): the put
    goes on in its thread and may take the lock; the lease must give back what it took, or the
    source waits out the whole ttl for a holder that is gone."""
    async def main() -> str:
        loop = asyncio.get_running_loop()
        gated = _Gated(dynamo.tables, loop.time)
        asking = asyncio.ensure_future(_hold(gated))
        await asyncio.to_thread(gated.asking.wait, 30)
        asking.cancel()
        gated.go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await asking
        await asyncio.to_thread(gated.released.wait, 10)  # what its put took, given back
        try:
            async with DynamoLease(dynamo.tables, loop.time).held("dc_1", ttl_s=60, wait_s=0):
                return "free"
        except Busy:
            return "busy"

    assert run_on_fake_clock(main()) == "free"


async def _hold(lease: DynamoLease) -> None:
    async with lease.held("dc_1", ttl_s=60):
        raise AssertionError("cancelled before it held it")


def test_a_process_learns_whether_another_held_the_source_since_it_last_did(dynamo: DynamoStore) -> None:
    """Two Lambda containers (a DynamoLease each) over one table: what one keeps of a source in
    memory is good only while nobody else held the source since (`Runs` reads it again otherwise).
    Before: always "not taken elsewhere", so a container ran on the `this.db` it last wrote."""
    one, other = DynamoLease(dynamo.tables), DynamoLease(dynamo.tables)
    with one.hold("dc_1", ttl_s=30):
        assert one.taken_elsewhere("dc_1")  # never held here: nothing in memory to trust
    with one.hold("dc_1", ttl_s=30):
        assert not one.taken_elsewhere("dc_1")  # nobody else since
    with other.hold("dc_1", ttl_s=30), other.hold("dc_1", ttl_s=30):  # re-entrant: one take
        assert other.taken_elsewhere("dc_1")
    with one.hold("dc_1", ttl_s=30):
        assert one.taken_elsewhere("dc_1")  # the other held it meanwhile
    with other.hold("dc_1", ttl_s=30, wait_s=0):  # let go of: free at once
        assert other.taken_elsewhere("dc_1")


def test_a_coroutine_holder_learns_it_too(dynamo: DynamoStore) -> None:
    one, other = DynamoLease(dynamo.tables), DynamoLease(dynamo.tables)

    async def held_by(lease: DynamoLease) -> bool:
        async with lease.held("dc_2", ttl_s=30, wait_s=0):
            return lease.taken_elsewhere("dc_2")

    assert [asyncio.run(held_by(lease)) for lease in (one, one, other, one)] == [True, False, True, True]
