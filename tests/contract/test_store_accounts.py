"""The storage contract, accounts: users, orgs, API keys, usage counters and source leases."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from headwater.domain import ids
from headwater.domain.errors import Conflict
from headwater.domain.models import User
from headwater.ports import Busy
from tests.contract import builders
from tests.contract.conftest import Backend


def test_a_user_is_found_by_id_and_a_taken_username_conflicts(store: Backend) -> None:
    alice = builders.user(store, "alice")
    with store.uow(readonly=True) as uow:
        assert uow.users.get(alice.id) == alice
        assert uow.users.get("u_missing") is None

    twin = User(ids.new_id("user"), "alice", "b@example.com", "paid", 1)
    with pytest.raises(Conflict) as caught, store.uow() as uow:
        uow.users.add(twin)
        uow.commit()
    assert caught.value.field == "username"
    with store.uow(readonly=True) as uow:
        assert uow.users.get(twin.id) is None  # the failed change left nothing behind


def test_orgs_have_unique_orgnames_and_members(store: Backend) -> None:
    owner, member = builders.user(store), builders.user(store)
    first = builders.org(store, owner, "acme")
    second = builders.org(store, owner, "globex")
    with pytest.raises(Conflict) as caught:
        builders.org(store, owner, "acme")
    assert caught.value.field == "orgname"

    with store.uow() as uow:
        uow.orgs.add_member(second.id, member.id)
        uow.orgs.add_member(first.id, member.id)
        uow.commit()
    with store.uow() as uow:
        uow.orgs.add_member(first.id, member.id)  # idempotent
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.orgs.get(first.id) == first
        assert uow.users.org_ids(member.id) == frozenset({first.id, second.id})
        assert uow.users.org_ids(owner.id) == frozenset()
        assert [o.id for o in uow.orgs.for_user(member.id)] == [first.id, second.id]  # by created_at


def test_api_keys_find_their_user_until_revoked(store: Backend) -> None:
    alice = builders.user(store)
    key_hash = ids.hash_api_key(ids.new_api_key())
    with store.uow() as uow:
        uow.keys.add(key_hash, alice.id, 1)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.keys.user_for(key_hash) == alice.id
        assert uow.keys.user_for("nope") is None
    with store.uow() as uow:
        assert uow.keys.revoke(key_hash, 2) is True
        uow.commit()
    with store.uow() as uow:
        assert uow.keys.user_for(key_hash) is None
        assert uow.keys.revoke(key_hash, 3) is False
        assert uow.keys.revoke("nope", 3) is False


def test_usage_totals_add_up_over_a_range_of_days(store: Backend) -> None:
    alice, bob = builders.user(store), builders.user(store)
    store.usage.record(alice.id, "2025-01-30", 1, 100)
    store.usage.record(alice.id, "2025-01-31", 2, 250)
    store.usage.record(alice.id, "2025-01-31", 1, 50)
    store.usage.record(alice.id, "2025-02-01", 4, 1000)
    store.usage.record(bob.id, "2025-01-31", 7, 7)
    with store.uow() as uow:  # the unit of work's log counts with its commit
        uow.usage.record(alice.id, "2025-02-01", 1, 10)
        uow.usage.record(alice.id, "2025-02-01", 1, 10)
        uow.commit()
    with store.uow() as uow:
        uow.usage.record(alice.id, "2025-02-01", 100, 100)  # not committed: not counted

    assert store.usage.totals(alice.id, "2025-01-31", "2025-01-31") == (3, 300)
    assert store.usage.totals(alice.id, "2025-01-01", "2025-01-31") == (4, 400)
    assert store.usage.totals(alice.id, "2025-01-30", "2025-02-28") == (10, 1420)
    assert store.usage.totals(alice.id, "2025-03-01", "2025-03-31") == (0, 0)
    assert store.usage.totals(bob.id, "2025-01-01", "2025-12-31") == (7, 7)


def test_admission_stops_at_the_cap_and_a_release_gives_a_place_back(store: Backend) -> None:
    alice = builders.user(store)
    assert [store.usage.admit(alice.id, "2025-01-31", 3) for _ in range(4)] == [True, True, True, False]
    assert store.usage.admit(alice.id, "2025-02-01", 3) is True  # a new day
    store.usage.release(alice.id, "2025-01-31")
    assert store.usage.admit(alice.id, "2025-01-31", 3) is True
    assert store.usage.admit(alice.id, "2025-01-31", 3) is False
    store.usage.release(alice.id, "2025-03-01")  # nothing admitted that day: no effect
    assert store.usage.admit(alice.id, "2025-03-01", 1) is True
    assert store.usage.admit(alice.id, "2025-03-01", 1) is False


def test_a_lease_has_one_holder_at_a_time(store: Backend) -> None:
    def try_hold(source_id: str) -> str:
        try:
            with store.lease.hold(source_id, ttl_s=0.05):
                return "held"
        except Busy:
            return "busy"

    with ThreadPoolExecutor(1) as other:  # another worker: a thread of its own
        with store.lease.hold("dc_one", ttl_s=30):
            assert other.submit(try_hold, "dc_one").result() == "busy"
            assert other.submit(try_hold, "dc_two").result() == "held"
        assert other.submit(try_hold, "dc_one").result() == "held"


def test_coroutines_take_a_lease_in_the_order_they_asked_one_at_a_time(store: Backend) -> None:
    """A run is a coroutine holding its source's lease: others wait for it holding no thread, and
    a source's coroutines of one process get it in the order they asked (each task asks at its
    first step, and the loop starts them in order)."""
    events: list[tuple[str, int]] = []

    async def run(n: int) -> None:
        async with store.lease.held("dc_runs", ttl_s=30):
            events.append(("in", n))
            await asyncio.sleep(0)  # the run waits for its runner
            events.append(("out", n))

    async def main() -> None:
        await asyncio.gather(*(run(n) for n in range(4)))

    asyncio.run(main())
    assert events == [(kind, n) for n in range(4) for kind in ("in", "out")]


def test_a_coroutine_waits_for_a_threads_lease_and_gives_up_busy(store: Backend) -> None:
    async def try_hold() -> str:
        try:
            async with store.lease.held("dc_one", ttl_s=30, wait_s=0.05):
                return "held"
        except Busy:
            return "busy"

    with store.lease.hold("dc_one", ttl_s=30), ThreadPoolExecutor(1) as other:  # the coroutine's own thread
        assert other.submit(asyncio.run, try_hold()).result() == "busy"
    assert asyncio.run(try_hold()) == "held"
