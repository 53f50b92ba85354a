"""Service tests on the in-memory fakes (tests/fakes.py): the use cases, no I/O."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from headwater.domain.commands import DeleteEvents, PurgeSource, RunSource, SyncSchedule, TimerTick
from headwater.domain.errors import Conflict, NotFound, QuotaExceeded
from headwater.domain.events import Emit
from headwater.domain.models import Principal, SourceState
from headwater.domain.runs import RunResult
from headwater.ports import Instance, Task
from headwater.services.clock import now_ms
from headwater.services.recording import Outcome, commit_outcomes
from headwater.services.sources import SourceRequest
from tests.fakes import FakeState, FakeUnitOfWork, World, to_end, world


def component_code(**fields: Any) -> str:
    definition = {"name": "Orders", "version": "1", "type": "source", "key": None, "dedupe": None, "hooks": [],
                  "configurable_props": [], **fields}
    return repr(definition)


HTTP = [{"name": "http", "type": "$.interface.http"}]
TIMER = [{"name": "timer", "type": "$.interface.timer"}]


def principal(w: World, tier: str = "paid") -> Principal:
    user, _ = w.services.accounts.create_user("ada", "ada@example.com", tier)  # type: ignore[arg-type]
    return Principal(user)


def deploy(w: World, who: Principal, name: str | None = None, **fields: Any) -> Any:
    props = fields.pop("props", None)
    req = SourceRequest(component_code=component_code(**fields), name=name, configured_props=props)
    return to_end(w.services.sources.create(who, req, None))


def test_names_are_claimed_without_a_scan_and_the_next_slug_is_taken() -> None:
    w = world()
    ada = principal(w)
    slugs = [deploy(w, ada).name_slug for _ in range(3)]
    assert slugs == ["orders", "orders-1", "orders-2"]
    with pytest.raises(Conflict) as taken:
        w.services.accounts.create_user("ada", "other@example.com")
    assert taken.value.field == "username"


def test_renaming_frees_the_old_slug() -> None:
    w = world()
    ada = principal(w)
    first = deploy(w, ada)
    to_end(w.services.sources.update(ada, first.id, SourceRequest(name="Renamed")))
    assert deploy(w, ada).name_slug == "orders"


def test_hooks_commit_with_the_source_and_the_schedule_follows_by_command() -> None:
    w = world()
    w.runner.hooks = lambda instance, hook: RunResult(
        emits=[Emit({"hook": hook})], db_writes={hook: True, "seen": instance.db.get("deploy")})
    ada = principal(w)
    source = deploy(w, ada, hooks=["deploy", "activate"], configurable_props=TIMER,
                    props={"timer": {"intervalSeconds": 30}})
    with w.store.uow(readonly=True) as uow:
        state = uow.state.get(source.id)
        emitted = uow.events.newest(source.id, "", 10)
    assert state.db == {"deploy": True, "activate": True, "seen": True}
    assert [e.event for e in emitted] == [{"hook": "activate"}, {"hook": "deploy"}]
    assert w.queue.of(SyncSchedule) == [SyncSchedule(source.id, ada.user.id)]  # its tenant: the source's namespace
    assert source.id not in w.scheduler.timers
    w.queue.drain()
    assert w.scheduler.timers[source.id].interval_seconds == 30
    to_end(w.services.sources.update(ada, source.id, SourceRequest(active=False)))
    w.queue.drain()
    assert source.id not in w.scheduler.timers


def test_a_failing_hook_keeps_nothing() -> None:
    w = world()
    w.runner.hooks = lambda instance, hook: RunResult.failed("RUNTIME_ERROR", "no")
    ada = principal(w)
    with pytest.raises(Exception, match="deploy hook failed"):
        deploy(w, ada, hooks=["deploy"])
    assert w.store.data.sources == {} and w.queue.pending == []


def run_task(source_id: str, event: Any, task_id: str = "t1", trigger: str = "http") -> Task:
    return Task(task_id, RunSource(source_id, event, 1000, trigger))


def test_runs_commit_events_state_and_usage_and_a_redelivered_task_writes_nothing_twice() -> None:
    w = world()
    w.runner.script = lambda instance, event: RunResult(
        emits=[Emit(event, {"id": event["n"]})], db_writes={"n": event["n"]}, logs=[{"level": "log", "message": "hi"}],
        duration_ms=3.2)
    ada = principal(w)
    source = deploy(w, ada, dedupe="unique")
    task = run_task(source.id, {"n": 1})
    assert to_end(w.services.runs.run_batch([task]))[0] is not None
    assert to_end(w.services.runs.run_batch([task])) == [None]  # SQS may deliver it again
    with w.store.uow(readonly=True) as uow:
        assert uow.events.count(source.id, "") == 1
        assert uow.events.count(source.id, "$logs") == 1
        assert uow.state.get(source.id).db == {"n": 1}
    assert w.usage.totals(ada.user.id, "0000-00-00", "9999-99-99") == (1, 4)
    assert w.runner.calls.count(("run", source.id)) == 1


def test_a_conflicting_writer_in_between_loses_nothing() -> None:
    """Another machine commits a run between this run's state read and its save: the save
    conflicts, the outcome is applied again to the fresh state, and both runs' events, dedupe ids
    and db keys are kept."""
    w = world()
    w.runner.script = lambda instance, event: RunResult(emits=[Emit(event, {"id": event["n"]})],
                                                       db_writes={f"k{event['n']}": 1})
    ada = principal(w)
    source = deploy(w, ada, dedupe="unique")
    interfered = []

    def other_machine(uow: FakeUnitOfWork, source_id: str) -> None:
        if not interfered:
            interfered.append(True)
            ctx = w.services.runs.context(source, w.services.runs.component(source.component_id))  # type: ignore[arg-type]
            result = RunResult(emits=[Emit({"n": 2}, {"id": 2})], db_writes={"k2": 1})
            commit_outcomes(w.store.uow, source.id, [Outcome(ctx, result, None, "other")], now_ms)

    w.store.before_commit = other_machine
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1})]))
    with w.store.uow(readonly=True) as uow:
        state = uow.state.get(source.id)
        ids = [e.metadata["id"] for e in uow.events.newest(source.id, "", 10)]
    assert sorted(ids) == [1, 2]
    assert state.db == {"k1": 1, "k2": 1}
    assert len(state.dedupe["ids"]) == 2


def test_a_run_over_one_commits_writes_goes_in_several_commits() -> None:
    w = world(max_writes=25)
    w.runner.script = lambda instance, event: RunResult(emits=[Emit({"i": i}) for i in range(60)])
    ada = principal(w)
    source = deploy(w, ada)
    to_end(w.services.runs.run_batch([run_task(source.id, {})]))
    with w.store.uow(readonly=True) as uow:
        stored = uow.events.newest(source.id, "", 100)
    assert [e.event["i"] for e in stored] == list(range(59, -1, -1))


def test_a_gone_source_drops_its_runs_and_gives_back_their_places() -> None:
    w = world()
    ada = principal(w, "free")
    source = deploy(w, ada)
    admitted = w.services.runs.quota.admit(ada.user.id)
    assert admitted.reserved_day
    to_end(w.services.sources.delete(ada, source.id))
    command = RunSource(source.id, {}, 1000, "http", reserved_by=ada.user.id, reserved_day=admitted.reserved_day)
    assert to_end(w.services.runs.run_batch([Task("t", command)])) == [None]
    assert w.usage.days[(ada.user.id, admitted.reserved_day)]["admitted"] == 0


def test_the_free_tier_cap_is_counted_in_the_store() -> None:
    w = world(free_daily_invocations=2)
    ada = principal(w, "free")
    assert [w.services.runs.quota.admit(ada.user.id).admitted for _ in range(3)] == [True, True, False]
    refusal = w.services.runs.quota.admit(ada.user.id).refusal
    assert isinstance(refusal, QuotaExceeded) and refusal.retry_after > 0


def test_a_timer_run_past_the_cap_leaves_a_quota_error() -> None:
    w = world(free_daily_invocations=1)
    ada = principal(w, "free")
    source = deploy(w, ada)
    assert w.services.runs.quota.admit(ada.user.id).admitted  # the day's only place
    result = to_end(w.services.runs.run_batch([run_task(source.id, {}, trigger="timer")]))[0]
    assert result is not None and result.error_code == "QUOTA_EXCEEDED"
    assert w.runner.calls == []


def timer_source(w: World) -> tuple[Principal, Any]:
    ada = principal(w)
    source = deploy(w, ada, configurable_props=TIMER, props={"timer": {"intervalSeconds": 60}})
    w.queue.drain()
    return ada, source


def test_a_tick_queues_one_run_and_skips_while_it_is_pending() -> None:
    w = world()
    _, source = timer_source(w)
    assert w.services.timers.tick([Task("a", TimerTick(source.id, 1000.0))]) == [True]
    assert w.services.timers.tick([Task("b", TimerTick(source.id, 1060.0))]) == [False]  # still pending
    runs = w.queue.of(RunSource)
    assert [r.event for r in runs] == [{"timestamp": 1000, "interval_seconds": 60}]
    w.queue.drain(RunSource)
    assert w.services.timers.tick([Task("c", TimerTick(source.id, 1120.0))]) == [True]


def test_a_tick_delivered_twice_fires_once_and_a_stale_chain_is_ignored() -> None:
    w = world()
    _, source = timer_source(w)
    tick = Task("a", TimerTick(source.id, 1000.0))
    assert w.services.timers.tick([tick]) == [True]
    w.queue.drain(RunSource)
    assert w.services.timers.tick([tick]) == [False]
    w.scheduler.stale.add("old")
    assert w.services.timers.tick([Task("b", TimerTick(source.id, 2000.0, token="old"))]) == [False]


def test_a_timer_run_commits_at_its_first_attempt_on_the_state_its_tick_saved(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tick saved the state after the run before committed: the state in memory is a version
    behind, and a commit tried on it would fail (on DynamoDB, billed all the same)."""
    from tests.fakes import FakeState

    w = world()
    _, source = timer_source(w)
    saves: list[int] = []
    real = FakeState.save

    def save(self: FakeState, source_id: str, state: SourceState, expected_version: int) -> None:
        saves.append(expected_version)
        real(self, source_id, state, expected_version)

    monkeypatch.setattr(FakeState, "save", save)
    for n, due_at in enumerate((1000.0, 1060.0, 1120.0)):
        assert w.services.timers.tick([Task(f"k{n}", TimerTick(source.id, due_at))]) == [True]
        saves.clear()
        w.queue.drain(RunSource)
        with w.store.uow(readonly=True) as uow:
            stored = uow.state.get(source.id)
        assert saves == [stored.version - 1]  # one attempt, on the version the tick saved
        assert stored.timer_run_since is None and stored.last_tick == due_at


