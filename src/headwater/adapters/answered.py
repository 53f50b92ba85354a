"""A request that runs its own run (customResponse): the run started as a task of the request's
loop, and the request's answer awaited from it as a value, whichever comes first of its
`respond()` and its end. The run goes on after the answer (its outcome is committed later)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, cast

from headwater.domain.runs import RunResult
from headwater.ports import OnRespond, RunAnswer, Task

RunOf = Callable[[OnRespond], Coroutine[Any, Any, list[Any] | None]]
"""Starts the request's run with where its respond() goes; its results, or None when it did not
finish here (the queue retries it)."""


async def answer_of(run_of: RunOf, timeout_s: float, running: set[asyncio.Future[Any]]) -> RunAnswer:
    """The run's first `respond()`, else its result, else None (nothing in `timeout_s`, or it
    failed). A run that ended without its `respond()` having been heard but whose result carries
    the response (the runner reports it in both) is answered with that response: "ended without
    calling respond()" only ever means the component did not call it. `running` keeps the run's
    task until it ends (a loop keeps its tasks weakly)."""
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[dict[str, Any]] = loop.create_future()

    def answer(response: dict[str, Any]) -> None:
        if not answered.done():
            answered.set_result(response)

    def on_respond(_: Task, response: dict[str, Any]) -> None:
        """On the loop (a coroutine handler), or from a plain handler's thread."""
        if _running_loop() is loop:
            answer(response)
        else:
            loop.call_soon_threadsafe(answer, response)

    run = loop.create_task(run_of(on_respond))  # in the request's context (its id goes on)
    running.add(run)
    run.add_done_callback(running.discard)
    waiting: set[asyncio.Future[Any]] = {answered, run}
    await asyncio.wait(waiting, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    if answered.done():
        return answered.result()
    answered.cancel()
    if run.done() and not run.cancelled():
        results = run.result()
        if results:
            result = results[0]  # a RunResult from the run path; the queue's contract passes any value
            if isinstance(result, RunResult) and result.response is not None:
                return result.response  # it did respond (its result says so), though that was not heard
            return cast(RunAnswer, result)
    return None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
