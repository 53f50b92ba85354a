"""When a timer runs next (domain.timers.next_run), as the console's schedule shows it."""

from __future__ import annotations

from headwater.domain.timers import Timer, next_run


def test_an_interval_timer_runs_one_interval_after_it_was_scheduled_then_on_its_ticks_grid() -> None:
    every_minute = Timer.parse({"intervalSeconds": 60})
    assert next_run(every_minute, last_tick=0, scheduled_since=1000, now=1010) == 1060
    assert next_run(every_minute, last_tick=0, scheduled_since=1000, now=1130) == 1180, "ticks missed are skipped"
    assert next_run(every_minute, last_tick=2000.5, scheduled_since=1000, now=2001) == 2060.5


def test_a_cron_timer_runs_at_its_next_match_in_its_time_zone() -> None:
    nine_in_paris = Timer.parse({"cron": "0 9 * * *", "timezone": "Europe/Paris"})
    # 2026-01-15 12:00 UTC: the next 09:00 in Paris (UTC+1 in winter) is 2026-01-16 08:00 UTC
    assert next_run(nine_in_paris, last_tick=0, scheduled_since=0, now=1768478400) == 1768550400
