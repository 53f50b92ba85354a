"""Outbound HTTP to places tenants choose (webhooks, `$.send.http`, `component_url`, OAuth token
endpoints), each exchange bounded as a whole: connecting, sending, and every byte of the answer's
headers and body must be done by one deadline.

httpx's timeouts apply to each read, so a receiver that sends a byte a second never trips them and
holds the caller for as long as it likes. Here the exchange is a coroutine under asyncio.timeout.
The adapters called from worker threads (webhooks) run theirs on an event loop of their own, on a
thread of its own (`OutboundLoop`), the calling thread waiting for the outcome; the OAuth client's
and `component_url`'s run on whatever loop calls them. A host name is resolved in the caller's
thread before the deadline starts (the system resolver's own timeouts bound it), or, from an
event loop, on threads kept for that (`resolve_off_loop`), within the deadline, so a slow name
server never holds the loop or the threads requests need.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
_GRACE_S = 5.0  # how much longer than its own deadline a caller waits for an exchange's outcome
_RESOLVERS = concurrent.futures.ThreadPoolExecutor(16, thread_name_prefix="resolve")


class OutboundLoop:
    """An event loop on a daemon thread of its own, started on first use: the sync adapters'
    exchanges run there, pooled connections and all, and their callers wait on a future."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="outbound-http", daemon=True).start()
                self._loop = loop
            return self._loop

    def run(self, coroutine: Coroutine[Any, Any, T], deadline_s: float) -> T:
        """The coroutine's outcome; it is expected to bound itself by `deadline_s`, and is
        cancelled if it has not ended a grace period later."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop())
        try:
            return future.result(deadline_s + _GRACE_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no outcome within {deadline_s:g} s") from None


async def resolve_off_loop(resolve: Callable[..., T], *args: Any) -> T:
    """`resolve(*args)` (a name lookup, and what goes with it) on the threads kept for them."""
    return await asyncio.get_running_loop().run_in_executor(_RESOLVERS, resolve, *args)


async def read_body(response: httpx.Response, max_bytes: int) -> bytes | None:
    """The answer's body, or None as soon as it is known to be over `max_bytes` (no more is read)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            return None
    return bytes(body)
