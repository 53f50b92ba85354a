"""Routing on the fakes: fan-out idempotency, webhook retries on the queue's delay, 410, hops."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from headwater.domain.commands import DeliverFirstAttempts, DeliverWebhook, FanOut, RunSource, SyncSchedule
from headwater.domain.events import Emit
from headwater.domain.models import Principal
from headwater.domain.routing import FAN_OUT_BYTES, INLINE_DELIVERIES, MAX_HOPS, carried
from headwater.domain.runs import RunResult
from headwater.ports import Task
from tests.fakes import FakeDeliveries, World, to_end, world
from tests.services.test_services import deploy, principal, run_task


def emitter(w: World) -> tuple[Principal, Any]:
    w.runner.script = lambda instance, event: RunResult(emits=[Emit(event)])
    ada = principal(w)
    source = deploy(w, ada)
    w.queue.drain(SyncSchedule)
    return ada, source


def test_a_fan_out_delivered_twice_makes_one_delivery() -> None:
    """Also after the run's commit made it: a FanOut of the same event (recovered, say) adds none."""
    w = world(webhook_retry_schedule="10,20")
    ada, source = emitter(w)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    w.queue.drain()
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1})]))
    with w.store.uow(readonly=True) as uow:
        [event] = uow.events.newest(source.id, "", 1)
    fan_out = FanOut(source.id, source.namespace, "", (event.id,), events=(carried(event),))
    assert w.queue.redeliver(Task("again", fan_out)) == 0
    assert w.queue.redeliver(Task("again", fan_out)) == 0
    assert len(w.store.data.deliveries) == 1
    [first] = w.queue.of(DeliverFirstAttempts)
    assert first.delivery_ids == tuple(w.store.data.deliveries)


def test_a_run_whose_only_listeners_are_webhooks_commits_their_deliveries_itself() -> None:
    w = world()
    ada, source = emitter(w)
    hooks = [w.services.webhooks.create(ada, f"https://example.com/{i}", None, None, None)[0] for i in range(2)]
    for hook in hooks:
        w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    w.services.subscriptions.subscribe(ada, "dc_*", hooks[0].id, None, None)  # names hooks[0] a second time
    w.queue.drain()
    commits = w.store.commits
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1})]))
    assert w.store.commits == commits + 1  # the run's own commit, nothing after it
    assert w.queue.of(FanOut) == []
    deliveries = sorted(w.store.data.deliveries.values(), key=lambda d: d.webhook_id)
    assert [d.webhook_id for d in deliveries] == sorted(h.id for h in hooks)
    assert all(d.payload["event"] == {"n": 1} and d.status == "pending" for d in deliveries)
    [first] = w.queue.of(DeliverFirstAttempts)  # one command for the commit's first attempts
    assert sorted(first.delivery_ids) == sorted(d.id for d in deliveries)
    w.queue.drain()
    assert sorted(url for _, url, *_ in w.sender.sent) == sorted(h.url for h in hooks)
    assert {d.status for d in w.store.data.deliveries.values()} == {"succeeded"}


