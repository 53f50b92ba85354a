"""Webhooks and their deliveries (SPEC Webhooks, DECISIONS Webhook deliveries).

A delivery is one event for one webhook; each attempt is the DeliverWebhook command, run by the
task queue. An attempt that fails queues the next one with the schedule's delay (the queue's own
delay: no thread sleeps), so pending retries survive a restart; the delivery record, its
attempts and the next command commit together, conditionally on the delivery's version.

A run's commit that makes deliveries makes one DeliverFirstAttempts for all of them (one outbox
item), whose handler makes their first attempts side by side. Where the queue handles a commit's
tasks at once (the AWS run consumer), they are made right after the run's commit by the `now`
forms (`deliver_first_now`, `deliver_now`), unless a webhook was slow or failing in this process
lately: then the command goes to the queue. Retries always go through the queue.

Each DeliverWebhook carries the number of its attempt, so a message delivered twice finds its
attempt recorded on the delivery and does nothing (no idempotency record needed on AWS). Two
copies handled at the same instant can both send (both read the delivery before either recorded
the attempt); the second to save finds the attempt recorded and records nothing more. Receivers
see the same `webhook-id` twice, which Standard Webhooks tells them to deduplicate on.
"""

from __future__ import annotations

import base64
import json
import secrets as random_secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook as Signer

from headwater.domain import ids
from headwater.domain.commands import DeliverFirstAttempts, DeliverWebhook
from headwater.domain.errors import BadRequest, Conflict, NotFound
from headwater.domain.models import Principal
from headwater.domain.pagination import Page, PageRequest
from headwater.domain.routing import (
    Attempt,
    Delivery,
    Webhook,
    outcome_of,
    parse_retry_after,
    parse_schedule,
    retry_delay,
)
from headwater.domain.urls import check_http_url
from headwater.ports import Secrets, Task, UnitOfWorkFactory, WebhookSender
from headwater.services.accounts import Accounts
from headwater.services.cache import TtlCache
from headwater.services.clock import now_ms, now_s
from headwater.services.contention import retry_on_conflict
from headwater.services.subscriptions import Subscriptions
from headwater.settings import Settings

_MAX_ATTEMPTS = 20
SLOW_MS = 1000  # an attempt slower than this (or failed) leaves the webhook's next ones to the queue...
SLOW_FOR_S = 300.0  # ...for this long, in this process
_LEFT = "left to the queue"


