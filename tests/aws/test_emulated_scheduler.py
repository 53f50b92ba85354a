"""The emulator's EventBridge Scheduler (moto stores schedules, never fires them): a schedule the
adapter made fires at its times, its input handed to the timer function with the firing's time."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from headwater.adapters.aws.dynamodb import create_tables
from headwater.adapters.aws.scheduler import EventBridgeScheduler
from headwater.domain.commands import TimerTick, from_message
from headwater.domain.timers import Timer
from headwater.emulated.pollers import SchedulePoller, next_firing

TIMER_ARN = "arn:aws:lambda:us-east-1:123456789012:function:headwater-TimerTickFunction"


class Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def by_arn(self, arn: str) -> str | None:
        return "TimerTickFunction" if arn == TIMER_ARN else None

    def invoke(self, name: str, event: Any) -> None:
        self.events.append(event)


def test_a_rate_schedule_fires_each_interval_into_the_timer_function(monkeypatch: pytest.MonkeyPatch) -> None:
    credentials = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t"}
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        scheduler, sqs, dynamodb = (boto3.client(s) for s in ("scheduler", "sqs", "dynamodb"))
        scheduler.create_schedule_group(Name="timers")
        create_tables(dynamodb, "t", "events")
        now = float(int(time.time()))  # schedules keep whole seconds
        adapter = EventBridgeScheduler(scheduler, sqs, dynamodb, group_name="timers", queue_arn="arn:q", queue_url="u",
                                       target_arn=TIMER_ARN, role_arn="arn:role", dead_letter_arn=None,
                                       table_name="t", clock=lambda: now)
        adapter.set("dc_1", Timer(interval_seconds=120))
        recorder = Recorder()
        poller = SchedulePoller(scheduler, sqs, recorder, "timers", {})  # type: ignore[arg-type]
        assert poller.fire_due(now + 60) == 0
        assert poller.fire_due(now + 121) == 1
        assert poller.fire_due(now + 200) == 0
        assert poller.fire_due(now + 481) == 3  # three firings were due meanwhile: each fires
        poller.pool.shutdown(wait=True)
        ticks = [from_message(e) for e in recorder.events]
        assert all(isinstance(t, TimerTick) and t.source_id == "dc_1" for t in ticks)
        # The poller fires due ticks on a pool: their order of arrival is not theirs to keep.
        assert sorted(round(t.due_at - now) for t in ticks) == [120, 240, 360, 480]
        adapter.remove("dc_1")
        assert poller.fire_due(now + 1000) == 0


def test_cron_schedules_fire_in_their_time_zone() -> None:
    schedule = {"ScheduleExpression": "cron(0 9 ? * 2-6 *)", "ScheduleExpressionTimezone": "America/New_York"}
    monday = datetime(2026, 11, 23, 12, 0, tzinfo=UTC).timestamp()  # 07:00 in New York
    fires = next_firing(schedule, monday, first=True)
    assert fires is not None
    assert datetime.fromtimestamp(fires, UTC) == datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
    friday_after = datetime(2026, 11, 27, 15, 0, tzinfo=UTC).timestamp()
    after = next_firing(schedule, friday_after, first=False)
    assert after is not None and datetime.fromtimestamp(after, UTC) == datetime(2026, 11, 30, 14, 0, tzinfo=UTC)


def test_the_stacks_own_schedule_invokes_the_sweep_every_minute() -> None:
    from headwater.emulated.pollers import StackSchedules
    from headwater.emulated.template import Template

    schedules = Template.read().schedules()
    assert schedules == [("SweepFunction", "rate(1 minute)")]
    recorder = Recorder()
    calls: list[str] = []
    recorder.invoke = lambda name, event: calls.append(name)  # type: ignore[method-assign]
    stack = StackSchedules(recorder, schedules, start=1000.0)  # type: ignore[arg-type]
    assert stack.fire_due(1059.0) == 0
    assert stack.fire_due(1060.0) == 1
    assert stack.fire_due(1100.0) == 0
    assert stack.fire_due(1300.0) == 1  # missed firings are one sweep, not four
    assert calls == ["SweepFunction", "SweepFunction"]


def test_the_stacks_own_schedules_fire_at_the_period_a_test_sets() -> None:
    """HEADWATER_EMULATED_SCHEDULE_S (tests that wait on the sweep): every period_s from the start."""
    from headwater.emulated.pollers import StackSchedules

    recorder = Recorder()
    calls: list[float] = []
    stack = StackSchedules(recorder, [("SweepFunction", "rate(1 minute)")], start=1000.0,  # type: ignore[arg-type]
                           period_s=2.0)
    recorder.invoke = lambda name, event: calls.append(now)  # type: ignore[method-assign]
    fired = []
    for now in (1001.0, 1002.0, 1003.0, 1004.5, 1010.0):
        fired.append(stack.fire_due(now))
    assert fired == [0, 1, 0, 1, 1] and calls == [1002.0, 1004.5, 1010.0]
    assert stack.interval_s == 1.0