def test_more_deliveries_than_a_commit_makes_or_other_listeners_go_through_a_fan_out() -> None:
    w = world()
    w.runner.script = lambda instance, event: RunResult(
        emits=[Emit({"n": i, "pad": "x" * event["size"]}, {"id": f"{event['id']}-{i}"}) for i in range(event["count"])])
    ada = principal(w)
    source = deploy(w, ada)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    w.queue.drain()

    def run(task_id: str, count: int, size: int = 10) -> list[FanOut]:
        w.queue.pending.clear()
        to_end(w.services.runs.run_batch([run_task(source.id, {"id": task_id, "count": count, "size": size}, task_id)],
                                  lambda t, r: None))
        return w.queue.of(FanOut)

    assert run("a", INLINE_DELIVERIES) == [] and len(w.store.data.deliveries) == INLINE_DELIVERIES
    assert run("b", INLINE_DELIVERIES + 1) != []  # one delivery too many for the commit
    assert run("c", 2, FAN_OUT_BYTES // 2) != []  # more bytes than the commit carries
    assert len(w.store.data.deliveries) == INLINE_DELIVERIES
    second = deploy(w, ada, name="second")
    w.services.subscriptions.subscribe(ada, source.id, second.id, None, None)
    assert run("d", 1) != []  # a source listens too
    assert len(w.store.data.deliveries) == INLINE_DELIVERIES


def test_at_the_hop_limit_a_run_makes_no_delivery_itself() -> None:
    w = world()
    ada, source = emitter(w)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    w.queue.drain()
    routed = Task("routed", RunSource(source.id, {"n": 1}, 1000, "subscription", route_key="r", hops=MAX_HOPS))
    to_end(w.services.runs.run_batch([routed]))
    assert w.store.data.deliveries == {}
    w.queue.drain()
    with w.store.uow(readonly=True) as uow:
        [error] = uow.events.newest(source.id, "$errors", 10)
    assert error.event["error"]["code"] == "HOP_LIMIT"
    assert w.store.data.deliveries == {}


def test_failures_are_retried_until_the_schedule_is_used_up() -> None:
    w = world(webhook_retry_schedule="0,0")
    ada, source = emitter(w)
    hook, secret = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    assert secret.startswith("whsec_") and hook.signing_secret != secret  # stored encrypted
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1})]))
    w.queue.drain(FanOut)
    w.sender.statuses = [500, 500, 500]
    assert [result for _, result in w.queue.drain(DeliverFirstAttempts)] == [["failed"]]
    statuses = [result for _, result in w.queue.drain(DeliverWebhook)]
    assert statuses == ["failed", "dead"]
    assert w.queue.pending == []
    [delivery] = w.store.data.deliveries.values()
    assert [a.status for a in delivery.attempts] == [500, 500, 500]
    assert len({h["webhook-id"] for _, _, _, h in w.sender.sent}) == 1


def test_retry_delays_come_from_the_schedule() -> None:
    w = world(webhook_retry_schedule="10,20")
    ada, source = emitter(w)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1})]))
    w.queue.drain(FanOut)
    w.sender.statuses = [503]
    w.services.webhooks.deliver([first_attempt(w)])
    [(retry, delay)] = w.queue.pending
    assert isinstance(retry.command, DeliverWebhook) and 10 <= delay <= 11


def test_410_gone_disables_the_webhook() -> None:
    w = world()
    ada, source = emitter(w)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1})]))
    w.sender.statuses = [410]
    w.queue.drain()
    assert w.store.data.webhooks[hook.id].active is False
    assert [d.status for d in w.store.data.deliveries.values()] == ["dead"]


def test_source_listeners_get_the_event_once_and_hops_are_capped() -> None:
    w = world()
    ada, first = emitter(w)
    second = deploy(w, ada, name="second")
    w.services.subscriptions.subscribe(ada, first.id, second.id, None, None)
    to_end(w.services.runs.run_batch([run_task(first.id, {"n": 1})]))
    [fan_out] = w.queue.of(FanOut)
    w.queue.drain(FanOut)
    w.queue.redeliver(Task("again", fan_out))
    runs = w.queue.of(RunSource)
    assert len(runs) == 2 and runs[0].route_key == runs[1].route_key and runs[0].hops == 1
    w.queue.drain(RunSource)
    assert w.runner.calls.count(("run", second.id)) == 1
    capped = FanOut(first.id, first.namespace, "", fan_out.event_ids, MAX_HOPS)
    assert w.queue.redeliver(Task("loop", capped)) == 0
    with w.store.uow(readonly=True) as uow:
        [error] = uow.events.newest(first.id, "$errors", 10)
    assert error.event["error"]["code"] == "HOP_LIMIT"