class Webhooks:
    def __init__(self, uow: UnitOfWorkFactory, accounts: Accounts, subscriptions: Subscriptions,
                 sender: WebhookSender, secrets: Secrets, settings: Settings) -> None:
        self.uow = uow
        self.accounts = accounts
        self.subscriptions = subscriptions
        self.sender = sender
        self.secrets = secrets
        self.schedule = parse_schedule(settings.webhook_retry_schedule)
        self._slow: TtlCache[str, bool] = TtlCache(SLOW_FOR_S)

    # the resource

    def create(self, principal: Principal, url: str | None, name: str | None, description: str | None,
               org_id: str | None) -> tuple[Webhook, str]:
        """The new webhook and its `whsec_` signing secret, which is shown this once."""
        if not url:
            raise BadRequest("`url` is required.", {"url": ["required"]})
        problem = check_http_url(url)
        if problem:
            raise BadRequest(f"`url` {problem}.", {"url": [problem]})
        namespace = self.accounts.namespace(principal, org_id)
        secret = "whsec_" + base64.b64encode(random_secrets.token_bytes(32)).decode()
        ts = now_s()
        webhook = Webhook(ids.new_id("webhook"), namespace, principal.user.id, url, self.secrets.encrypt(secret),
                          name, description, True, ts, ts)
        with self.uow() as uow:
            uow.webhooks.add(webhook)
            uow.commit()
        return webhook, secret

    def get(self, principal: Principal, webhook_id: str) -> Webhook:
        with self.uow(readonly=True) as uow:
            webhook = uow.webhooks.get(webhook_id)
        if webhook is None or not principal.can_see(webhook.namespace):
            raise NotFound(f"No webhook {webhook_id}.")
        return webhook

    def listing(self, principal: Principal, org_id: str | None, page: PageRequest) -> Page[Webhook]:
        namespace = self.accounts.namespace(principal, org_id)
        with self.uow(readonly=True) as uow:
            return uow.webhooks.list(namespace, page)

    def delete(self, principal: Principal, webhook_id: str) -> None:
        self.get(principal, webhook_id)
        with self.uow() as uow:
            uow.webhooks.remove(webhook_id)
            uow.subscriptions.remove_naming(webhook_id)
            uow.commit()

    def deliveries(self, principal: Principal, webhook_id: str, page: PageRequest) -> Page[Delivery]:
        self.get(principal, webhook_id)
        with self.uow(readonly=True) as uow:
            return uow.deliveries.for_webhook(webhook_id, page)

    def retry(self, principal: Principal, webhook_id: str, delivery_id: str) -> Delivery:
        """POST .../deliveries/{id}/retry: one more attempt now, even for a dead delivery."""
        webhook = self.get(principal, webhook_id)
        with self.uow() as uow:
            delivery = uow.deliveries.get(delivery_id)
            if delivery is None or delivery.webhook_id != webhook_id:
                raise NotFound(f"No delivery {delivery_id} of webhook {webhook_id}.")
            uow.outbox.add(DeliverWebhook(delivery_id, manual=True, namespace=webhook.namespace))
            uow.commit()
        return delivery

    # sending

    def deliver(self, tasks: list[Task], _: object = None) -> list[str | None]:
        """DeliverWebhook handler: the delivery's status after each attempt (None: nothing to do)."""
        return [self._attempt(task.command) for task in tasks]  # type: ignore[arg-type]

    def deliver_first(self, tasks: list[Task], _: object = None) -> list[list[str | None]]:
        """DeliverFirstAttempts handler: each commit's first attempts, side by side (one slow
        receiver does not hold up the others); their statuses."""
        return [self._first_attempts(task.command) for task in tasks]  # type: ignore[arg-type]

    def deliver_first_now(self, tasks: list[Task], _: object = None) -> list[list[str | None]] | None:
        """Its `now` form (see `deliver_now`): the attempts whose webhooks were not slow or failing
        here lately are made; if any was left, the command goes to the queue, whose handler finds
        the attempts made here recorded and makes the rest."""
        done = [self._first_attempts(task.command, at_once=True) for task in tasks]  # type: ignore[arg-type]
        return None if any(status is _LEFT for statuses in done for status in statuses) else done

    def _first_attempts(self, command: DeliverFirstAttempts, at_once: bool = False) -> list[str | None]:
        attempts = [DeliverWebhook(delivery_id, attempt=0, namespace=command.namespace)
                    for delivery_id in command.delivery_ids]
        if len(attempts) == 1:
            return [self._attempt(attempts[0], at_once)]
        # threads of this call's own (a commit has at most INLINE_DELIVERIES): a pool shared by every
        # tenant's commits would let one tenant's slow receivers hold up another's attempts
        with ThreadPoolExecutor(len(attempts), thread_name_prefix="webhook-attempt") as pool:
            return list(pool.map(lambda attempt: self._attempt(attempt, at_once), attempts))

    def deliver_now(self, tasks: list[Task], _: object = None) -> list[str | None] | None:
        """The handler's `now` form, for attempts made by the process that committed them (on AWS,
        the run consumer right after a run's commit: no queue round trip, no other invocation).
        None leaves them to the queue when a webhook was slow or failing here lately, so that one
        slow receiver does not hold up its source's runs. A task attempted before another is
        left then is a repeat for the queue, which finds its attempt recorded."""
        statuses = []
        for task in tasks:
            status = self._attempt(task.command, at_once=True)  # type: ignore[arg-type]
            if status is _LEFT:
                return None
            statuses.append(status)
        return statuses

    def _attempt(self, command: DeliverWebhook, at_once: bool = False) -> str | None:
        with self.uow(readonly=True) as uow:
            delivery = uow.deliveries.get(command.delivery_id)
            webhook = uow.webhooks.get(delivery.webhook_id) if delivery else None
        if delivery is None or webhook is None:
            return None
        if not command.manual and (delivery.status in ("succeeded", "dead") or not webhook.active):
            return None
        if not command.manual and command.attempt is not None and len(delivery.attempts) > command.attempt:
            return None  # a repeat of a message whose attempt the delivery records already
        if not command.manual and delivery.next_at and delivery.next_at > time.time() + 1:
            return None  # a duplicate of an earlier attempt's command: its own turn comes later
        if at_once and self._slow.get(webhook.id)[0]:
            return _LEFT
        body = json.dumps(delivery.payload, separators=(",", ":"))
        stamp = datetime.now(UTC)
        signature = Signer(self.secrets.decrypt(webhook.signing_secret)).sign(delivery.id, stamp, body)
        headers = {"content-type": "application/json", "webhook-id": delivery.id,
                   "webhook-timestamp": str(int(stamp.timestamp())), "webhook-signature": signature,
                   "user-agent": "Headwater-Webhooks"}
        result = self.sender.post(webhook.url, body.encode(), headers)
        attempt = Attempt(now_ms(), result.status, result.error, result.duration_ms)
        if outcome_of(result.status) != "succeeded" or result.duration_ms > SLOW_MS:
            self._slow.put(webhook.id, True)
        return self._record(delivery, webhook, attempt, parse_retry_after(result.retry_after, time.time()),
                            None if command.manual else command.attempt)

    def _record(self, delivery: Delivery, webhook: Webhook, attempt: Attempt, retry_after: float | None,
                number: int | None) -> str:
        """Saves the attempt on the delivery as it was read before sending (no read before the first
        try: the save is conditional on its version); on a lost race, on the delivery read again,
        unless that already records attempt `number` (another copy of the message sent it too)."""
        def save(tries: int) -> str:
            with self.uow() as uow:
                current = delivery
                if tries:
                    current = uow.deliveries.get(delivery.id) or delivery
                    if number is not None and len(current.attempts) > number:
                        return current.status
                attempts = [*current.attempts, attempt]
                status = outcome_of(attempt.status)
                delay = None
                if attempt.status == 410:
                    status = "dead"  # Gone: the receiver asks for no more, ever
                    uow.webhooks.update(replace(webhook, active=False, updated_at=now_s()))
                elif status == "failed":
                    failures = sum(1 for a in attempts if outcome_of(a.status) != "succeeded")
                    delay = retry_delay(failures, self.schedule, retry_after)
                    if delay is None:
                        status = "dead"
                updated = replace(current, attempts=attempts, status=status,
                                  next_at=time.time() + delay if delay is not None else None)
                uow.deliveries.save(updated, current.version)
                if delay is not None:
                    uow.outbox.add(DeliverWebhook(delivery.id, attempt=len(attempts), namespace=webhook.namespace),
                                   delay_s=delay)
                uow.commit()
            return status

        return retry_on_conflict(save, _MAX_ATTEMPTS,
                                 lambda: Conflict(f"delivery {delivery.id} kept changing", field="version"))