def test_deleting_a_source_purges_state_events_and_schedule_by_command() -> None:
    w = world()
    w.runner.script = lambda instance, event: RunResult(emits=[Emit({"x": 1})], db_writes={"a": 1})
    ada, source = timer_source(w)
    to_end(w.services.runs.run_batch([run_task(source.id, {})]))
    to_end(w.services.sources.delete(ada, source.id))
    assert w.queue.of(PurgeSource) == [PurgeSource(source.id, ada.user.id)]
    with pytest.raises(NotFound):
        w.services.sources.get(ada, source.id)
    w.queue.drain()
    assert source.id not in w.scheduler.timers
    assert source.id not in w.store.data.states
    assert not [k for k in w.store.data.events if k[0] == source.id]


def test_event_deletion_is_a_command_run_later() -> None:
    w = world()
    w.runner.script = lambda instance, event: RunResult(emits=[Emit({"i": i}) for i in range(5)])
    ada = principal(w)
    source = deploy(w, ada)
    to_end(w.services.runs.run_batch([run_task(source.id, {})]))
    ids = [e["id"] for e in w.services.events.summaries(ada, source.id, 10, False, "")["data"]]
    w.services.events.request_delete(ada, source.id, ids[3], ids[1], "")
    assert w.queue.of(DeleteEvents) == [DeleteEvents(source.id, "", ids[3], ids[1], ada.user.id)]
    assert w.queue.drain(DeleteEvents)[0][1] == 3
    assert [e["id"] for e in w.services.events.summaries(ada, source.id, 10, False, "")["data"]] == [ids[0], ids[4]]


