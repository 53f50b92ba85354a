"""The in-process timer scheduler of the local service (DECISIONS: Timers).

Timers live in the `timers` table with their next fire time, so they survive restarts. A due
timer becomes a TimerTick command (whose handler skips the tick while a run is still pending);
the next fire is computed from now, so ticks missed while the service was down are not replayed:
one catch-up run at most. Moving `next_at` is conditional, so a tick fires once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.uow import SqliteUnitOfWork
from headwater.domain.commands import TimerTick
from headwater.domain.timers import Timer

log = logging.getLogger("headwater.scheduler")


class LocalScheduler:
    def __init__(self, db: Database, uow: Callable[[], SqliteUnitOfWork]) -> None:
        self.db = db
        self.uow = uow
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

    # the Scheduler port

    def set(self, source_id: str, timer: Timer) -> None:
        self._write(
            "INSERT INTO timers (source_id, spec, next_at) VALUES (?, ?, ?) "
            "ON CONFLICT(source_id) DO UPDATE SET spec = excluded.spec, next_at = excluded.next_at",
            (source_id, json.dumps(timer.stored()), timer.next_fire(time.time())),
        )
        self._wake.set()

    def remove(self, source_id: str) -> None:
        self._write("DELETE FROM timers WHERE source_id = ?", (source_id,))

    def ticked(self, tick: TimerTick, timer: Timer) -> bool:
        return True  # the loop below renews every schedule; a tick of a removed one finds no timer

    # firing

    def _write(self, sql: str, params: tuple) -> int:
        with self.db.writing() as conn:
            return conn.execute(sql, params).rowcount

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
        rows = self.db.connection().execute(
            "SELECT t.source_id, t.spec, t.next_at, s.namespace FROM timers t LEFT JOIN sources s ON s.id = t.source_id"
        ).fetchall()
        soonest: float | None = None
        for source_id, spec, next_at, namespace in rows:
            if next_at > now:
                soonest = next_at if soonest is None else min(soonest, next_at)
                continue
            following = Timer.parse(json.loads(spec)).next_after(next_at, now)
            soonest = following if soonest is None else min(soonest, following)
            with self.uow() as uow:
                # Conditional on the fire time read above: one tick per due time, even when a set()
                # moved it meanwhile. The tick's task commits with the move.
                moved = uow.conn.execute(
                    "UPDATE timers SET next_at = ? WHERE source_id = ? AND next_at = ?", (following, source_id, next_at)
                ).rowcount
                if moved:
                    uow.outbox.add(TimerTick(source_id, next_at, namespace=namespace))
                uow.commit()
        return None if soonest is None else max(0.0, soonest - time.time())
