"""Timer interface values (DECISIONS: Timers): request form in, response form out, next fire times."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

MIN_INTERVAL_SECONDS = 1
MAX_INTERVAL_SECONDS = 366 * 24 * 3600


class TimerError(ValueError):
    pass


@dataclass(frozen=True)
class Timer:
    interval_seconds: int
    cron: str | None = None
    timezone: str = "UTC"

    @classmethod
    def parse(cls, value: Any) -> Timer:
        """`{"intervalSeconds": N}` or `{"cron": "<5 fields>", "timezone"?: "<IANA>"}`."""
        if not isinstance(value, dict):
            raise TimerError("must be an object with intervalSeconds or cron")
        if "cron" in value and value["cron"] is not None:
            return cls.from_cron(value["cron"], value.get("timezone") or "UTC")
        for name in ("intervalSeconds", "interval_seconds"):
            if name in value:
                return cls.from_interval(value[name])
        raise TimerError("must have intervalSeconds or cron")

    @classmethod
    def from_interval(cls, seconds: Any) -> Timer:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or int(seconds) != seconds:
            raise TimerError("intervalSeconds must be an integer")
        if not MIN_INTERVAL_SECONDS <= seconds <= MAX_INTERVAL_SECONDS:
            raise TimerError(f"intervalSeconds must be from {MIN_INTERVAL_SECONDS} to {MAX_INTERVAL_SECONDS}")
        return cls(interval_seconds=int(seconds))

    @classmethod
    def from_cron(cls, expression: Any, timezone: Any = "UTC") -> Timer:
        if not isinstance(expression, str) or len(expression.split()) != 5:
            raise TimerError("cron must be a 5-field cron expression")
        if not croniter.is_valid(expression):
            raise TimerError(f"cron {expression!r} is not a valid cron expression")
        if not isinstance(timezone, str):
            raise TimerError("timezone must be an IANA time zone name")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise TimerError(f"timezone {timezone!r} is not an IANA time zone") from None
        start = datetime.now(ZoneInfo(timezone))
        it = croniter(expression, start)
        first, second = it.get_next(float), it.get_next(float)
        return cls(interval_seconds=max(1, round(second - first)), cron=expression, timezone=timezone)

    def next_fire(self, after: float) -> float:
        """The first fire time strictly after `after` (Unix seconds)."""
        if self.cron is None:
            return after + self.interval_seconds
        start = datetime.fromtimestamp(after, UTC).astimezone(ZoneInfo(self.timezone))
        return croniter(self.cron, start).get_next(float)

    def next_after(self, scheduled: float, now: float) -> float:
        """The tick after one that was due at `scheduled`, seen at `now`: interval timers stay on
        their grid (no drift from late wake-ups) and skip the ticks already missed."""
        if self.cron is not None:
            return self.next_fire(now)
        missed = math.floor(max(0.0, now - scheduled) / self.interval_seconds)
        return scheduled + (missed + 1) * self.interval_seconds

    def latest_due(self, scheduled: float, now: float) -> float:
        """The newest fire time at or before `now` of a timer due at `scheduled` (<= now): the tick a
        late scheduler fires, so the ticks it missed are those between the last one taken and it."""
        if self.cron is None:
            return scheduled + math.floor(max(0.0, now - scheduled) / self.interval_seconds) * self.interval_seconds
        start = datetime.fromtimestamp(now, UTC).astimezone(ZoneInfo(self.timezone))
        it = croniter(self.cron, start)
        latest = it.get_prev(float)
        following = self.next_fire(latest)
        return max(scheduled, following if following <= now else latest)

    def stored(self) -> dict[str, Any]:
        if self.cron is None:
            return {"intervalSeconds": self.interval_seconds}
        return {"cron": self.cron, "timezone": self.timezone}

    def response(self) -> dict[str, Any]:
        return {"cron": self.cron, "interval_seconds": self.interval_seconds}

    def event(self, fired_at: float) -> dict[str, Any]:
        if self.cron is None:
            return {"timestamp": int(fired_at), "interval_seconds": self.interval_seconds}
        return {"timestamp": int(fired_at), "cron": self.cron}


def next_run(timer: Timer, last_tick: float, scheduled_since: float, now: float) -> float:
    """When the timer fires next, as the schedulers keep it: a cron timer at its next match; an
    interval timer on the grid of its last tick or, before its first, of when it was scheduled
    (the source's last save), one interval after it."""
    if timer.cron is not None:
        return timer.next_fire(now)
    return timer.next_after(last_tick or scheduled_since, now)