def test_ingest_queues_a_run_and_refuses_unknown_endpoints() -> None:
    w = world()
    ada = principal(w)
    source = deploy(w, ada, configurable_props=HTTP)
    answer = asyncio.run(w.services.ingest.receive(source.endpoint_id, {"body": 1}))
    assert answer.status == 200
    assert w.queue.of(RunSource) == [RunSource(source.id, {"body": 1}, w.services.settings.http_timeout_ms, "http",
                                               namespace=ada.user.id)]
    with pytest.raises(NotFound):
        asyncio.run(w.services.ingest.receive("en_nope", {}))


def test_the_runner_sees_props_db_and_env_of_the_instance() -> None:
    w = world()
    seen: list[Instance] = []

    def script(instance: Instance, event: Any) -> RunResult:
        seen.append(instance)
        return RunResult(db_writes={"count": instance.db.get("count", 0) + 1})

    w.runner.script = script
    ada = principal(w)
    source = deploy(w, ada, configurable_props=HTTP)
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "1"), run_task(source.id, {}, "2")]))
    assert [i.db for i in seen] == [{}, {"count": 1}]
    assert seen[0].env == {"PD_COMPONENT": source.id}
    assert seen[0].http and seen[0].http["endpoint"].endswith(f"/http/{source.endpoint_id}")


