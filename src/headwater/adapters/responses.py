"""The Responses port in one process: a customResponse request waits here for its run's answer.

Both adapter sets run a request's run in the process that holds the request (the local queue on
its event loop, the SQS queue inline), so the answer travels as a value between two parts of one
process: no queue, no store. An answer is taken only for a task somebody said it waits for
(`expect`), so runs nobody waits on leave nothing behind; the first answer of a task wins (its
`respond()`, else how its run ended).
"""

from __future__ import annotations

import asyncio
import threading

from headwater.ports import Answer


class InProcessResponses:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._expected: set[str] = set()
        self._early: dict[str, Answer] = {}  # answers that came before their waiter
        self._waiting: dict[str, asyncio.Future[Answer]] = {}

    def expect(self, task_id: str) -> None:
        with self._lock:
            self._expected.add(task_id)

    def deliver(self, task_id: str, answer: Answer) -> None:
        if task_id not in self._expected:  # a set lookup: every run of every task passes here
            return
        with self._lock:
            if task_id not in self._expected:
                return
            self._expected.discard(task_id)
            waiter = self._waiting.pop(task_id, None)
            if waiter is None:
                self._early[task_id] = answer
                return
        loop = waiter.get_loop()
        if _running_loop() is loop:
            _settle(waiter, answer)
        else:
            loop.call_soon_threadsafe(_settle, waiter, answer)

    async def wait(self, task_id: str, timeout_s: float) -> Answer | None:
        """The task's answer, or None when none came within `timeout_s`."""
        with self._lock:
            if task_id in self._early:
                return self._early.pop(task_id)
            waiter: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
            self._waiting[task_id] = waiter
            self._expected.add(task_id)
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            return None
        finally:
            with self._lock:
                self._expected.discard(task_id)
                self._waiting.pop(task_id, None)
                self._early.pop(task_id, None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _settle(waiter: asyncio.Future[Answer], answer: Answer) -> None:
    if not waiter.done():
        waiter.set_result(answer)
