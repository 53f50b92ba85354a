"""An asyncio event loop on a fake clock: its time moves only when the loop has nothing to do but
wait for its next timer, and then it jumps straight to that timer. `asyncio.sleep`, `wait_for`
and every deadline computed from `loop.time()` are then exact and instant, and a test of waits
and timeouts is deterministic.

While a call handed to a worker thread (`asyncio.to_thread`, `run_in_executor`) is out, the
clock stands still and the loop waits for the thread for real (the thread's answer wakes it): a
thread's work takes no fake time. Other threads that call into the loop (call_soon_threadsafe)
are not seen: a test on this loop does not mix them with pending timers."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")


class _FastForward(selectors.DefaultSelector):
    loop: FakeClockLoop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None or timeout <= 0 or self.loop.threads_out:
            return super().select(timeout)
        ready = super().select(0)
        if not ready:
            self.loop.now += timeout  # nothing to do until the next timer: be there
        return ready


class FakeClockLoop(asyncio.SelectorEventLoop):
    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start
        self.threads_out = 0
        selector = _FastForward()
        selector.loop = self
        super().__init__(selector)

    def time(self) -> float:
        return self.now

    def run_in_executor(self, executor: Executor | None, func: Callable[..., T],  # type: ignore[override]
                        *args: Any) -> asyncio.Future[T]:
        self.threads_out += 1
        future = super().run_in_executor(executor, func, *args)
        future.add_done_callback(self._thread_back)
        return future

    def _thread_back(self, _: asyncio.Future[Any]) -> None:
        self.threads_out -= 1


def run_on_fake_clock(main: Coroutine[Any, Any, T], start: float = 1_000_000.0) -> T:
    """`asyncio.run` on a FakeClockLoop."""
    loop = FakeClockLoop(start)
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
