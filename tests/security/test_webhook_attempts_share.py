"""A commit's first webhook attempts are made side by side on threads of that call's own: one
tenant's slow receivers cannot hold the threads another tenant's attempts need (issue 31)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any

from headwater.domain.commands import DeliverFirstAttempts
from headwater.domain.events import Emit
from headwater.domain.models import Principal
from headwater.domain.routing import INLINE_DELIVERIES
from headwater.domain.runs import RunResult
from headwater.ports import Task
from tests.fakes import World, to_end, world
from tests.services.test_services import deploy, run_task


def commit_with_webhooks(w: World, name: str, urls: list[str]) -> Task:
    user, _ = w.services.accounts.create_user(name, f"{name}@example.com", "paid")
    who = Principal(user)
    source = deploy(w, who)
    w.queue.drain()
    for url in urls:
        hook, _ = w.services.webhooks.create(who, url, None, None, None)
        w.services.subscriptions.subscribe(who, source.id, hook.id, None, None)
    w.queue.drain()
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1})]))
    [(task, _)] = [(t, d) for t, d in w.queue.pending if isinstance(t.command, DeliverFirstAttempts)]
    w.queue.pending.clear()
    return task


def test_one_tenants_slow_receivers_do_not_hold_another_tenants_first_attempts() -> None:
    w = world()
    w.runner.script = lambda instance, event: RunResult(emits=[Emit(event)])
    slow = commit_with_webhooks(w, "slow", [f"https://slow.example/{i}" for i in range(INLINE_DELIVERIES)])
    fast = commit_with_webhooks(w, "fast", ["https://fast.example/a", "https://fast.example/b"])
    release, post = threading.Event(), w.sender.post

    def answer(url: str, body: bytes, headers: dict[str, str]) -> Any:
        if "slow.example" in url:
            release.wait(30)  # a receiver that does not answer (until the test lets it)
        return post(url, body, headers)

    w.sender.post = answer  # type: ignore[method-assign]
    with ThreadPoolExecutor(2) as workers:
        held = workers.submit(w.services.webhooks.deliver_first, [slow])
        try:
            made = workers.submit(w.services.webhooks.deliver_first, [fast])
            try:
                statuses = made.result(timeout=10)
            except FuturesTimeout:
                raise AssertionError("the other tenant's attempts waited for the slow receivers' threads") from None
            assert statuses == [["succeeded", "succeeded"]]
        finally:
            release.set()
        assert held.result(timeout=30) == [["succeeded"] * INLINE_DELIVERIES]
