"""A background thread that calls a function every so often, off the event loop (the stall check)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("headwater.periodic")


class Periodic:
    def __init__(self, name: str, every_s: float, call: Callable[[], object]) -> None:
        self.name = name
        self.every_s = every_s
        self.call = call
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stopping.wait(self.every_s):
            try:
                self.call()
            except Exception:  # noqa: BLE001 - the next pass is the retry
                log.exception("%s failed", self.name)
