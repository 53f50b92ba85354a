"""Late listeners backfilled (replay=retained) on the fakes: the retained events first, once, in
order, then the new ones, whatever order the queue takes the work in."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest

from headwater.domain.commands import Backfill, BackfillWebhook, FanOut, RunSource, SyncSchedule
from headwater.domain.errors import Invalid, NotFound
from headwater.domain.events import Emit
from headwater.domain.models import Principal, StoredEvent
from headwater.domain.runs import RunResult
from headwater.ports import Task, TryLater
from headwater.services.backfills import BACKSTOP_S, BUDGET_S, HOLD_S, Backfills
from tests.fakes import World, to_end, world
from tests.services.test_services import deploy, principal, run_task


def emitting(w: World) -> tuple[Principal, Any]:
    w.runner.script = lambda instance, event: RunResult(emits=[Emit(event)])
    ada = principal(w)
    source = deploy(w, ada)
    w.queue.drain(SyncSchedule)
    return ada, source


def emit(w: World, source: Any, n: int) -> None:
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": n}, f"run-{n}")]))


def sent(w: World) -> list[int]:
    return [json.loads(body)["event"]["n"] for _, _, body, _ in w.sender.sent]


def take(w: World, kind: type) -> Task:
    entry = next(p for p in w.queue.pending if type(p[0].command) is kind)
    w.queue.pending.remove(entry)
    return entry[0]


def test_a_late_webhook_gets_the_retained_events_in_order_before_one_emitted_meanwhile() -> None:
    w = world()
    ada, source = emitting(w)
    for n in (1, 2, 3):
        emit(w, source, n)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")
    backfill = take(w, BackfillWebhook)
    emit(w, source, 4)  # while the backfill waits: fan-out holds it for the listener
    assert w.queue.of(FanOut) and not w.store.data.deliveries
    w.queue.drain(FanOut)
    held = take(w, BackfillWebhook)
    assert [e["event"]["n"] for e in held.command.events] == [4]
    with pytest.raises(TryLater):  # taken first, it waits for the backfill
        w.queue.redeliver(held)
    assert w.sender.sent == []
    assert w.queue.redeliver(backfill) == 4  # the retained ones, 4 among them by now
    assert w.queue.redeliver(held) == 0  # delivered already: once
    assert sent(w) == [1, 2, 3, 4]
    emit(w, source, 5)  # the backfill is over: routed as any event is
    w.queue.drain()
    assert sent(w) == [1, 2, 3, 4, 5]
    assert w.queue.redeliver(backfill) == 0 and sent(w) == [1, 2, 3, 4, 5]  # a repeat does nothing


def test_the_same_subscription_made_again_replays_nothing() -> None:
    w = world()
    ada, source = emitting(w)
    emit(w, source, 1)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    first = w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")
    w.queue.drain()
    again = w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")
    assert again.id == first.id and w.queue.of(BackfillWebhook) == []
    assert sent(w) == [1]


def test_a_backfill_that_crashed_midway_goes_on_without_sending_twice() -> None:
    w = world()
    ada, source = emitting(w)
    for n in (1, 2, 3):
        emit(w, source, n)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")
    backfill = take(w, BackfillWebhook)
    calls = 0

    def crashing(tasks: list[Task], on: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("the process died")
        return w.services.webhooks.deliver(tasks, on)

    with pytest.raises(RuntimeError):
        Backfills(w.store.uow, w.services.routing, crashing).backfill([backfill])
    assert sent(w) == [1, 2]
    w.queue.redeliver(backfill)  # the queue's retry
    assert sent(w) == [1, 2, 3]
    assert {d.status for d in w.store.data.deliveries.values()} == {"succeeded"}


def test_an_event_committed_by_a_run_that_missed_the_subscription_is_not_lost() -> None:
    """A run that read the subscriptions before the new one committed routes its events nowhere;
    committed after the backfill read the channel, they are taken once the backfill is over."""
    w = world()
    ada, source = emitting(w)
    emit(w, source, 1)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")
    backfill = take(w, BackfillWebhook)

    def racing(tasks: list[Task], on: Any) -> Any:
        if not w.sender.sent:
            with w.store.uow() as uow:  # as that run's commit would: its event, no route here
                uow.events.put(source.id, StoredEvent("9999999999999-1", 0, {"n": 2}, {}, ""))
                uow.commit()
        return w.services.webhooks.deliver(tasks, on)

    Backfills(w.store.uow, w.services.routing, racing).backfill([backfill])
    assert sent(w) == [1, 2]


def test_a_failed_attempt_is_retried_on_the_schedule_while_the_next_go() -> None:
    w = world(webhook_retry_schedule="10")
    ada, source = emitting(w)
    for n in (1, 2):
        emit(w, source, n)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")
    w.sender.statuses = [500]
    w.queue.redeliver(take(w, BackfillWebhook))
    assert sent(w) == [1, 2]
    retries = [(t, delay) for t, delay in w.queue.pending if t.command.attempt == 1]
    [(retry, delay)] = retries
    assert retry.command.name == "deliver_webhook" and delay >= 10
    backstops = [(t.command.attempt, delay) for t, delay in w.queue.pending if (t, delay) not in retries]
    assert backstops == [(0, BACKSTOP_S), (0, BACKSTOP_S)]
    w.queue.drain()  # the backstops find their attempts made (and the retry is not due yet)
    assert sent(w) == [1, 2]


def test_a_delivery_whose_backfill_never_got_to_it_is_attempted_by_its_backstop() -> None:
    w = world()
    ada, source = emitting(w)
    emit(w, source, 1)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")

    def dying(tasks: list[Task], on: Any) -> Any:
        raise RuntimeError("the process died")

    with pytest.raises(RuntimeError):
        Backfills(w.store.uow, w.services.routing, dying).backfill([take(w, BackfillWebhook)])
    assert sent(w) == []
    w.queue.drain()  # the backstop, BACKSTOP_S later
    assert sent(w) == [1]


def test_a_long_backfill_gives_its_lane_back_and_goes_on_where_it_was() -> None:
    w = world()
    ada, source = emitting(w)
    for n in (1, 2, 3):
        emit(w, source, n)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")
    backfill = take(w, BackfillWebhook)
    now = [0.0]

    def slow(tasks: list[Task], on: Any) -> Any:
        before = len(w.sender.sent)
        statuses = w.services.webhooks.deliver(tasks, on)
        now[0] += BUDGET_S * 0.6 * (len(w.sender.sent) - before)  # each request sent takes long
        return statuses

    backfills = Backfills(w.store.uow, w.services.routing, slow, clock=lambda: now[0])
    with pytest.raises(TryLater):
        backfills.backfill([backfill])
    assert sent(w) == [1, 2]
    assert backfills.backfill([backfill]) == [1]
    assert sent(w) == [1, 2, 3]


def test_held_events_go_anyway_once_their_backfill_is_long_overdue() -> None:
    w = world()
    ada, source = emitting(w)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")
    take(w, BackfillWebhook)  # lost for good
    emit(w, source, 1)
    w.queue.drain(FanOut)
    held = take(w, BackfillWebhook)
    with pytest.raises(TryLater):
        w.queue.redeliver(replace(held, deferred_since=time.time() - HOLD_S + 60))
    w.queue.redeliver(replace(held, deferred_since=time.time() - HOLD_S - 1))
    w.queue.drain()
    assert sent(w) == [1]


def test_a_late_source_listener_has_the_retained_runs_queued_first_in_order() -> None:
    w = world()
    ada, source = emitting(w)
    for n in (1, 2):
        emit(w, source, n)
    listener = deploy(w, ada, name="listener")
    w.queue.drain()
    w.services.subscriptions.subscribe(ada, source.id, listener.id, None, None, "retained")
    backfill = take(w, Backfill)
    emit(w, source, 3)
    w.queue.drain(FanOut)
    held = take(w, Backfill)
    assert w.queue.of(RunSource) == []  # nothing for the listener before its backfill
    w.queue.redeliver(backfill)
    w.queue.redeliver(held)
    runs = [c for c in w.queue.of(RunSource) if c.source_id == listener.id]
    assert [c.event["n"] for c in runs] == [1, 2, 3, 3]  # the held 3 again, under the same key ...
    assert len({c.route_key for c in runs}) == 3  # ... which the listener runs once
    assert all(c.trigger == "subscription" and c.hops == 1 for c in runs)


def test_unsubscribed_before_its_backfill_nothing_is_sent() -> None:
    w = world()
    ada, source = emitting(w)
    emit(w, source, 1)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None, "retained")
    w.services.subscriptions.unsubscribe(ada, source.id, hook.id, None, None)
    w.queue.drain()
    assert w.sender.sent == [] and w.store.data.deliveries == {}


@pytest.mark.parametrize(("emitter", "replay", "field"), [("source", "all", "replay"), ("source", "", "replay"),
                                                           ("dc_*", "retained", "replay")])
def test_replay_is_retained_for_one_emitter_else_422(emitter: str, replay: str, field: str) -> None:
    w = world()
    ada, source = emitting(w)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    with pytest.raises(Invalid) as raised:
        w.services.subscriptions.subscribe(ada, source.id if emitter == "source" else emitter, hook.id, None, None,
                                           replay)
    assert raised.value.details is not None and field in raised.value.details
    assert w.store.data.subscriptions == {}


def test_replay_from_another_namespaces_emitter_is_not_found_and_queues_nothing() -> None:
    w = world()
    _, source = emitting(w)
    emit(w, source, 1)
    bob = Principal(w.services.accounts.create_user("bob", "bob@example.com", "paid")[0])
    hook, _ = w.services.webhooks.create(bob, "https://example.com/bob", None, None, None)
    pending = list(w.queue.pending)
    with pytest.raises(NotFound):
        w.services.subscriptions.subscribe(bob, source.id, hook.id, None, None, "retained")
    assert w.queue.pending == pending and w.sender.sent == []
