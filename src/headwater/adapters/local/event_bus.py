"""Notification of new events, for live readers (SSE), and of changed sources, for the caches of
endpoints: within this process, and to the other serving processes of its data dir (`Peers`)."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Callable

from headwater.adapters.local.peers import Peers


class LocalEventBus:
    def __init__(self, peers: Peers | None = None) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[tuple[str, str], set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = defaultdict(set)
        self._on_changed: list[Callable[[str], None]] = []
        self._peers = peers
        if peers is not None:
            peers.on("published", lambda fields: self._wake(*fields[:2]))
            peers.on("endpoint", lambda fields: self._forget(fields[0]))

    def published(self, emitter_id: str, channel: str) -> None:
        self._wake(emitter_id, channel)
        if self._peers is not None:
            self._peers.broadcast("published", emitter_id, channel)

    def _wake(self, emitter_id: str, channel: str) -> None:
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

    def endpoint_changed(self, endpoint_id: str) -> None:
        self._forget(endpoint_id)
        if self._peers is not None:
            self._peers.broadcast("endpoint", endpoint_id)

    def on_endpoint_changed(self, forget: Callable[[str], None]) -> None:
        self._on_changed.append(forget)

    def _forget(self, endpoint_id: str) -> None:
        for forget in self._on_changed:
            forget(endpoint_id)
