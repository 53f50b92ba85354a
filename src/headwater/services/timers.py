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

from headwater.domain import health
from headwater.domain.commands import RunSource, SyncSchedule, TimerTick
from headwater.domain.errors import Conflict
from headwater.ports import Scheduler, Task, UnitOfWorkFactory
from headwater.services.contention import retry_on_conflict
from headwater.services.sources import Sources
from headwater.services.stalls import Stalls
from headwater.settings import Settings

log = logging.getLogger("headwater.timers")

_MAX_ATTEMPTS = 20


class Timers:
    def __init__(self, uow: UnitOfWorkFactory, sources: Sources, scheduler: Scheduler, settings: Settings,
                 stalls: Stalls | None = None) -> None:
        """`stalls`: kept watching each source as committed (its timer, its expected cadence)."""
        self.uow = uow
        self.sources = sources
        self.scheduler = scheduler
        self.settings = settings
        self.stalls = stalls

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
            if self.stalls is not None:
                self.stalls.sync(source, source_id, time.time())
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

        policy = source.catch_up if source else "skip"

        def attempt(_: int) -> bool:
            now = time.time()
            with self.uow() as uow:
                state = uow.state.get(tick.source_id)
                if tick.due_at <= state.last_tick:
                    return False
                pending = state.timer_run_since is not None and now - state.timer_run_since < self.stale_after_s
                # the ticks missed since the last one (the service down, a tick dropped) follow the
                # source's catch-up policy; every tick not run is counted on its health
                plan = health.plan(timer, policy, state.last_tick, tick.due_at, pending)
                room = None if uow.max_writes is None else max(1, uow.max_writes - 4)
                runs = plan.runs[-room:] if room is not None else plan.runs
                skipped = plan.skipped + len(plan.runs) - len(runs)
                new = replace(state, last_tick=tick.due_at, timer_run_since=state.timer_run_since if pending else now,
                              ran_tick=tick.due_at if runs else state.ran_tick,
                              skipped_ticks=state.skipped_ticks + skipped,
                              activity=health.count(state.activity, now, (0, 0, 0, skipped)))
                uow.state.save(tick.source_id, new, state.version)
                for due_at in runs:
                    uow.outbox.add(RunSource(tick.source_id, timer.event(due_at), self.settings.timer_timeout_ms,
                                             "timer", namespace=source.namespace if source else None))
                uow.commit()
            if skipped:
                log.info("timer of %s: %d tick(s) skipped (%s)", tick.source_id, skipped,
                         "the previous run has not finished" if pending else f"missed; catch-up {policy}")
            return not pending

        return retry_on_conflict(attempt, _MAX_ATTEMPTS, lambda: Conflict(
            f"source {tick.source_id}: its state kept changing while a tick was taken", field="version"))
