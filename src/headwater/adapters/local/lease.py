"""Source leases of the local service: every worker is in this one process, so a lock will do."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from headwater.ports import Busy


class LocalLease:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}  # source id -> (lock, holders and waiters)

    @contextmanager
    def hold(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(source_id) or (threading.Lock(), 0)
            self._locks[source_id] = (lock, users + 1)
        try:
            if not lock.acquire(timeout=max(0.0, ttl_s if wait_s is None else wait_s)):
                raise Busy(f"source {source_id} is busy")
            try:
                yield
            finally:
                lock.release()
        finally:
            with self._guard:
                lock, users = self._locks[source_id]
                if users <= 1:
                    del self._locks[source_id]
                else:
                    self._locks[source_id] = (lock, users - 1)
