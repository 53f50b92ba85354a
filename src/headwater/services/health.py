"""A source's health as GET /v1/sources/{id}/health answers it (domain.health): read from its
record and its state alone, so it costs one read of each."""

from __future__ import annotations

import time
from typing import Any

from headwater.domain import health
from headwater.domain.models import Principal
from headwater.domain.timers import next_run
from headwater.services.sources import Sources
from headwater.services.stalls import watch_of


def source_health(sources: Sources, principal: Principal, source_id: str, now: float | None = None) -> dict[str, Any]:
    source = sources.get(principal, source_id)
    with sources.uow(readonly=True) as uow:
        state = uow.state.get(source_id)
    now = time.time() if now is None else now
    watch = watch_of(sources, source)
    timer = watch.timer
    # as said on `$errors`: a stall shows once the check marked it (every few seconds locally, every
    # minute on AWS), so the health, the events and the badge never disagree
    stalled = state.stalled
    return {
        "id": source.id,
        "active": source.active,
        "last_run_at": _s(state.last_run_ms / 1000),
        "last_event_at": _s(state.last_event_ms / 1000),
        "last_tick_at": _s(state.last_tick),
        "next_tick_at": _s(next_run(timer, state.last_tick, source.updated_at, now)) if timer else None,
        "last_hour": health.last_hour(state.activity, now),
        "last_day": health.last_day(state.activity, now),
        "stalled": stalled is not None,
        "stalled_since": _s(float(stalled["since"])) if stalled else None,
        "stalled_why": stalled["why"] if stalled else None,
        "skipped_ticks": state.skipped_ticks,
        "expect_events_within": source.expect_events_within,
        "catch_up": source.catch_up,
        "series": {name: [{"start": b.start, "runs": b.runs, "events": b.events, "errors": b.errors,
                          "skipped_ticks": b.skipped_ticks} for b in health.series(state.activity, key, now)]
                   for name, key in (("five_minutes", "m"), ("hours", "h"))},
    }


def _s(ts: float) -> int | None:
    return int(ts) if ts else None
