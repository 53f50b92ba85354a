"""The async Runner port over the local pool: a call is sent from the event loop and its answer
read there (the pool reads its pipes on the server's loop), so a run that waits holds no thread.
Only what would block the loop (starting a runner process, waiting for a free process slot) is
done on a worker thread first."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Future
from typing import Any

from headwater.adapters.local.node_runner import NodeRunnerPool, NotRunning
from headwater.adapters.runner_protocol import DESCRIBE, AsyncRunnerRequests, CpuProbe, PartialHandler
from headwater.ports import Bundle


class AsyncNodeRunner(AsyncRunnerRequests):
    def __init__(self, pool: NodeRunnerPool) -> None:
        self.pool = pool

    def meta_fields(self) -> dict[str, Any]:
        return self.pool.meta_fields()

    def cpu_probe(self, account: str) -> CpuProbe | None:
        return functools.partial(self.pool.cpu_ns, account)

    async def call(self, op: str, request: dict[str, Any], bundle: Bundle | None = None,
                   on_partial: PartialHandler | None = None, account: str = DESCRIBE,
                   timeout_s: float | None = None, bill_to: str = "") -> dict[str, Any]:
        try:
            sent = self.pool.submit(op, request, bundle, on_partial, account, timeout_s, bill_to, wait=False)
        except NotRunning:
            sent = await asyncio.to_thread(self.pool.submit, op, request, bundle, on_partial, account, timeout_s,
                                           bill_to)
        return await _on_loop(sent)


def _on_loop(sent: Future[dict[str, Any]]) -> asyncio.Future[dict[str, Any]]:
    """The pool's Future as the calling loop's: set right where the pipe is read when that is this
    loop (no wake-up through the loop's self-pipe), else handed over. A caller that goes away
    never cancels the pool's call."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()

    def settle(done: Future[dict[str, Any]]) -> None:
        if answer.done():
            return
        error = done.exception()
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(done.result())

    def settled(done: Future[dict[str, Any]]) -> None:
        if _running_loop() is loop:
            settle(done)
        else:
            loop.call_soon_threadsafe(settle, done)

    sent.add_done_callback(settled)
    return answer


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