def test_a_source_that_runs_reads_its_state_once_and_keeps_it_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes import FakeState

    w = world()
    w.runner.script = lambda instance, event: RunResult(db_writes={"count": instance.db.get("count", 0) + 1})
    ada = principal(w)
    source = deploy(w, ada, configurable_props=HTTP)
    reads: list[str] = []
    real_get = FakeState.get
    monkeypatch.setattr(FakeState, "get", lambda self, source_id: reads.append(source_id) or real_get(self, source_id))
    for n in range(3):
        to_end(w.services.runs.run_batch([run_task(source.id, {}, f"t{n}")]))
    assert reads == [source.id]  # the first batch's read; the commits start from the state in memory
    with w.store.uow(readonly=True) as uow:
        assert uow.state.get(source.id).db == {"count": 3}


def test_a_run_reads_the_store_off_the_event_loop_and_then_not_at_all() -> None:
    w = world()
    ada = principal(w)
    source = deploy(w, ada, configurable_props=HTTP)
    paid = RunSource(source.id, {}, 1000, "http", reserved_by=ada.user.id, reserved_day="2026-01-01")
    read_on: list[int] = []
    real = FakeState.get

    def get(self: FakeState, source_id: str) -> SourceState:
        read_on.append(threading.get_ident())
        return real(self, source_id)

    async def two_runs() -> tuple[int, list[Any]]:
        first = await w.services.runs.run_batch([Task("t1", paid)])
        second = await w.services.runs.run_batch([Task("t2", paid)])
        return threading.get_ident(), [*first, *second]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FakeState, "get", get)
        loop_thread, results = asyncio.run(two_runs())
    assert None not in results
    assert len(read_on) == 1 and read_on[0] != loop_thread  # the first batch's read, on a worker thread


def test_an_update_drops_the_state_in_memory_and_the_next_run_sees_the_change() -> None:
    w = world()
    seen: list[Instance] = []
    w.runner.script = lambda instance, event: seen.append(instance) or RunResult()
    w.runner.hooks = lambda instance, hook: RunResult(db_writes={"activated_with": instance.props["greeting"]})
    ada = principal(w)
    source = deploy(w, ada, configurable_props=[*HTTP, {"name": "greeting", "type": "string"}],
                    props={"greeting": "hi"}, hooks=["activate"])
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "t1")]))
    to_end(w.services.sources.update(ada, source.id, SourceRequest(configured_props={"greeting": "hello"})))
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "t2")]))
    assert [i.props["greeting"] for i in seen] == ["hi", "hello"]
    assert [i.db for i in seen] == [{"activated_with": "hi"}, {"activated_with": "hello"}]


def test_another_writer_after_a_run_loses_nothing_of_the_next_one() -> None:
    """The state in memory is only a first guess: a commit another machine made since fails the next
    commit's conditional save, which then applies the outcome to the state as stored."""
    w = world()
    w.runner.script = lambda instance, event: RunResult(db_writes={f"k{event['n']}": 1})
    ada = principal(w)
    source = deploy(w, ada, configurable_props=HTTP)
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1}, "t1")]))
    ctx = w.services.runs.context(source, w.services.runs.component(source.component_id))  # type: ignore[arg-type]
    commit_outcomes(w.store.uow, source.id, [Outcome(ctx, RunResult(db_writes={"other": 1}), None, "o")], now_ms)
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 2}, "t2")]))
    with w.store.uow(readonly=True) as uow:
        assert uow.state.get(source.id).db == {"k1": 1, "other": 1, "k2": 1}
