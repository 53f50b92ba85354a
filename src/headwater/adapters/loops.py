"""A portal onto one event loop: coroutines started from any thread (the task queue's
dispatchers) run there: the server's loop once it is known, before that a loop of the portal's
own, on a thread of its own."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Portal:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._own: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The server's loop, running: coroutines started from now on run there."""
        self._loop = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            return loop
        with self._lock:
            if self._own is None:
                own = self._own = asyncio.new_event_loop()
                threading.Thread(target=own.run_forever, name="portal-loop", daemon=True).start()
            return self._own

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        """Starts the coroutine on the loop, in a copy of the caller's context; its result comes in
        the Future."""
        loop = self.loop
        context = contextvars.copy_context()
        done: Future[T] = Future()

        def start() -> None:
            task = loop.create_task(coroutine, context=context)
            task.add_done_callback(lambda t: _settle(done, t))

        loop.call_soon_threadsafe(start)
        return done

    def close(self) -> None:
        with self._lock:
            own, self._own = self._own, None
        if own is not None:
            own.call_soon_threadsafe(own.stop)


def _settle(done: Future[Any], task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        done.cancel()
    elif task.exception() is not None:
        done.set_exception(task.exception())
    else:
        done.set_result(task.result())

