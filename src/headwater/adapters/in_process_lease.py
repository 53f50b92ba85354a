"""A lease table of one process: a source's waiters, threads and coroutines alike, get it in the
order they asked (a coroutine waits holding no thread). Holding is re-entrant within a context (a
task, and the threads it hands work to): the task queue holds a source's lease while its run
handler runs, and the handler holds it again. The local service's source lease (every
holder is in its one process), and the line a DynamoDB lease's coroutines of one process form
before one of them asks DynamoDB."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field

from headwater.ports import Busy


@dataclass(eq=False)
class _Waiter:
    """A thread's (an Event) or a coroutine's (a Future of its loop) place in a source's line."""

    event: threading.Event | None = None
    future: asyncio.Future[None] | None = None
    granted: bool = False

    def grant(self) -> None:
        self.granted = True
        if self.event is not None:
            self.event.set()
        elif self.future is not None:
            future = self.future
            loop = future.get_loop()
            if _running_loop() is loop:  # the holder let go on the waiter's own loop: no wake-up needed
                _settle(future)
            else:
                loop.call_soon_threadsafe(_settle, future)


@dataclass
class _Source:
    waiters: deque[_Waiter] = field(default_factory=deque)


class InProcessLease:
    def __init__(self) -> None:
        self._mine: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(f"leases_held_{id(self)}",
                                                                                   default=frozenset())
        self._guard = threading.Lock()
        self._held: dict[str, _Source] = {}  # source id -> its waiters (present while held)

    def _try(self, source_id: str, waiter: _Waiter) -> bool:
        """Takes the lease if free, else queues `waiter` (caller holds the guard)."""
        line = self._held.get(source_id)
        if line is None:
            self._held[source_id] = _Source()
            return True
        line.waiters.append(waiter)
        return False

    def _leave(self, source_id: str, waiter: _Waiter) -> bool:
        """A waiter gives up; True when it had been granted meanwhile (it holds the lease then)."""
        with self._guard:
            if waiter.granted:
                return True
            line = self._held.get(source_id)
            if line is not None and waiter in line.waiters:
                line.waiters.remove(waiter)
            return False

    def _release(self, source_id: str) -> None:
        with self._guard:
            line = self._held[source_id]
            if not line.waiters:
                del self._held[source_id]
                return
            following = line.waiters.popleft()
            following.grant()

    @contextmanager
    def _holder(self, source_id: str, mine: frozenset[str]) -> Iterator[None]:
        """The lease taken: this context holds it (so holding it again here passes) until the block ends."""
        self._mine.set(mine | {source_id})
        try:
            yield
        finally:
            self._mine.set(mine)
            self._release(source_id)

    def taken_elsewhere(self, source_id: str) -> bool:
        return False  # every holder is in this process

    @contextmanager
    def hold(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> Iterator[None]:
        mine = self._mine.get()
        if source_id in mine:
            yield
            return
        waiter = _Waiter(event=threading.Event())
        with self._guard:
            free = self._try(source_id, waiter)
        if not free:
            assert waiter.event is not None
            waiter.event.wait(max(0.0, ttl_s if wait_s is None else wait_s))
            if not self._leave(source_id, waiter):
                raise Busy(f"source {source_id} is busy")
        with self._holder(source_id, mine):
            yield

    @asynccontextmanager
    async def held(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> AsyncIterator[None]:
        mine = self._mine.get()
        if source_id in mine:
            yield
            return
        waiter = _Waiter(future=asyncio.get_running_loop().create_future())
        with self._guard:
            free = self._try(source_id, waiter)
        if not free:
            assert waiter.future is not None
            try:
                await asyncio.wait_for(asyncio.shield(waiter.future), max(0.0, ttl_s if wait_s is None else wait_s))
            except (TimeoutError, asyncio.CancelledError) as e:
                if self._leave(source_id, waiter):
                    if isinstance(e, asyncio.CancelledError):  # granted as it was cancelled: pass it on
                        self._release(source_id)
                        raise
                else:
                    if isinstance(e, asyncio.CancelledError):
                        raise
                    raise Busy(f"source {source_id} is busy") from None
        with self._holder(source_id, mine):
            yield


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
