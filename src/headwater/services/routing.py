"""Fan-out: committed events go to every matching subscriber, at least once, once per listener.

A run that wrote events to a channel somebody listens on commits a FanOut command with them
(the outbox: no event is routed that was not committed, none committed is forgotten); when only
a few webhook deliveries are to be made, the run's commit makes them itself instead. The FanOut's
handler turns each (listener, event) into the listener's own durable work: a RunSource for a
source (remembered under a routing key, so a repeated fan-out runs it once), a delivery for a
webhook (its id derives from webhook and event, so it is made once). Each hop counts; past
MAX_HOPS the chain (A -> B -> A ...) stops with a `$errors` event on the emitter.

A listener whose subscription is backfilling (replay=retained, services/backfills.py) gets no
event from fan-out directly: its events are held, carried by a Backfill command in the
subscription's lane, delivered once the retained ones are.
"""

from __future__ import annotations

import logging
import secrets
from collections import defaultdict

from headwater.domain.commands import (
    DeliverFirstAttempts,
    DeliverWebhook,
    FanOut,
    RunSource,
    RunWorkflow,
    backfill_for,
)
from headwater.domain.errors import Conflict, NotFound
from headwater.domain.models import Principal, Source, StoredEvent
from headwater.domain.routing import (
    FAN_OUT_BYTES,
    INLINE_DELIVERIES,
    MAX_HOPS,
    Delivery,
    Routed,
    Subscription,
    carried,
    delivery_key,
    event_weight,
    fan_out_parts,
    routed_key,
)
from headwater.domain.workflows import Workflow
from headwater.ports import Task, UnitOfWork, UnitOfWorkFactory
from headwater.services.clock import now_ms
from headwater.services.events import summary
from headwater.services.runs import Runs
from headwater.services.sources import Sources
from headwater.services.subscriptions import Subscriptions
from headwater.settings import Settings

log = logging.getLogger("headwater.routing")


def for_commit(subscriptions: Subscriptions, uow: UnitOfWork, emitter_id: str, namespace: str, created_at: int,
               events: list[StoredEvent], hops: int) -> Routed:
    """What a run's commit writes for its events (`uow`: the run's own unit of work, for
    reading subscriptions). A channel only webhooks listen on gets its deliveries right there
    (their first attempts: one DeliverFirstAttempts for the commit), while the commit's
    deliveries stay within INLINE_DELIVERIES and FAN_OUT_BYTES; any other channel with a
    subscriber a FanOut per part. A function of the subscriptions alone, so Runs is given it at
    construction (Routing itself is built on Runs)."""
    by_channel: dict[str, list[StoredEvent]] = defaultdict(list)
    for event in events:
        by_channel[event.channel].append(event)
    routed = Routed()
    room, size = INLINE_DELIVERIES, FAN_OUT_BYTES
    first: list[str] = []
    for channel, listened in by_channel.items():
        subs = subscriptions.matching(namespace, emitter_id, channel, created_at, uow)
        if not subs:
            continue
        webhooks = list(dict.fromkeys(s.listener_id for s in subs))  # a glob and an id may name one twice
        weight = len(webhooks) * sum(event_weight(e) for e in listened)
        if (hops < MAX_HOPS and all(w.startswith("wh_") for w in webhooks) and not any(s.backfilling for s in subs)
                and len(webhooks) * len(listened) <= room and weight <= size):
            at = now_ms()
            made = [Delivery(delivery_key(webhook_id, emitter_id, event.id), webhook_id, emitter_id, event.id,
                             summary(event, expand=True), created_at_ms=at)
                    for webhook_id in webhooks for event in listened]
            routed.deliveries += made
            first += [d.id for d in made]
            room, size = room - len(made), size - weight
            continue
        routed.commands += [FanOut(emitter_id, namespace, channel, tuple(e.id for e in part), hops,
                                   events=tuple(carried(e) for e in part))
                            for part in fan_out_parts(listened)]
    if first:
        routed.commands.append(DeliverFirstAttempts(tuple(first), namespace))
    return routed


