"""domain.health: activity buckets, stall verdicts, recovery in `record`, catch-up plans."""

from __future__ import annotations

import json

import pytest

from headwater.domain import health
from headwater.domain.events import Emit
from headwater.domain.models import SourceState
from headwater.domain.runs import ERRORS, RunContext, RunResult, Tally, record
from headwater.domain.timers import Timer

CTX = RunContext("dc_1", "u_1", "test")
HOUR = 3600.0
T0 = 1_800_000_000.0 - 1_800_000_000.0 % HOUR  # on the hour


def test_counts_land_in_their_buckets_and_old_ones_fall_off() -> None:
    activity: dict = {}
    activity = health.count(activity, T0 + 10, (1, 2, 0, 0))
    activity = health.count(activity, T0 + 20, (1, 0, 1, 0))
    activity = health.count(activity, T0 + 400, (0, 0, 0, 3))
    assert health.last_hour(activity, T0 + 400) == {"runs": 2, "events": 2, "errors": 1, "skipped_ticks": 3}
    five = health.series(activity, "m", T0 + 400)
    assert len(five) == 12 and five[-1].start == T0 + 300 and five[-1].skipped_ticks == 3
    assert five[-2].runs == 2 and five[-2].start == T0
    # an hour later, the five-minute buckets of then are gone; the hourly ones keep them for a day
    later = T0 + HOUR + 400
    assert health.last_hour(activity, later)["runs"] == 0
    assert health.last_day(activity, later)["runs"] == 2
    assert health.last_day(activity, T0 + 25 * HOUR)["runs"] == 0


def test_the_kept_buckets_are_bounded_and_compact() -> None:
    activity: dict = {}
    for minute in range(0, 3 * 24 * 60, 7):  # three days of a run every 7 minutes
        activity = health.count(activity, T0 + minute * 60, (1, 1, 0, 0))
    assert len(activity["h"][1]) == 24 and len(activity["m"][1]) == 12
    assert len(json.dumps(activity, separators=(",", ":"))) < 500
    assert health.count(activity, T0, (0, 0, 0, 0)) is activity  # nothing counted, nothing rewritten


def test_record_counts_runs_events_and_errors_not_hooks_or_logs() -> None:
    run = RunResult(emits=[Emit({"a": 1}, {}), Emit({"b": 2}, {})], logs=[{"message": "hi"}])
    state = record(SourceState(), CTX, run, {}, int(T0 * 1000), task_id="t1").state
    state = record(state, CTX, RunResult.failed("RUNTIME_ERROR", "boom"), {}, int(T0 * 1000) + 1, "t2").state
    state = record(state, CTX, RunResult(emits=[Emit({"c": 3}, {})]), None, int(T0 * 1000) + 2).state  # a hook
    assert health.last_hour(state.activity, T0 + 1) == {"runs": 2, "events": 3, "errors": 1, "skipped_ticks": 0}
    assert state.last_run_ms == int(T0 * 1000) + 1 and state.last_event_ms == int(T0 * 1000) + 2


def test_a_batchs_runs_tallied_count_as_each_counted_alone() -> None:
    """A commit's runs are counted into the buckets once (Tally), with the same result."""
    runs = [(RunResult(emits=[Emit({"a": 1}, {}), Emit({"b": 2}, {})]), "t1"),
            (RunResult.failed("RUNTIME_ERROR", "boom"), "t2"), (RunResult(emits=[Emit({"c": 3}, {})]), None)]
    alone, tallied, tally = SourceState(), SourceState(), Tally()
    for i, (result, task_id) in enumerate(runs):
        alone = record(alone, CTX, result, {}, int(T0 * 1000) + i, task_id).state
        tallied = record(tallied, CTX, result, {}, int(T0 * 1000) + i, task_id, tally).state
    assert tallied.activity == {} and tallied.last_run_ms == alone.last_run_ms
    tally.count_into(tallied)
    assert tallied.activity == alone.activity and health.last_hour(tallied.activity, T0 + 1)["runs"] == 2
    tally.count_into(tallied)  # counted once
    assert tallied.activity == alone.activity


def test_a_stall_of_events_ends_in_the_commit_of_the_run_that_emits() -> None:
    state = SourceState(stalled={"why": "events", "since": T0, "tick": 0})
    quiet = record(state, CTX, RunResult(), {}, int(T0 * 1000) + 5000, "t1")
    assert quiet.state.stalled is not None and not quiet.events
    emitted = record(quiet.state, CTX, RunResult(emits=[Emit({"x": 1}, {})]), {}, int(T0 * 1000) + 9000, "t2")
    assert emitted.state.stalled is None
    notice = [e for e in emitted.events if e.channel == ERRORS]
    assert [n.event["error"]["code"] for n in notice] == ["SOURCE_RECOVERED"]
    assert "stalled since" in notice[0].event["error"]["message"]
    assert health.last_hour(emitted.state.activity, T0 + 9)["errors"] == 0  # a notice is not an error