def test_events_trimmed_before_their_fan_out_ran_are_still_delivered() -> None:
    """A channel keeps its newest 100 events; a busy source can commit more than that before its
    first fan-out runs. The fan-out carries what it routes, so none of them is lost."""
    w = world()
    ada, source = emitter(w)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    listener = deploy(w, ada, name="listener")  # not only webhooks listen: the runs commit FanOuts
    w.services.subscriptions.subscribe(ada, source.id, listener.id, None, None)
    w.queue.drain()
    for n in range(150):
        to_end(w.services.runs.run_batch([run_task(source.id, {"n": n}, f"t{n}")]))
    assert len(w.queue.of(FanOut)) == 150
    w.queue.drain(FanOut)
    w.queue.drain(DeliverWebhook)
    assert w.queue.of(DeliverFirstAttempts) == []  # a fan-out's deliveries each have their own command
    delivered = sorted(json.loads(body)["event"]["n"] for _, _, body, _ in w.sender.sent)
    assert delivered == list(range(150))


def first_attempt(w: World) -> Task:
    """The pending DeliverFirstAttempts of a run's commit with one delivery, as its DeliverWebhook."""
    task, _ = w.queue.pending.pop(0)
    [delivery_id] = task.command.delivery_ids  # type: ignore[attr-defined]
    return Task(task.id, DeliverWebhook(delivery_id, attempt=0))


def hooked(w: World) -> tuple[Any, Any]:
    ada, source = emitter(w)
    hook, _ = w.services.webhooks.create(ada, "https://example.com/in", None, None, None)
    w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    w.queue.drain()
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1})]))
    return source, hook


def test_an_attempt_delivered_twice_is_sent_once_and_saved_without_reading_the_delivery_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = world(webhook_retry_schedule="0,0")
    hooked(w)
    reads: list[str] = []
    get = FakeDeliveries.get
    monkeypatch.setattr(FakeDeliveries, "get", lambda self, i: reads.append(i) or get(self, i))
    w.sender.statuses = [503]
    first = first_attempt(w)
    assert first.command.attempt == 0
    assert w.services.webhooks.deliver([first]) == ["failed"]
    assert len(reads) == 1  # read once, before sending; saved on its version
    [(retry, _)] = w.queue.pending
    assert retry.command.attempt == 1
    assert w.services.webhooks.deliver([first]) == [None]  # SQS delivering the first message again
    assert len(w.sender.sent) == 1
    w.queue.drain()
    assert w.services.webhooks.deliver([retry]) == [None]
    [delivery] = w.store.data.deliveries.values()
    assert [a.status for a in delivery.attempts] == [503, 200] and len(w.sender.sent) == 2


def test_two_copies_of_one_attempt_at_the_same_instant_both_send_and_one_is_recorded() -> None:
    """The trade-off of going without an idempotency record (services/webhooks.py)."""
    w = world()
    hooked(w)
    task = first_attempt(w)
    post = w.sender.post
    answers: list[Any] = []

    def racing(url: str, body: bytes, headers: dict[str, str]) -> Any:
        if not answers:  # the other copy reads the delivery before this one saved it
            answers.append(None)
            answers.append(w.services.webhooks.deliver([task]))
        return post(url, body, headers)

    w.sender.post = racing  # type: ignore[method-assign]
    assert w.services.webhooks.deliver([task]) == ["succeeded"]
    assert answers == [None, ["succeeded"]] and len(w.sender.sent) == 2
    [delivery] = w.store.data.deliveries.values()
    assert len(delivery.attempts) == 1 and delivery.version == 2


