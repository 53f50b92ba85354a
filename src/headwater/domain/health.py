"""A source's health (DECISIONS, Extensions): what it did lately, whether it stalled, ticks skipped.

Counted in the source's state, which every run's commit rewrites anyway: no store write of its
own. Kept small, as the state item is rewritten (and on AWS billed per KB) on each run: 24 hourly
and 12 five-minute buckets of [runs, events, errors, skipped ticks], as compact lists.

A stall: a timer source whose tick did not run within two of its intervals, or a source with
`expect_events_within` that emitted nothing for that long. It starts once (`SourceState.stalled`,
set by a conditional save, is the guarantee) and ends when the source is seen working again, in
the commit of that run (`after_run`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from headwater.domain.timers import Timer

CatchUp = Literal["skip", "all"]
CATCH_UP_POLICIES: tuple[str, ...] = ("skip", "all")
MAX_CATCH_UP_RUNS = 100  # `all`: missed ticks run at most; older ones are counted skipped
MIN_EXPECT_S, MAX_EXPECT_S = 1, 366 * 24 * 3600

STALLED, RECOVERED = "SOURCE_STALLED", "SOURCE_RECOVERED"
NOTICES = frozenset({STALLED, RECOVERED})

RUNS, EVENTS, ERRORS, SKIPPED = range(4)
SERIES = {"h": (3600, 24), "m": (300, 12)}  # key in the state: (bucket width s, buckets kept)


class SettingError(ValueError):
    pass


def expect_events_within(value: Any) -> int | None:
    """Seconds, a whole number from MIN_EXPECT_S to MAX_EXPECT_S, or None (no expectation)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingError("must be a whole number of seconds, or null")
    if not MIN_EXPECT_S <= value <= MAX_EXPECT_S:
        raise SettingError(f"must be from {MIN_EXPECT_S} to {MAX_EXPECT_S} seconds")
    return value


def catch_up(value: Any) -> CatchUp:
    if value not in CATCH_UP_POLICIES:
        raise SettingError("must be `skip` or `all`")
    return value


# activity counters


