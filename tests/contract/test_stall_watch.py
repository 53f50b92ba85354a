"""The StallWatch port and the health fields, on SQLite, DynamoDB (moto) and the fakes; then the
stall and catch-up use cases over the AWS adapter set (what the sweep runs there)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from headwater.adapters.aws.dynamodb import create_tables
from headwater.bootstrap import aws_adapters, bootstrap
from headwater.domain.commands import TimerTick
from headwater.domain.health import TICK_GRACE_S
from headwater.domain.models import SourceState
from headwater.domain.runs import RunResult
from headwater.ports import StallWatch, Task
from headwater.services.sources import SourceRequest
from headwater.settings import Settings
from tests.contract import builders
from tests.contract.conftest import EVENTS, RESOURCES, Backend, aws_environment
from tests.fakes import FakeBundler, FakeRunner, FakeStallWatch, to_end
from tests.services.test_services import TIMER, component_code


@pytest.fixture(params=["sqlite", "dynamodb", "fakes"])
def watch(request: pytest.FixtureRequest, tmp_path: Path) -> StallWatch:
    if request.param == "sqlite":
        from headwater.adapters.local.sqlite.store import SqliteStore
        from headwater.adapters.local.stall_watch import SqliteStallWatch

        return SqliteStallWatch(SqliteStore(tmp_path / "headwater.db").db)
    if request.param == "fakes":
        return FakeStallWatch()
    from headwater.adapters.aws.stall_watch import DynamoStallWatch

    client = request.getfixturevalue("aws_clients")("dynamodb")
    create_tables(client, RESOURCES, EVENTS)
    return DynamoStallWatch(client, RESOURCES)


def test_the_watch_gives_what_is_due_soonest_first_and_moves_each_look_once(watch: StallWatch) -> None:
    watch.arm("dc_a", 100.0)
    watch.arm("dc_b", 50.5)
    watch.arm("dc_c", 300.0)
    assert watch.due(99.0, 10) == [("dc_b", 50.5)]
    assert watch.due(200.0, 10) == [("dc_b", 50.5), ("dc_a", 100.0)]
    assert watch.due(200.0, 1) == [("dc_b", 50.5)]
    assert watch.move("dc_b", 50.5, 400.0)
    assert not watch.move("dc_b", 50.5, 500.0)  # another looker moved it first
    assert watch.due(200.0, 10) == [("dc_a", 100.0)]
    watch.arm("dc_a", 1000.0)  # armed again: replaced
    watch.disarm("dc_c")
    watch.disarm("dc_c")
    assert watch.due(999.0, 10) == [("dc_b", 400.0)]


def test_health_settings_and_counters_are_kept_by_the_store(store: Backend) -> None:
    owner = builders.user(store)
    component = builders.component(store, owner.id)
    source = builders.add_source(store, replace(builders.source(owner, component.id, "watched"),
                                                expect_events_within=600, catch_up="all"))
    with store.uow(readonly=True) as uow:
        kept = uow.sources.get(source.id)
    assert kept is not None and (kept.expect_events_within, kept.catch_up) == (600, "all")
    changed = replace(kept, expect_events_within=None, catch_up="skip")
    with store.uow() as uow:
        uow.sources.update(changed, kept)
        uow.commit()
    with store.uow(readonly=True) as uow:
        again = uow.sources.get(source.id)
    assert again is not None and (again.expect_events_within, again.catch_up) == (None, "skip")

    state = SourceState(activity={"h": [3600, [[1, 2, 0, 3]]], "m": [3600, [[1, 2]]]}, last_run_ms=5, last_event_ms=4,
                        ran_tick=3600.0, skipped_ticks=3, stalled={"why": "timer", "since": 7200.0, "tick": 3600.0})
    with store.uow() as uow:
        uow.state.save(source.id, state, 0)
        uow.commit()
    with store.uow(readonly=True) as uow:
        read = uow.state.get(source.id)
    assert (read.activity, read.last_run_ms, read.last_event_ms, read.ran_tick, read.skipped_ticks, read.stalled) == (
        state.activity, 5, 4, 3600.0, 3, state.stalled)


def test_a_stall_and_the_catch_up_over_the_aws_adapters(aws_clients: Callable[[str], Any],
                                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clients, queues = aws_environment(aws_clients, monkeypatch)
    runner = FakeRunner()
    stamps: list[int] = []
    runner.script = lambda instance, event: (stamps.append(event["timestamp"]), RunResult())[1]
    settings = Settings(data_dir=tmp_path, backend="aws")
    adapters = aws_adapters(settings, clients, runner,
                            FakeBundler())
    services = bootstrap(settings, adapters)
    queue: Any = adapters.queue
    stalls = services.stalls
    assert stalls is not None and adapters.stall_check_s is None  # on AWS the sweep looks

    _, key = services.accounts.create_user("ada", "ada@example.com", "paid")
    ada = services.accounts.authenticate(key)
    source = to_end(services.sources.create(ada, SourceRequest(
        component_code=component_code(configurable_props=TIMER), configured_props={"timer": {"intervalSeconds": 300}},
        catch_up="all"), None))
    while queue.poll_once():
        pass
    start = float(source.updated_at)

    def tick(due_at: float) -> bool:
        ran = services.timers.tick([Task("t", TimerTick(source.id, due_at))])[0]
        while queue.poll_once():
            pass
        return ran

    assert tick(start + 300)
    assert stalls.check(start + 601 + TICK_GRACE_S).started == 0  # two intervals after the tick that ran
    assert stalls.check(start + 901 + TICK_GRACE_S).started == 1
    assert stalls.check(start + 2000).started == 0
    assert tick(start + 1500)  # three ticks missed (catch-up `all`: each runs, in order), then this one
    assert stamps == [int(start + k * 300) for k in range(1, 6)]
    errors = services.events.summaries(ada, source.id, 10, True, "$errors")["data"]
    assert [e["event"]["error"]["code"] for e in errors] == ["SOURCE_RECOVERED", "SOURCE_STALLED"]
    with services.sources.uow(readonly=True) as uow:
        state = uow.state.get(source.id)
    assert state.stalled is None and state.skipped_ticks == 0 and state.ran_tick == start + 1500
