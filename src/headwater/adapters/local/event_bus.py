"""In-process notification of new events, for live readers (SSE) of the local service."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict


class LocalEventBus:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[tuple[str, str], set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = defaultdict(set)

    def published(self, emitter_id: str, channel: str) -> None:
        with self._lock:
            listeners = list(self._listeners.get((emitter_id, channel), ()))
        for loop, event in listeners:
            loop.call_soon_threadsafe(event.set)

    def listen(self, emitter_id: str, channel: str) -> asyncio.Event:
        event = asyncio.Event()
        with self._lock:
            self._listeners[(emitter_id, channel)].add((asyncio.get_running_loop(), event))
        return event

    def unlisten(self, emitter_id: str, channel: str, event: asyncio.Event) -> None:
        with self._lock:
            self._listeners[(emitter_id, channel)].discard((asyncio.get_running_loop(), event))