def count(activity: dict[str, Any], now_s: float, counts: tuple[int, int, int, int]) -> dict[str, Any]:
    """`activity` with `counts` ([runs, events, errors, skipped]) added to the buckets of `now_s`
    (a new dict; the old one unchanged). Buckets older than those kept are dropped. Called for every
    run: only the bucket counted in is rebuilt (the others are shared with the old dict, never
    changed in place)."""
    if not any(counts):
        return activity
    out = dict(activity)
    c0, c1, c2, c3 = counts
    for key, (width, kept) in SERIES.items():
        value = activity.get(key)
        at = int(now_s // width) * width
        if not (type(value) is list and len(value) == 2 and type(value[1]) is list and value[1]):
            out[key] = [at, [_compact([c0, c1, c2, c3])]]
            continue
        start, rows = int(value[0]), value[1]
        at = max(at, start)  # a clock behind the newest bucket: count it in the oldest kept
        index = (at - start) // width
        if index < len(rows):
            rows = rows.copy()
            r0, r1, r2, r3 = _row(rows[index])
            rows[index] = _compact([r0 + c0, r1 + c1, r2 + c2, r3 + c3])
        else:
            rows = [*rows, *([] for _ in range(index - len(rows))), _compact([c0, c1, c2, c3])]
        if len(rows) > kept:
            start += (len(rows) - kept) * width
            rows = rows[-kept:]
        out[key] = [start, rows]
    return out


def _series(value: Any) -> tuple[int, list[list[int]]]:
    if not isinstance(value, list) or len(value) != 2:
        return 0, []
    return int(value[0]), [_row(r) for r in value[1]]


def _row(row: Any) -> list[int]:
    values = [int(v) for v in row] if isinstance(row, list) else []
    return (values + [0, 0, 0, 0])[:4]


def _compact(row: list[int]) -> list[int]:
    """Trailing zeros dropped: most buckets count runs and events only, many nothing."""
    n = len(row)
    while n and not row[n - 1]:
        n -= 1
    return row[:n]


@dataclass(frozen=True)
class Bucket:
    start: int
    runs: int
    events: int
    errors: int
    skipped_ticks: int


def series(activity: dict[str, Any], key: str, now_s: float) -> list[Bucket]:
    """Every bucket of the series `key` ending with the one of `now_s` (empty ones too), oldest
    first: what a chart draws."""
    width, kept = SERIES[key]
    start, rows = _series(activity.get(key))
    current = int(now_s // width) * width
    first = current - (kept - 1) * width
    by_start = {start + i * width: r for i, r in enumerate(rows)}
    return [Bucket(t, *by_start.get(t, [0, 0, 0, 0])) for t in range(first, current + 1, width)]


def totals(buckets: list[Bucket]) -> dict[str, int]:
    return {"runs": sum(b.runs for b in buckets), "events": sum(b.events for b in buckets),
            "errors": sum(b.errors for b in buckets), "skipped_ticks": sum(b.skipped_ticks for b in buckets)}


def last_hour(activity: dict[str, Any], now_s: float) -> dict[str, int]:
    """The last hour's counts, from the five-minute buckets (12 of them: the hour ending now)."""
    return totals(series(activity, "m", now_s))


def last_day(activity: dict[str, Any], now_s: float) -> dict[str, int]:
    return totals(series(activity, "h", now_s))


# stalls


@dataclass(frozen=True)
class Watch:
    """What a source is watched for: its timer (when active and it has one), `expect_events_within`."""

    timer: Timer | None
    expect_s: int | None
    saved_at: float  # the source's last save: the start of both clocks before anything ran
    grace_s: float = 10.0  # TICK_GRACE_S unless the settings say otherwise

    @property
    def any(self) -> bool:
        return self.timer is not None or self.expect_s is not None

    @property
    def span(self) -> float:
        """The shortest time it takes to stall: how often a stalled source is looked at again."""
        spans = [2.0 * self.timer.interval_seconds] if self.timer else []
        return min([*spans, *([float(self.expect_s)] if self.expect_s else [])] or [0.0])


@dataclass(frozen=True)
class Verdict:
    """`why` and `since` when the source is stalled at `now`; else when it would be, at the soonest."""

    why: str | None = None
    since: float | None = None
    next_check: float | None = None


TICK_GRACE_S = 10.0  # a tick this late is the service being busy, not a stall (a 1 s timer would flap)


def tick_deadline(timer: Timer, ran_tick: float, saved_at: float, grace_s: float) -> float:
    """When a timer that last ran the tick due at `ran_tick` is stalled: two of its ticks later, and
    `grace_s` more (Watch.grace_s, the setting HEADWATER_TICK_GRACE_S)."""
    base = max(ran_tick, saved_at)
    return timer.next_fire(timer.next_fire(base)) + grace_s


def verdict(last_run_tick: float, last_event_s: float, watch: Watch, now: float) -> Verdict:
    deadlines: list[tuple[float, str]] = []
    if watch.timer is not None:
        deadlines.append((tick_deadline(watch.timer, last_run_tick, watch.saved_at, watch.grace_s), "timer"))
    if watch.expect_s is not None:
        deadlines.append((max(last_event_s, watch.saved_at) + watch.expect_s, "events"))
    if not deadlines:
        return Verdict()
    passed = sorted(d for d in deadlines if d[0] < now)
    if passed:
        return Verdict(passed[0][1], passed[0][0])
    return Verdict(next_check=min(d for d, _ in deadlines))


def stall_message(why: str, since: float, watch: Watch) -> str:
    when = iso(since)
    if why == "timer" and watch.timer is not None:
        every = (f"cron {watch.timer.cron!r}" if watch.timer.cron
                 else f"every {watch.timer.interval_seconds} s")
        return f"The source's timer ({every}) has not run a tick within two intervals: stalled since {when}."
    return f"The source has emitted no event within {watch.expect_s} s (expect_events_within): stalled since {when}."


def recovery_message(stalled: dict[str, Any], now_s: float) -> str:
    what = "its timer ran a tick" if stalled.get("why") == "timer" else "it emitted an event"
    return (f"The source recovered at {iso(now_s)}: {what} again (stalled since "
            f"{iso(float(stalled.get('since') or 0))}).")


def recovers(stalled: dict[str, Any] | None, ran_tick: float, emitted: bool) -> bool:
    """Whether a run's commit ends the stall: a timer stall when a tick newer than the stall's
    last one ran, an events stall when the run emitted."""
    if not stalled:
        return False
    if stalled.get("why") == "timer":
        return ran_tick > float(stalled.get("tick") or 0)
    return emitted


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# catch-up


@dataclass(frozen=True)
class CatchUpPlan:
    runs: list[float]  # due times of the ticks to run now, oldest first (the current one last)
    skipped: int


def missed_between(timer: Timer, last_tick: float, due_at: float, most: int) -> tuple[list[float], int]:
    """Due times strictly between `last_tick` and `due_at` (the newest `most` of them), and how
    many there are in all. None before a timer's first tick."""
    if last_tick <= 0 or due_at <= last_tick:
        return [], 0
    if timer.cron is None:
        step = timer.interval_seconds
        n = max(0, math.floor((due_at - last_tick) / step + 1e-6) - 1)
        return [due_at - k * step for k in range(min(n, most), 0, -1)], n
    times: list[float] = []
    at = timer.next_fire(last_tick)
    while at < due_at - 1e-6 and len(times) < 10_000:
        times.append(at)
        at = timer.next_fire(at)
    n = len(times) if at >= due_at - 1e-6 else max(len(times), round((due_at - last_tick) / timer.interval_seconds) - 1)
    return times[-most:] if most else [], n


def plan(timer: Timer, policy: str, last_tick: float, due_at: float, pending: bool) -> CatchUpPlan:
    """What a tick due at `due_at` runs, after the tick `last_tick`: `skip` runs it alone and counts
    the missed ones skipped; `all` runs the missed ones first, in order, at most MAX_CATCH_UP_RUNS
    in all (older ones counted skipped). A tick that finds the previous run pending runs nothing."""
    most = MAX_CATCH_UP_RUNS - 1 if policy == "all" else 0
    missed, n = missed_between(timer, last_tick, due_at, most)
    if pending:
        return CatchUpPlan([], n + 1)
    return CatchUpPlan([*missed, due_at], n - len(missed))
