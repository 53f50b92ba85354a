"""The in-process timer scheduler of the local service (DECISIONS: Timers).

Timers live in the `timers` table with their next fire time, so they survive restarts. A due
timer becomes a TimerTick command (whose handler skips the tick while a run is still pending);
with several serving processes, each fires the timers of the sources in its share;
the next fire is computed from now, and a late firing fires the newest tick due (so the ticks
missed while the service was down are those between the last tick taken and it: the tick's
handler runs or counts them per the source's catch-up policy). Moving `next_at` is conditional,
so a tick fires once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from headwater.adapters.local.peers import Peers
from headwater.adapters.local.process_share import ProcessShare
from headwater.adapters.local.sqlite.database import Database
from headwater.adapters.local.sqlite.uow import SqliteUnitOfWork
from headwater.domain.commands import TimerTick
from headwater.domain.timers import Timer

log = logging.getLogger("headwater.scheduler")

LOOK_S = 5.0
GATHER_S = 0.02  # the least wait between two firings: what is due meanwhile fires together
FIRE_BATCH = 256  # due timers moved in one transaction (the write lock is held that long)


class LocalScheduler:
    def __init__(self, db: Database, uow: Callable[[], SqliteUnitOfWork], share: ProcessShare | None = None,
                 peers: Peers | None = None) -> None:
        """`share`: the sources whose timers this process fires; `peers`: how the process firing a
        timer set here hears of it at once."""
        self.db = db
        self.uow = uow
        self.share = share or ProcessShare(0, 1)
        self.peers = peers
        if peers is not None:
            peers.on("timers", lambda _: self._wake.set())
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
        if self.share.owns(source_id):
            self._wake.set()
        elif self.peers is not None:
            self.peers.send(self.share.owner(source_id), "timers")

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
            # another process on the store (a serving process, a `headwater` command) may set a timer:
            # looked for at least every LOOK_S (moving a tick is conditional, so each fires once);
            # timers due within GATHER_S of each other fire together, in one transaction
            self._wake.wait(timeout=LOOK_S if wait is None else min(max(wait, GATHER_S), LOOK_S))
            self._wake.clear()

    def tick(self, now: float) -> float | None:
        """Fires what is due at `now`, FIRE_BATCH timers a transaction; returns seconds until the
        next timer is due (None: none). Due timers of other processes' shares are theirs to fire."""
        conn = self.db.connection()
        rows = conn.execute(
            "SELECT t.source_id, t.spec, t.next_at, s.namespace FROM timers t "
            "LEFT JOIN sources s ON s.id = t.source_id WHERE t.next_at <= ?", (now,)).fetchall()
        (soonest,) = conn.execute("SELECT min(next_at) FROM timers WHERE next_at > ?", (now,)).fetchone()
        due: list[tuple[str, float, float, float, str | None]] = []
        for source_id, spec, next_at, namespace in rows:
            if not self.share.owns(source_id):
                continue
            timer = Timer.parse(json.loads(spec))
            following = timer.next_after(next_at, now)
            soonest = following if soonest is None else min(soonest, following)
            due.append((source_id, next_at, following, timer.latest_due(next_at, now), namespace))
        for start in range(0, len(due), FIRE_BATCH):
            with self.uow() as uow:
                for source_id, next_at, following, latest, namespace in due[start:start + FIRE_BATCH]:
                    # Conditional on the fire time read above: one tick per due time, even when a
                    # set() moved it meanwhile. The tick's task commits with the move.
                    moved = uow.conn.execute(
                        "UPDATE timers SET next_at = ? WHERE source_id = ? AND next_at = ?",
                        (following, source_id, next_at)).rowcount
                    if moved:
                        uow.outbox.add(TimerTick(source_id, latest, namespace=namespace))
                uow.commit()
        return None if soonest is None else max(0.0, soonest - time.time())