class Routing:
    def __init__(self, uow: UnitOfWorkFactory, subscriptions: Subscriptions, sources: Sources, runs: Runs,
                 settings: Settings) -> None:
        self.uow = uow
        self.subscriptions = subscriptions
        self.sources = sources
        self.runs = runs
        self.settings = settings

    def redeliver(self, principal: Principal, source_id: str, event_id: str, channel: str) -> None:
        """POST /sources/{id}/events/{event_id}/redeliver: the event again, to today's subscribers."""
        source = self.sources.get(principal, source_id)
        with self.uow() as uow:
            event = uow.events.get(source_id, channel, event_id)
            if event is None:
                raise NotFound(f"No retained event {event_id} on channel {channel!r} of source {source_id}.")
            uow.outbox.add(FanOut(source.id, source.namespace, channel, (event_id,), 0, secrets.token_hex(8),
                                  events=(carried(event),)))
            uow.commit()

    def fan_out(self, tasks: list[Task], _: object = None) -> list[int]:
        """FanOut handler: how many (listener, event) pairs each routed."""
        return [self._fan_out(task.command) for task in tasks]  # type: ignore[arg-type]

    def _fan_out(self, command: FanOut) -> int:
        with self.uow(readonly=True) as uow:
            emitter: Source | Workflow | None = (uow.sources.get(command.emitter_id)
                                                 if command.emitter_id.startswith("dc_")
                                                 else uow.workflows.get(command.emitter_id))
            events = ([StoredEvent(**e) for e in command.events] if command.events else
                      [e for e in (uow.events.get(command.emitter_id, command.channel, i) for i in command.event_ids)
                       if e is not None])
        if emitter is None or not events:
            return 0
        subs = self.subscriptions.matching(emitter.namespace, emitter.id, command.channel, emitter.created_at)
        if not subs:
            return 0
        if command.hops >= MAX_HOPS:
            if isinstance(emitter, Source):
                self.runs.fail(emitter, None, "HOP_LIMIT", f"Events of {emitter.id} went through {command.hops} "
                               f"subscriptions in a row (a loop?); they were not routed further.")
            else:
                log.warning("events of %s not routed further after %d hops", emitter.id, command.hops)
            return 0
        held = {sub.listener_id: sub for sub in subs if sub.backfilling}
        routed = 0
        for sub in held.values():
            routed += self._hold(sub, events, command)
        for sub in subs:
            if sub.listener_id in held:
                continue  # a glob naming it too: its events wait behind the backfill all the same
            for event in events:
                routed += self.route(sub.listener_id, emitter.id, event, command.hops, command.namespace,
                                     command.nonce)
        return routed

    def _hold(self, sub: Subscription, events: list[StoredEvent], command: FanOut) -> int:
        """New events for a listener whose backfill is not over: behind it, in its lane."""
        with self.uow() as uow:
            uow.outbox.add(backfill_for(sub.listener_id)(sub.id, sub.namespace, sub.emitter_id, sub.listener_id,
                                                         sub.event_name, tuple(carried(e) for e in events),
                                                         command.hops, command.nonce))
            uow.commit()
        return len(events)

    def route(self, listener_id: str, emitter_id: str, event: StoredEvent, hops: int, namespace: str,
              nonce: str | None = None, attempt_after_s: float = 0.0) -> int:
        """The event made the listener's own durable work, once (its key says so); 0 when an
        earlier routing made it. `attempt_after_s`: a webhook delivery's first attempt is queued
        that late (a backfill makes it itself, in order: the queued one is its backstop, and finds
        it made)."""
        event_key = f"{event.id}:{nonce}" if nonce else event.id
        try:
            with self.uow() as uow:
                if listener_id.startswith("dc_"):
                    uow.outbox.add(RunSource(listener_id, event.event, self.settings.http_timeout_ms, "subscription",
                                             route_key=routed_key(emitter_id, event_key, listener_id),
                                             hops=hops + 1, namespace=namespace))
                elif listener_id.startswith("wh_"):
                    delivery = Delivery(delivery_key(listener_id, emitter_id, event_key), listener_id, emitter_id,
                                        event.id, summary(event, expand=True), created_at_ms=now_ms())
                    uow.deliveries.add(delivery)
                    uow.outbox.add(DeliverWebhook(delivery.id, attempt=0, namespace=namespace), delay_s=attempt_after_s)
                else:
                    uow.outbox.add(RunWorkflow(listener_id, event.event, routed_key(emitter_id, event_key, listener_id),
                                               hops + 1, namespace))
                uow.commit()
        except Conflict as e:
            if e.field != "delivery":
                raise
            return 0  # made by an earlier fan-out of the same event
        return 1
