"""GET /v1/sources/{id}/health and the health settings, in-process over the fakes: counters, stalls
started once by the periodic check and ended in the commit of the run that shows the source
working, and the catch-up policy of a timer's missed ticks. Time is given to the check and the
ticks explicitly (`now`, `due_at`): no sleeps."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from headwater.domain.commands import SyncSchedule, TimerTick
from headwater.domain.events import Emit
from headwater.domain.health import TICK_GRACE_S
from headwater.domain.runs import RunResult
from headwater.metrics import REGISTRY
from headwater.ports import Task
from headwater.services.stalls import verdict as health_verdict
from headwater.services.stalls import watch_of
from tests.api.conftest import App, running_app

TIMED = repr({"name": "Timed", "version": "0.0.1", "type": "source", "key": "health-timed",
              "configurable_props": [{"name": "timer", "type": "$.interface.timer",
                                      "default": {"intervalSeconds": 60}}]})
PLAIN = repr({"name": "Plain", "version": "0.0.1", "type": "source", "key": "health-plain",
              "configurable_props": [{"name": "db", "type": "$.service.db"}]})


@pytest.fixture
def app() -> Iterator[App]:  # a world per test: the stall watch and the queue are the test's own
    yield from running_app()


@pytest.fixture
def api(app: App) -> httpx.Client:
    return app.client()


def create(api: httpx.Client, code: str, **body: Any) -> dict[str, Any]:
    r = api.post("/sources/", json={"component_code": code, **body})
    assert r.status_code == 200, r.text
    return r.json()["data"]  # type: ignore[no-any-return]


def health(api: httpx.Client, source_id: str) -> dict[str, Any]:
    r = api.get(f"/sources/{source_id}/health")
    assert r.status_code == 200, r.text
    return r.json()["data"]  # type: ignore[no-any-return]


def notices(app: App, source_id: str) -> list[dict[str, Any]]:
    """The source's `$errors` events' errors, oldest first."""
    found = [e for (emitter, channel, _), e in app.world.store.data.events.items()
             if emitter == source_id and channel == "$errors"]
    return [e.event["error"] for e in sorted(found, key=lambda e: e.indexed_at_ms)]


def errors(app: App, source_id: str) -> list[str]:
    return [error["code"] for error in notices(app, source_id)]


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def tick(app: App, source_id: str, due_at: float) -> bool:
    return app.world.services.timers.tick([Task("t", TimerTick(source_id, due_at))])[0]


def test_settings_are_kept_shown_changed_and_cleared(api: httpx.Client) -> None:
    source = create(api, PLAIN, expect_events_within=3600, catch_up="all")
    assert source["expect_events_within"] == 3600 and source["catch_up"] == "all"
    plain = create(api, PLAIN)
    assert plain["expect_events_within"] is None and plain["catch_up"] == "skip"
    renamed = api.put(f"/sources/{source['id']}", json={"name": "renamed"}).json()["data"]
    assert renamed["expect_events_within"] == 3600 and renamed["catch_up"] == "all"  # not given: kept
    cleared = api.put(f"/sources/{source['id']}", json={"expect_events_within": None, "catch_up": "skip"})
    assert cleared.json()["data"]["expect_events_within"] is None and cleared.json()["data"]["catch_up"] == "skip"
    assert api.get(f"/sources/{source['id']}").json()["data"]["catch_up"] == "skip"


@pytest.mark.parametrize(("body", "field"), [
    ({"expect_events_within": 0}, "expect_events_within"),
    ({"expect_events_within": "60"}, "expect_events_within"),
    ({"expect_events_within": 1.5}, "expect_events_within"),
    ({"expect_events_within": 10**9}, "expect_events_within"),
    ({"catch_up": "some"}, "catch_up"),
    ({"catch_up": 1}, "catch_up"),
])
def test_bad_settings_are_refused_naming_the_field(api: httpx.Client, body: dict[str, Any], field: str) -> None:
    r = api.post("/sources/", json={"component_code": PLAIN, **body})
    assert r.status_code == 400, r.text
    assert field in r.json()["details"]
    source = create(api, PLAIN)
    assert api.put(f"/sources/{source['id']}", json=body).status_code == 400


def test_health_counts_runs_events_errors_and_is_the_owners_only(app: App, api: httpx.Client) -> None:
    source = create(api, PLAIN)
    fresh = health(api, source["id"])
    assert fresh["last_run_at"] is None and fresh["stalled"] is False and fresh["next_tick_at"] is None
    assert len(fresh["series"]["five_minutes"]) == 12 and len(fresh["series"]["hours"]) == 24
    app.world.runner.script = lambda instance, event: (
        RunResult(emits=[Emit(event, {})]) if event["n"] < 3 else RunResult.failed("RUNTIME_ERROR", "boom"))
    for n in (1, 2, 3):
        assert api.post(f"/sources/{source['id']}/run", json={"n": n}).status_code == 202
    app.world.queue.drain()
    seen = health(api, source["id"])
    assert seen["last_hour"] == {"runs": 3, "events": 2, "errors": 1, "skipped_ticks": 0}
    assert seen["last_day"] == seen["last_hour"]
    assert seen["series"]["five_minutes"][-1]["runs"] == 3
    assert seen["last_run_at"] >= seen["last_event_at"] >= int(time.time()) - 60
    assert app.client().get(f"/sources/{source['id']}/health").status_code == 404
    assert api.get("/sources/dc_nothing/health").status_code == 404


def test_a_stalled_timer_is_said_once_and_its_recovery_once(app: App, api: httpx.Client) -> None:
    source = create(api, TIMED)
    source_id, stalls = source["id"], app.world.services.stalls
    assert stalls is not None
    app.world.queue.drain(SyncSchedule)
    start = float(source["updated_at"])
    stalls_before, recoveries_before = metric("headwater_source_stalls_total", why="timer"), metric(
        "headwater_source_recoveries_total")
    assert tick(app, source_id, start + 60)
    app.world.queue.drain()
    # no tick for two intervals: the check finds it, once, however often it looks
    assert stalls.check(start + 150).started == 0
    assert stalls.check(start + 180 + TICK_GRACE_S - 1).started == 0  # late by less than the grace: busy, not stalled
    assert stalls.check(start + 200).started == 1
    assert stalls.check(start + 500).started == 0
    assert errors(app, source_id) == ["SOURCE_STALLED"]
    seen = health(api, source_id)
    assert seen["stalled"] and seen["stalled_why"] == "timer"
    assert seen["stalled_since"] == int(start + 180 + TICK_GRACE_S)
    assert seen["last_hour"]["errors"] == 0  # notices are not the source's errors
    # a tick runs again: its run's commit ends the stall
    assert tick(app, source_id, start + 540)
    app.world.queue.drain()
    assert errors(app, source_id) == ["SOURCE_STALLED", "SOURCE_RECOVERED"]
    assert health(api, source_id)["stalled"] is False
    assert stalls.check(start + 560).started == 0
    assert metric("headwater_source_stalls_total", why="timer") == stalls_before + 1  # /metrics
    assert metric("headwater_source_recoveries_total") == recoveries_before + 1


def test_a_source_that_emits_nothing_for_its_expected_cadence_stalls(app: App, api: httpx.Client) -> None:
    source = create(api, PLAIN, expect_events_within=30)
    source_id, stalls = source["id"], app.world.services.stalls
    assert stalls is not None
    app.world.queue.drain(SyncSchedule)
    start = float(source["updated_at"])
    assert stalls.check(start + 20).looked == 0  # not due before its deadline
    assert stalls.check(start + 31).started == 1
    assert "no event within 30 s" in notices(app, source_id)[0]["message"]
    app.world.runner.script = lambda instance, event: RunResult()  # a run that emits nothing ends nothing
    api.post(f"/sources/{source_id}/run", json={})
    app.world.queue.drain()
    assert health(api, source_id)["stalled"] is True
    app.world.runner.script = lambda instance, event: RunResult(emits=[Emit({"ok": 1}, {})])
    api.post(f"/sources/{source_id}/run", json={})
    app.world.queue.drain()
    assert errors(app, source_id) == ["SOURCE_STALLED", "SOURCE_RECOVERED"]
    # the expectation cleared: no longer watched
    api.put(f"/sources/{source_id}", json={"expect_events_within": None})
    app.world.queue.drain(SyncSchedule)
    assert stalls.check(time.time() + 10**6).looked == 0


@pytest.mark.parametrize(("policy", "runs", "skipped"), [("skip", 1, 4), ("all", 5, 0)])
def test_missed_ticks_follow_the_catch_up_policy(app: App, api: httpx.Client, policy: str, runs: int,
                                                 skipped: int) -> None:
    source = create(api, TIMED, catch_up=policy)
    source_id = source["id"]
    app.world.queue.drain(SyncSchedule)
    start = float(source["updated_at"])
    stamps: list[int] = []
    app.world.runner.script = lambda instance, event: (stamps.append(event["timestamp"]), RunResult())[1]
    assert tick(app, source_id, start + 60)
    app.world.queue.drain()
    assert tick(app, source_id, start + 6 * 60)  # four ticks missed between the two
    app.world.queue.drain()
    assert stamps[1:] == [int(start + k * 60) for k in range(7 - runs, 7)]
    seen = health(api, source_id)
    assert seen["skipped_ticks"] == skipped and seen["last_hour"]["skipped_ticks"] == skipped
    assert seen["last_hour"]["runs"] == 1 + runs and seen["catch_up"] == policy


def test_a_tick_while_the_previous_run_is_pending_is_counted_skipped(app: App, api: httpx.Client) -> None:
    source = create(api, TIMED)
    source_id = source["id"]
    app.world.queue.drain(SyncSchedule)
    start = float(source["updated_at"])
    assert tick(app, source_id, start + 60)  # its run stays queued
    assert not tick(app, source_id, start + 120)
    seen = health(api, source_id)
    assert seen["skipped_ticks"] == 1 and seen["last_tick_at"] == int(start + 120)
    assert seen["next_tick_at"] is not None and seen["next_tick_at"] > seen["last_tick_at"]


def test_two_lookers_that_saw_the_same_state_start_the_stall_once(app: App, api: httpx.Client) -> None:
    """Two serving processes (or sweeps) looking at once: the conditional save of the state's mark
    lets one commit its event; the other finds the mark and emits nothing."""
    source = create(api, PLAIN, expect_events_within=30)
    stalls = app.world.services.stalls
    assert stalls is not None
    with app.world.services.sources.uow(readonly=True) as uow:
        record, seen = uow.sources.get(source["id"]), uow.state.get(source["id"])
    assert record is not None
    watch = watch_of(app.world.services.sources, record)
    now = float(source["updated_at"]) + 31
    verdict = health_verdict(seen, watch, now)
    assert verdict.why == "events" and verdict.since is not None
    assert stalls._start(record, seen, watch, verdict.why, verdict.since, now)
    assert not stalls._start(record, seen, watch, verdict.why, verdict.since, now)  # the same view, later
    assert errors(app, source["id"]) == ["SOURCE_STALLED"]


def test_a_stall_of_an_expectation_cleared_ends_with_the_change(app: App, api: httpx.Client) -> None:
    source = create(api, PLAIN, expect_events_within=30)
    stalls = app.world.services.stalls
    assert stalls is not None
    app.world.queue.drain(SyncSchedule)
    assert stalls.check(float(source["updated_at"]) + 31).started == 1
    assert api.put(f"/sources/{source['id']}", json={"expect_events_within": None}).status_code == 200
    app.world.queue.drain(SyncSchedule)
    assert errors(app, source["id"]) == ["SOURCE_STALLED", "SOURCE_RECOVERED"]
    assert "no longer watched" in notices(app, source["id"])[-1]["message"]
    assert health(api, source["id"])["stalled"] is False
