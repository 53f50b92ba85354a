"""Async ports over blocking adapters whose calls hold a thread anyway (DynamoDB, the runner
Lambda's invoke): each call on a worker thread, in the caller's context (its request id)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import anyio.to_thread

from headwater.domain.models import ComponentDefinition
from headwater.domain.runs import RunResult
from headwater.ports import BlockingRunner, Bundle, Finished, Instance, Responded, RunMessage, Timed

T = TypeVar("T")


class ThreadWrites:
    """The Writes port where the store has no single writer: the write on a worker thread."""

    async def call(self, write: Callable[[], T]) -> T:
        return await asyncio.to_thread(write)


class ThreadedRunner:
    """The Runner port over a BlockingRunner: a run's `respond()`s are handed back to the
    caller's loop as the blocking runner reports them (the runner Lambda: when the run ends)."""

    def __init__(self, blocking: BlockingRunner) -> None:
        self.blocking = blocking

    async def describe(self, bundle: Bundle, timeout_ms: int, account: str,
                       bill_to: str) -> Timed[ComponentDefinition]:
        return await asyncio.to_thread(self.blocking.describe, bundle, timeout_ms, account, bill_to)

    async def run(self, bundle: Bundle, instance: Instance, events: list[Any],
                  timeout_ms: int) -> AsyncIterator[RunMessage]:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Responded] = asyncio.Queue()

        def respond(index: int, response: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, Responded(index, response))

        call = asyncio.ensure_future(asyncio.to_thread(self.blocking.run_many, bundle, instance, events, timeout_ms,
                                                       respond))
        while not call.done() or not inbox.empty():
            getting = asyncio.ensure_future(inbox.get())
            await asyncio.wait({getting, call}, return_when=asyncio.FIRST_COMPLETED)
            if getting.done():
                yield getting.result()
            else:
                getting.cancel()
        yield Finished(call.result())

    async def hook(self, bundle: Bundle, instance: Instance, hook: str, timeout_ms: int) -> RunResult:
        return await asyncio.to_thread(self.blocking.hook, bundle, instance, hook, timeout_ms)

    async def run_step(self, bundle: Bundle, instance: Instance, steps: dict[str, Any], timeout_ms: int) -> RunResult:
        return await asyncio.to_thread(self.blocking.run_step, bundle, instance, steps, timeout_ms)

    async def additional_props(self, bundle: Bundle, instance_id: str, props: dict[str, Any], timeout_ms: int,
                               account: str, bill_to: str) -> Timed[list[dict[str, Any]]]:
        return await asyncio.to_thread(self.blocking.additional_props, bundle, instance_id, props, timeout_ms,
                                       account, bill_to)

    async def options(self, bundle: Bundle, instance_id: str, prop: str, props: dict[str, Any], page: int,
                      prev_context: Any, query: str | None, timeout_ms: int, account: str,
                      bill_to: str) -> Timed[dict[str, Any]]:
        return await asyncio.to_thread(self.blocking.options, bundle, instance_id, prop, props, page, prev_context,
                                       query, timeout_ms, account, bill_to)

    async def aclose(self) -> None:
        pass


class RequestThreads:
    """The Offload port on the request thread pool (anyio's: the one FastAPI's sync routes use, of
    which an API key's requests hold at most their share, api/tenant_share.py)."""

    async def call(self, work: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(work)
