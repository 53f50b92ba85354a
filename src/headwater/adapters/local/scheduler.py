"""The in-process timer scheduler of the local service (DECISIONS: Timers).

Timers live in the `timers` table with their next fire time, so they survive restarts. A due
timer enqueues one timer run, unless the source already has one queued or running (the tick is
skipped); the next fire is computed from now, so ticks missed while the service was down are not
replayed: one catch-up run at most. Moving `next_at` is conditional, so a tick fires once.
"""

from __future__ import annotations

import logging
import threading
import time

from headwater.domain.timers import Timer
from headwater.ports import TaskQueue, UnitOfWorkFactory

log = logging.getLogger("headwater.scheduler")

TIMER_RUN = "run"


class LocalScheduler:
    def __init__(self, uow: UnitOfWorkFactory, queue: TaskQueue, timeout_ms: int) -> None:
        self.uow = uow
        self.queue = queue
        self.timeout_ms = timeout_ms
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=5)

    def changed(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stopping:
            try:
                wait = self.tick(time.time())
            except Exception:
                log.exception("scheduler tick failed")
                wait = 1.0
            self._wake.wait(timeout=wait)
            self._wake.clear()

    def tick(self, now: float) -> float | None:
        """Fires what is due at `now`; returns seconds until the next timer is due (None: none)."""
        fired: list[int] = []
        soonest: float | None = None
        with self.uow() as uow:
            for source_id, spec, next_at in uow.timers.all():
                if next_at > now:
                    soonest = next_at if soonest is None else min(soonest, next_at)
                    continue
                timer = Timer.parse(spec)
                following = timer.next_after(next_at, now)
                if not uow.timers.advance(source_id, next_at, following):
                    continue
                soonest = following if soonest is None else min(soonest, following)
                if uow.tasks.pending_for(source_id, TIMER_RUN):
                    log.info("timer of %s skipped: the previous run has not finished", source_id)
                    continue
                payload = {"event": timer.event(next_at), "timeout_ms": self.timeout_ms, "trigger": "timer"}
                fired.append(uow.tasks.add(TIMER_RUN, source_id, payload, 0))
            uow.commit()
        if fired:
            self.queue.submitted(fired)
        return None if soonest is None else max(0.0, soonest - time.time())
