"""One thread that calls things at given monotonic times: timing a runner call (its limit, a
process to freeze) costs a heap entry, not a thread."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("headwater.runner")


class Deadlines:
    """One thread that calls things at given monotonic times (calls past their limit, processes
    to freeze): timing a call costs a heap entry, not a thread."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        threading.Thread(target=self._loop, daemon=True, name="runner-deadlines").start()

    def at(self, when: float, action: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._seq), action))
            if self._heap[0][2] is action:
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cond.wait(timeout=self._heap[0][0] - time.monotonic() if self._heap else None)
                if self._stopped:
                    return
                _, _, action = heapq.heappop(self._heap)
            try:
                action()
            except Exception:  # noqa: BLE001 - one failing action must not stop the others
                log.exception("runner deadline action failed")
