"""A timer source's schedule as the console shows it: the timer, and when it runs next."""

from __future__ import annotations

import time
from typing import Any

from headwater.domain.errors import NotFound
from headwater.domain.models import Principal
from headwater.domain.timers import Timer, next_run
from headwater.services.sources import Sources


def schedule(sources: Sources, principal: Principal, source_id: str, now: float | None = None) -> dict[str, Any]:
    """`next_run_at` is null while the source is paused; its last tick is the newest one taken."""
    source = sources.get(principal, source_id)
    timer = next((Timer.parse(source.configured_props[p["name"]]) for p in source.prop_defs
                  if p["type"] == "$.interface.timer" and p["name"] in source.configured_props), None)
    if timer is None:
        raise NotFound(f"Source {source_id} has no timer.")
    with sources.uow(readonly=True) as uow:
        last_tick = uow.state.get(source_id).last_tick
    now = time.time() if now is None else now
    return {
        **timer.response(),
        "timezone": timer.timezone,
        "active": source.active,
        "last_run_at": int(last_tick) if last_tick else None,
        "next_run_at": int(next_run(timer, last_tick, source.updated_at, now)) if source.active else None,
    }
