"""A small read-through cache with a time to live, for lookups on the hot path.

It holds copies of stored records, never state of its own: another machine's change is seen
once the entry expires, this process's own changes at once (`forget`).
"""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

_MISSING = object()


class TtlCache(Generic[K, V]):
    def __init__(self, ttl_s: float, max_items: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.max_items = max_items
        self._items: dict[K, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> tuple[bool, V | None]:
        """(hit, value): a hit may hold None (cached absence)."""
        entry = self._items.get(key)
        if entry is None or entry[0] < time.monotonic():
            return False, None
        return True, entry[1]

    def put(self, key: K, value: V) -> None:
        with self._lock:
            if len(self._items) >= self.max_items:
                self._items.clear()
            self._items[key] = (time.monotonic() + self.ttl_s, value)

    def forget(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)


class BoundedDict(Generic[K, V]):
    """At most `max_items` entries, the least recently put dropped first; safe across threads."""

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self._items: dict[K, V] = {}
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = value
            while len(self._items) > self.max_items:
                self._items.pop(next(iter(self._items)))

    def pop(self, key: K, default: V | None = None) -> V | None:
        with self._lock:
            return self._items.pop(key, default)
