"""Timer sources (DECISIONS: Timers): keeping the scheduler in step with sources, and taking ticks.

A tick is taken by a conditional save of the source's state: a tick already taken (a duplicate
delivery) is dropped, and while the previous timer run is still queued or running the tick is
skipped; otherwise the run is queued in the same unit of work. So a tick fires once and timer
runs never pile up, whichever machine takes it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from headwater.domain.commands import RunSource, SyncSchedule, TimerTick
from headwater.domain.errors import Conflict
from headwater.ports import Scheduler, Task, UnitOfWorkFactory
from headwater.services.contention import retry_on_conflict
from headwater.services.sources import Sources
from headwater.settings import Settings

log = logging.getLogger("headwater.timers")

_MAX_ATTEMPTS = 20


class Timers:
    def __init__(self, uow: UnitOfWorkFactory, sources: Sources, scheduler: Scheduler, settings: Settings) -> None:
        self.uow = uow
        self.sources = sources
        self.scheduler = scheduler
        self.settings = settings

    @property
    def stale_after_s(self) -> float:
        """A timer run pending for longer than this was lost (its task dropped): tick again."""
        return self.settings.timer_timeout_ms / 1000 * 3 + 60

    def sync(self, tasks: list[Task], _: object = None) -> list[None]:
        """SyncSchedule handler: the schedule follows the source as committed (idempotent)."""
        for task in tasks:
            assert isinstance(task.command, SyncSchedule)
            source_id = task.command.source_id
            with self.uow(readonly=True) as uow:
                source = uow.sources.get(source_id)
            timer = self.sources.timer(source) if source else None
            if timer is None:
                self.scheduler.remove(source_id)
            else:
                self.scheduler.set(source_id, timer)
        return [None] * len(tasks)

    def tick(self, tasks: list[Task], _: object = None) -> list[bool]:
        """TimerTick handler: True for each tick that queued a run."""
        return [self._tick(task.command) for task in tasks]  # type: ignore[arg-type]

    def _tick(self, tick: TimerTick) -> bool:
        with self.uow(readonly=True) as uow:
            source = uow.sources.get(tick.source_id)
        timer = self.sources.timer(source) if source else None
        if timer is None or not self.scheduler.ticked(tick, timer):
            return False

        def attempt(_: int) -> bool:
            now = time.time()
            with self.uow() as uow:
                state = uow.state.get(tick.source_id)
                if tick.due_at <= state.last_tick:
                    return False
                pending = state.timer_run_since is not None and now - state.timer_run_since < self.stale_after_s
                new = replace(state, last_tick=tick.due_at, timer_run_since=state.timer_run_since if pending else now)
                uow.state.save(tick.source_id, new, state.version)
                if not pending:
                    uow.outbox.add(RunSource(tick.source_id, timer.event(tick.due_at), self.settings.timer_timeout_ms,
                                             "timer", namespace=source.namespace if source else None))
                uow.commit()
            if pending:
                log.info("timer of %s skipped: the previous run has not finished", tick.source_id)
            return not pending

        return retry_on_conflict(attempt, _MAX_ATTEMPTS, lambda: Conflict(
            f"source {tick.source_id}: its state kept changing while a tick was taken", field="version"))
