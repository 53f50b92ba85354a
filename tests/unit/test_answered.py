"""A request that runs its own run (customResponse, adapters/answered.py): its answer is the run's
respond(), whichever way the runner reported it."""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.adapters.answered import answer_of
from headwater.domain.runs import RunResult
from headwater.ports import OnRespond

RESPONSE = {"status": 201, "headers": {}, "body": "mine"}


def answer(run: Any) -> Any:
    return asyncio.run(answer_of(run, 5, set()))


def test_the_answer_is_the_respond_heard_while_the_run_goes_on() -> None:
    async def run(on_respond: OnRespond) -> list[Any]:
        on_respond(None, RESPONSE)  # type: ignore[arg-type]
        await asyncio.Event().wait()  # never ends: the answer does not wait for it
        return []

    assert answer(run) == RESPONSE


def test_a_run_whose_respond_was_not_heard_is_answered_with_the_response_its_result_carries() -> None:
    """Its result says respond() was called: "ended without calling respond()" would be untrue."""
    async def run(_: OnRespond) -> list[Any]:
        return [RunResult(response=RESPONSE)]

    assert answer(run) == RESPONSE


def test_a_run_that_never_responded_is_answered_with_its_result() -> None:
    ended = RunResult()

    async def run(_: OnRespond) -> list[Any]:
        return [ended]

    assert answer(run) is ended
