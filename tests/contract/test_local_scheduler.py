"""The local scheduler over a real SQLite store: due timers fire once each, in transactions of
FIRE_BATCH, each tick's task committed with the move of its timer."""

from __future__ import annotations

import time
from pathlib import Path

from headwater.adapters.local.scheduler import FIRE_BATCH, LocalScheduler
from headwater.adapters.local.sqlite.store import SqliteStore
from headwater.domain.commands import TimerTick
from headwater.domain.timers import Timer
from headwater.ports import Task


def test_due_timers_fire_once_each_over_several_transactions(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "headwater.db")
    committed: list[list[Task]] = []
    store.on_commit(committed.append)
    scheduler = LocalScheduler(store.db, store.uow)
    count = FIRE_BATCH + 44
    for i in range(count):
        scheduler.set(f"dc_{i}", Timer.from_interval(60))
    set_at = time.time()

    assert scheduler.tick(set_at) is not None  # none due yet
    assert committed == []
    later = set_at + 61
    scheduler.tick(later)
    ticks = [task.command for group in committed for task in group]
    assert all(isinstance(tick, TimerTick) for tick in ticks)
    assert sorted(tick.source_id for tick in ticks) == sorted(f"dc_{i}" for i in range(count))
    assert [len(group) for group in committed] == [FIRE_BATCH, count - FIRE_BATCH]

    scheduler.tick(later)  # the same due times again: moved already
    assert sum(len(group) for group in committed) == count


def test_a_late_firing_fires_the_newest_tick_due_and_moves_past_now(tmp_path: Path) -> None:
    """After downtime the tick fired is the newest one due, so its handler sees the ticks missed
    between the last tick taken and it (the catch-up policy runs or counts them: docs/health.md)."""
    store = SqliteStore(tmp_path / "headwater.db")
    committed: list[list[Task]] = []
    store.on_commit(committed.append)
    scheduler = LocalScheduler(store.db, store.uow)
    scheduler.set("dc_late", Timer.from_interval(10))
    (first,) = store.db.connection().execute("SELECT next_at FROM timers").fetchone()
    scheduler.tick(first + 35.5)  # three more ticks came due while nothing fired
    (tick,) = [task.command for group in committed for task in group]
    assert isinstance(tick, TimerTick) and tick.due_at == first + 30
    (following,) = store.db.connection().execute("SELECT next_at FROM timers").fetchone()
    assert following == first + 40
