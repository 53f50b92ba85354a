"""The async Runner port over the local pool: a call is sent from the event loop and its answer
read there (the pool reads its pipes on the server's loop), so a run that waits holds no thread.
Only what would block the loop (starting a runner process, waiting for a free process slot) is
done on a worker thread first."""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.adapters.local.node_runner import NodeRunnerPool, NotRunning
from headwater.adapters.runner_protocol import DESCRIBE, AsyncRunnerRequests, PartialHandler
from headwater.ports import Bundle


class AsyncNodeRunner(AsyncRunnerRequests):
    def __init__(self, pool: NodeRunnerPool) -> None:
        self.pool = pool

    def meta_fields(self) -> dict[str, Any]:
        return self.pool.meta_fields()

    async def call(self, op: str, request: dict[str, Any], bundle: Bundle | None = None,
                   on_partial: PartialHandler | None = None, account: str = DESCRIBE,
                   timeout_s: float | None = None, bill_to: str = "") -> dict[str, Any]:
        try:
            sent = self.pool.submit(op, request, bundle, on_partial, account, timeout_s, bill_to, wait=False)
        except NotRunning:
            sent = await asyncio.to_thread(self.pool.submit, op, request, bundle, on_partial, account, timeout_s,
                                           bill_to)
        return await asyncio.shield(asyncio.wrap_future(sent))  # a caller gone never cancels the pool's call
