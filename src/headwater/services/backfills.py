"""Late listeners backfilled (POST /subscriptions?replay=retained, DECISIONS Extensions).

A subscription made with replay commits with a Backfill command and `backfilling` set. While it
is set, fan-out gives the listener no new event directly: it commits a Backfill carrying them
(held) in the subscription's lane, behind the backfill (services/routing.py). The backfill reads
the emitter's retained events of the channel (at most RETAINED_PER_CHANNEL), routes them to the
listener oldest first, then clears `backfilling`; the held events go after it. So the listener
has the retained events first, in order, then the new ones.

- Once: each event goes to the listener under the key fan-out uses (a webhook delivery's id, a
  run's route key), so one routed twice (a backfill run again after a crash, an event both
  retained and held) is made once. A subscription made again is not new: no second backfill.
- In order: a source's or workflow's runs are queued one commit each, oldest first, in the
  listener's own lane (runs of one lane go in commit order); a webhook's first attempts are made
  here one after the other, each answered (or timed out) before the next is sent. A failed
  attempt is retried on the webhook's schedule, like any delivery's, meanwhile the next go.
- Bounded: a webhook backfill that has sent for BUDGET_S gives its lane back (TryLater) and goes
  on where it was (the deliveries made are recorded); held events wait at most HOLD_S in all for
  a backfill that does not end (one that failed for good), then go anyway, and a delivery it made
  has its first attempt queued BACKSTOP_S later as well (a no-op once the backfill made it).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from headwater.domain.commands import Backfill, DeliverWebhook
from headwater.domain.errors import Conflict
from headwater.domain.events import RETAINED_PER_CHANNEL, EventId
from headwater.domain.models import StoredEvent
from headwater.domain.routing import Subscription, delivery_key
from headwater.ports import Task, TryLater, UnitOfWorkFactory
from headwater.services.routing import Routing

log = logging.getLogger("headwater.backfills")

BUDGET_S = 60.0  # a webhook backfill's sending per turn (the AWS webhook function's timeout is 120 s)
HOLD_S = 900.0  # how long held events wait for their backfill, in all
HOLD_RETRY_S = 1.0  # how often they look again
# A webhook delivery the backfill made has its first attempt queued this late too, in case the
# backfill never gets to it (its retries used up): that one finds the attempt made, or makes it.
BACKSTOP_S = 900.0  # SQS's longest delay

Deliver = Callable[[list[Task], Any], Any]


class Backfills:
    def __init__(self, uow: UnitOfWorkFactory, routing: Routing, deliver: Deliver,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`deliver`: the DeliverWebhook handler (one attempt of each task's delivery)."""
        self.uow = uow
        self.routing = routing
        self.deliver = deliver
        self.clock = clock

    def backfill(self, tasks: list[Task], _: object = None) -> list[int]:
        """Backfill handler (both types): how many events each routed."""
        return [self._one(task) for task in tasks]

    def _one(self, task: Task) -> int:
        command: Backfill = task.command  # type: ignore[assignment]
        sub = self._subscription(command)
        if sub is None:
            return 0  # unsubscribed meanwhile: nothing more goes to it
        if command.events:
            if sub.backfilling and not self._waited_out(task):
                raise TryLater(f"events for {command.listener_id} wait behind its backfill", HOLD_RETRY_S)
            return self._route(command, [StoredEvent(**e) for e in command.events])
        if not sub.backfilling:
            return 0  # done already: this is a repeat
        with self.uow(readonly=True) as uow:
            retained = uow.events.newest(command.emitter_id, command.channel, RETAINED_PER_CHANNEL)
        retained.sort(key=lambda e: EventId.parse(e.id))
        routed = self._route(command, retained)
        with self.uow() as uow, contextlib.suppress(Conflict):  # unsubscribed meanwhile: nothing to finish
            uow.subscriptions.finish_backfill(sub.id)
            uow.commit()
        # A run that read the subscriptions before this one's commit and committed its events after
        # the read above (DynamoDB reads outside the transaction) routed none here: taken now.
        last = EventId.parse(retained[-1].id) if retained else EventId(0, 0)
        with self.uow(readonly=True) as uow:
            late = uow.events.after(command.emitter_id, command.channel, last, RETAINED_PER_CHANNEL)
        return routed + self._route(command, late, made_here_only=True)

    def _subscription(self, command: Backfill) -> Subscription | None:
        with self.uow(readonly=True) as uow:
            return next((s for s in uow.subscriptions.for_namespace(command.namespace)
                         if s.id == command.subscription_id), None)

    def _waited_out(self, task: Task) -> bool:
        if task.deferred_since is None or time.time() - task.deferred_since < HOLD_S:
            return False
        log.warning("events held for a backfill waited %.0f s for it; they go now", time.time() - task.deferred_since)
        return True

    def _route(self, command: Backfill, events: list[StoredEvent], made_here_only: bool = False) -> int:
        """`made_here_only`: a webhook delivery found made is left to whoever made it (after the
        backfill is over, fan-out routes directly and queues its attempt)."""
        webhook = command.listener_id.startswith("wh_")
        deadline = self.clock() + BUDGET_S
        routed = 0
        for event in events:
            if webhook and self.clock() > deadline:
                raise TryLater(f"the backfill of {command.listener_id} goes on in its next turn", 0.0)
            made = self.routing.route(command.listener_id, command.emitter_id, event, command.hops,
                                      command.namespace, command.nonce, BACKSTOP_S if webhook else 0.0)
            if webhook and (made or not made_here_only):
                self._attempt(command, event)
            routed += made
        return routed

    def _attempt(self, command: Backfill, event: StoredEvent) -> None:
        """The delivery's first attempt, unless made already (the handler finds it recorded)."""
        event_key = f"{event.id}:{command.nonce}" if command.nonce else event.id
        delivery_id = delivery_key(command.listener_id, command.emitter_id, event_key)
        attempt = DeliverWebhook(delivery_id, attempt=0, namespace=command.namespace)
        self.deliver([Task(f"{delivery_id}:backfill", attempt)], None)