def test_a_timer_stall_ends_when_a_newer_tick_ran() -> None:
    state = SourceState(stalled={"why": "timer", "since": T0, "tick": T0 - 120}, ran_tick=T0 - 120)
    assert record(state, CTX, RunResult(), {}, int(T0 * 1000), "t1").state.stalled is not None
    state.ran_tick = T0 + 60
    assert record(state, CTX, RunResult(), {}, int(T0 * 1000), "t2").state.stalled is None


def test_verdicts_of_a_timer_and_of_an_expected_cadence() -> None:
    timer = Timer.from_interval(60)
    watch = health.Watch(timer, None, saved_at=T0)
    grace = health.TICK_GRACE_S
    assert health.verdict(0, 0, watch, T0 + 100) == health.Verdict(next_check=T0 + 120 + grace)
    assert health.verdict(T0 + 60, 0, watch, T0 + 150).why is None  # ran a tick: two intervals from it
    assert health.verdict(T0 + 60, 0, watch, T0 + 180 + grace - 1).why is None  # late, not stalled
    stalled = health.verdict(T0 + 60, 0, watch, T0 + 181 + grace)
    assert stalled.why == "timer" and stalled.since == T0 + 180 + grace
    both = health.Watch(timer, 30, saved_at=T0)
    assert health.verdict(T0 + 60, T0 + 100, both, T0 + 131) == health.Verdict("events", T0 + 130)
    assert "within 30 s" in health.stall_message("events", T0 + 130, both)
    assert "every 60 s" in health.stall_message("timer", T0 + 130, both)
    # the grace is the watch's (the setting HEADWATER_TICK_GRACE_S), TICK_GRACE_S by default
    assert grace == 10 and health.Watch(timer, None, T0).grace_s == grace
    quick = health.Watch(timer, None, saved_at=T0, grace_s=2)
    assert health.verdict(T0 + 60, 0, quick, T0 + 181).why is None
    assert health.verdict(T0 + 60, 0, quick, T0 + 183) == health.Verdict("timer", T0 + 182)


@pytest.mark.parametrize(("value", "error"), [(0, "from 1"), (-5, "from 1"), (10**9, "from 1"), (1.5, "whole"),
                                               ("60", "whole"), (True, "whole")])
def test_expect_events_within_is_a_bounded_whole_number(value: object, error: str) -> None:
    with pytest.raises(health.SettingError, match=error):
        health.expect_events_within(value)


def test_catch_up_policies() -> None:
    assert health.catch_up("all") == "all" and health.expect_events_within(None) is None
    with pytest.raises(health.SettingError):
        health.catch_up("some")
    timer = Timer.from_interval(10)
    assert health.plan(timer, "skip", T0, T0 + 10, pending=False) == health.CatchUpPlan([T0 + 10], 0)
    assert health.plan(timer, "skip", T0, T0 + 50, pending=False) == health.CatchUpPlan([T0 + 50], 4)
    assert health.plan(timer, "all", T0, T0 + 50, pending=False) == health.CatchUpPlan(
        [T0 + 10, T0 + 20, T0 + 30, T0 + 40, T0 + 50], 0)
    assert health.plan(timer, "skip", T0, T0 + 10, pending=True) == health.CatchUpPlan([], 1)
    assert health.plan(timer, "skip", 0, T0, pending=False) == health.CatchUpPlan([T0], 0)  # a first tick
    bounded = health.plan(timer, "all", T0, T0 + 10 * 500, pending=False)
    assert len(bounded.runs) == health.MAX_CATCH_UP_RUNS and bounded.skipped == 500 - health.MAX_CATCH_UP_RUNS
    assert bounded.runs[-1] == T0 + 5000 and bounded.runs == sorted(bounded.runs)


def test_catch_up_of_a_cron_timer_and_the_latest_due_tick() -> None:
    hourly = Timer.from_cron("0 * * * *")
    assert health.plan(hourly, "all", T0, T0 + 3 * HOUR, pending=False).runs == [T0 + HOUR, T0 + 2 * HOUR,
                                                                                  T0 + 3 * HOUR]
    assert hourly.latest_due(T0, T0 + 2.5 * HOUR) == T0 + 2 * HOUR
    assert Timer.from_interval(10).latest_due(T0, T0 + 35) == T0 + 30
    assert Timer.from_interval(10).latest_due(T0, T0 + 3) == T0