def test_attempts_made_at_once_leave_a_webhook_to_the_queue_after_it_failed_or_was_slow() -> None:
    """`deliver_now` (the AWS run consumer's first attempts right after its commit): a webhook that
    failed or answered slowly here has its next attempts left to the queue for SLOW_FOR_S, so one
    slow receiver does not hold up its source's runs; the queue's handler still sends them."""
    from headwater.services import webhooks

    w = world(webhook_retry_schedule="0,0,0")
    source, _ = hooked(w)
    first = first_attempt(w)
    assert w.services.webhooks.deliver_now([first]) == ["succeeded"]  # fast and fine: made here
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 2}, "t2")]))
    second = first_attempt(w)
    post = w.sender.post
    w.sender.post = lambda url, body, headers: replace(post(url, body, headers),  # type: ignore[method-assign]
                                                       duration_ms=webhooks.SLOW_MS + 1)
    assert w.services.webhooks.deliver_now([second]) == ["succeeded"]  # made, but slowly
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 3}, "t3")]))
    third = first_attempt(w)
    assert w.services.webhooks.deliver_now([third]) is None  # left to the queue: nothing sent here
    assert len(w.sender.sent) == 2
    assert w.services.webhooks.deliver([third]) == ["succeeded"] and len(w.sender.sent) == 3


def test_a_failed_attempt_made_at_once_is_retried_through_the_queue() -> None:
    w = world(webhook_retry_schedule="0,0")
    hooked(w)
    first = first_attempt(w)
    w.sender.statuses = [500]
    assert w.services.webhooks.deliver_now([first]) == ["failed"]
    [(retry, _)] = w.queue.pending
    assert retry.command.attempt == 1
    assert w.services.webhooks.deliver_now([retry]) is None  # the webhook failed here just now
    assert w.services.webhooks.deliver([retry]) == ["succeeded"]
    [delivery] = w.store.data.deliveries.values()
    assert [a.status for a in delivery.attempts] == [500, 200]


def test_a_commits_first_attempts_are_one_command_and_a_slow_webhook_leaves_only_its_own_to_the_queue() -> None:
    from headwater.services import webhooks

    w = world(webhook_retry_schedule="0,0")
    ada, source = emitter(w)
    fast, slow = (w.services.webhooks.create(ada, f"https://example.com/{name}", None, None, None)[0]
                  for name in ("fast", "slow"))
    for hook in (fast, slow):
        w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    w.queue.drain()
    post = w.sender.post
    w.sender.post = lambda url, body, headers: replace(  # type: ignore[method-assign]
        post(url, body, headers), duration_ms=webhooks.SLOW_MS + 1 if url.endswith("slow") else 5)

    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1}, "t1")]))
    [(task, _)] = w.queue.pending
    assert len(task.command.delivery_ids) == 2  # type: ignore[attr-defined]
    assert w.services.webhooks.deliver_first_now([task]) == [["succeeded", "succeeded"]]  # both, side by side
    w.queue.pending.clear()

    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 2}, "t2")]))
    [(task, _)] = w.queue.pending
    assert w.services.webhooks.deliver_first_now([task]) is None  # the slow webhook's attempt is left
    assert sorted(url for _, url, *_ in w.sender.sent[2:]) == ["https://example.com/fast"]
    statuses = w.services.webhooks.deliver_first([task])  # the queue's handler: only the one left is sent
    assert sorted(str(status) for status in statuses[0]) == ["None", "succeeded"]
    assert sorted(url for _, url, *_ in w.sender.sent[2:]) == ["https://example.com/fast", "https://example.com/slow"]
    assert {d.status for d in w.store.data.deliveries.values()} == {"succeeded"}


def test_a_commits_first_attempts_are_made_side_by_side() -> None:
    """Each POST waits at a barrier for the other: made one after the other, neither would pass it."""
    import threading

    w = world()
    ada, source = emitter(w)
    for name in ("a", "b"):
        hook, _ = w.services.webhooks.create(ada, f"https://example.com/{name}", None, None, None)
        w.services.subscriptions.subscribe(ada, source.id, hook.id, None, None)
    w.queue.drain()
    barrier, post = threading.Barrier(2, timeout=10), w.sender.post

    def together(url: str, body: bytes, headers: dict[str, str]) -> Any:
        barrier.wait()
        return post(url, body, headers)

    w.sender.post = together  # type: ignore[method-assign]
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 1})]))
    [(task, _)] = w.queue.pending
    assert w.services.webhooks.deliver_first([task]) == [["succeeded", "succeeded"]]
