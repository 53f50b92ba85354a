"""The storage contract, commits: the outbox, all-or-nothing units of work, and what
`services.recording` builds on them (commits larger than one transaction, racing writers)."""

from __future__ import annotations

import json
import threading
import time

from headwater.domain.commands import DeleteEvents, DeliverWebhook, RunSource, SyncSchedule
from headwater.domain.events import Emit
from headwater.domain.models import SourceState, StoredEvent, User
from headwater.domain.pagination import PageRequest
from headwater.domain.routing import INLINE_DELIVERIES, Delivery, Routed, delivery_key
from headwater.domain.runs import RunContext, RunResult
from headwater.services.recording import Outcome, commit_outcomes
from tests.contract import builders
from tests.contract.conftest import Backend


def now_ms() -> int:
    return int(time.time() * 1000)


def test_committed_commands_reach_the_queue(store: Backend) -> None:
    run = RunSource("dc_1", {"body": "x"}, 1000, "manual")
    deletion = DeleteEvents("dc_1", "x", "1-1", None)
    before = time.time()
    with store.uow() as uow:
        uow.outbox.add(run)
        uow.outbox.add(deletion, delay_s=600)
        uow.commit()
    assert [t.command for t in store.committed] == [run, deletion]
    assert len({t.id for t in store.committed}) == 2
    assert store.committed[0].not_before == 0.0
    assert before + 600 <= store.committed[1].not_before <= time.time() + 600


def test_a_unit_of_work_left_without_commit_writes_nothing(store: Backend) -> None:
    alice = builders.user(store)
    with store.uow() as uow:
        uow.outbox.add(SyncSchedule("dc_1"))
        uow.users.add(User("u_ghost", "ghost", "g@example.com", "free", 1))
        uow.state.save("dc_1", SourceState(db={"a": 1}), 0)
        uow.keys.add("hash", alice.id, 1)
    assert store.committed == []
    with store.uow(readonly=True) as uow:
        assert uow.users.get("u_ghost") is None
        assert uow.state.get("dc_1").version == 0
        assert uow.keys.user_for("hash") is None
    builders.user(store, "ghost")  # the username was never claimed


def emits(prefix: str, count: int, channel: str | None = None) -> list[Emit]:
    meta = {"name": channel} if channel else {}
    return [Emit({"n": i}, {**meta, "id": f"{prefix}{i}"}) for i in range(count)]


def test_a_run_with_more_events_than_one_commit_takes(store: Backend) -> None:
    alice = builders.user(store)
    result = RunResult(emits=[*emits("a", 180), *emits("b", 30, "other")], db_writes={"k": "v"})
    ctx = RunContext("dc_big", alice.id, "test", dedupe="unique")
    state, channels = commit_outcomes(store.uow, "dc_big", [Outcome(ctx, result, task_id="t1")], now_ms,
                                      commands=[SyncSchedule("dc_big")])
    assert channels == {"", "other"} and state.version == 1
    with store.uow(readonly=True) as uow:
        assert uow.events.count("dc_big", "") == 100
        assert uow.events.count("dc_big", "other") == 30
        newest = uow.events.newest("dc_big", "", 100)
        saved = uow.state.get("dc_big")
    assert [e.event["n"] for e in newest] == list(range(179, 79, -1))  # the newest 100, newest first
    assert saved.last_seq == 210 and saved.db == {"k": "v"} and saved.took("t1") and len(saved.applied) == 1
    assert [t.command for t in store.committed] == [SyncSchedule("dc_big")]


def test_concurrent_runs_of_one_source_lose_nothing(store: Backend) -> None:
    alice = builders.user(store)
    ctx = RunContext("dc_race", alice.id, "test", dedupe="unique")
    rounds = 20
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            for i in range(rounds):
                result = RunResult(emits=[Emit({"by": name, "i": i}, {"id": f"{name}-{i}"})],
                                   db_writes={f"{name}-{i}": i})
                commit_outcomes(store.uow, "dc_race", [Outcome(ctx, result)], now_ms)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    expected = {f"{name}-{i}" for name in ("a", "b") for i in range(rounds)}
    with store.uow(readonly=True) as uow:
        events = uow.events.newest("dc_race", "", 100)
        state = uow.state.get("dc_race")
        assert uow.events.count("dc_race", "") == 2 * rounds
    assert len({e.id for e in events}) == 2 * rounds
    assert {e.metadata["id"] for e in events} == expected
    assert set(state.db) == expected
    assert {json.loads(i) for i in state.dedupe["ids"]} == expected
    assert state.last_seq == 2 * rounds


def test_a_run_commits_the_webhook_deliveries_it_routes_with_its_events(store: Backend) -> None:
    """Routing.for_commit's deliveries: in the run's own commit, however many events it has."""
    alice = builders.user(store)
    ctx = RunContext("dc_hooked", alice.id, "test", dedupe="unique")
    result = RunResult(emits=emits("e", 150))

    def route(_: object, events: list[StoredEvent]) -> Routed:
        made = [Delivery(delivery_key("wh_1", "dc_hooked", e.id), "wh_1", "dc_hooked", e.id, {"event": e.event})
                for e in events[-INLINE_DELIVERIES:]]
        return Routed([DeliverWebhook(d.id) for d in made], made)

    state, _ = commit_outcomes(store.uow, "dc_hooked", [Outcome(ctx, result, task_id="t1")], now_ms, route=route)
    assert state.version == 1
    with store.uow(readonly=True) as uow:
        page = uow.deliveries.for_webhook("wh_1", PageRequest(limit=20))
        newest = uow.events.newest("dc_hooked", "", 1)
    assert [d.payload["event"]["n"] for d in page.items] == list(range(149, 149 - INLINE_DELIVERIES, -1))
    assert page.items[0].event_id == newest[0].id and page.items[0].version == 1
    assert [t.command for t in store.committed] == [DeliverWebhook(d.id) for d in reversed(page.items)]
