"""Subscriptions and auto-subscriptions (SPEC Subscriptions): who hears an emitter's channel.

The emitter and the listener must be the caller's or one of their orgs'; a subscription lives in
its emitter's namespace (for a glob, the caller's or the `org_id`'s), which is where fan-out
looks for it. Creating one twice is the same subscription (its id derives from what it routes).

`replay=retained` (DECISIONS Extensions): a new subscription of one emitter commits with its
backfill (domain.commands.Backfill), which delivers the emitter's retained events to the listener
first (services/backfills.py). The same subscription made again, with replay or without, is not new
and replays nothing.
"""

from __future__ import annotations

import contextlib

from headwater.domain.commands import backfill_for
from headwater.domain.errors import BadRequest, Invalid, NotFound
from headwater.domain.events import DEFAULT_CHANNEL, RESERVED_CHANNELS
from headwater.domain.models import Principal
from headwater.domain.routing import GLOBS, LISTENER_PREFIXES, REPLAYS, Subscription, subscription_key
from headwater.ports import UnitOfWork, UnitOfWorkFactory
from headwater.services.accounts import Accounts
from headwater.services.clock import now_s


def _required(value: str | None, field: str) -> str:
    if not value:
        raise BadRequest(f"`{field}` is required.", {field: ["required"]})
    return value


def _check_replay(replay: str | None, emitter_id: str) -> None:
    if replay is None:
        return
    if replay not in REPLAYS:
        raise Invalid(f"`replay` must be {' or '.join(REPLAYS)} (the emitter's retained events first), "
                      f"not {replay!r}.", {"replay": [f"must be {' or '.join(REPLAYS)}"]})
    if emitter_id in GLOBS:
        raise Invalid("`replay` needs one emitter: a source (dc_) or workflow (p_) id, not a glob.",
                      {"replay": ["not with a glob emitter_id"]})


class Subscriptions:
    def __init__(self, uow: UnitOfWorkFactory, accounts: Accounts) -> None:
        self.uow = uow
        self.accounts = accounts

    def _namespace_of(self, principal: Principal, resource_id: str, field: str) -> str:
        """The namespace of a source, workflow or webhook the caller may see (404 otherwise)."""
        with self.uow(readonly=True) as uow:
            if resource_id.startswith("dc_"):
                found = uow.sources.get(resource_id)
            elif resource_id.startswith("wh_"):
                found = uow.webhooks.get(resource_id)  # type: ignore[assignment]
            elif resource_id.startswith("p_"):
                found = uow.workflows.get(resource_id)  # type: ignore[assignment]
            else:
                found = None
        if found is None or not principal.can_see(found.namespace):
            raise NotFound(f"No {field.split('_')[0]} {resource_id}.")
        return found.namespace

    def _listener(self, principal: Principal, listener_id: str | None) -> str:
        listener_id = _required(listener_id, "listener_id")
        if not listener_id.startswith(LISTENER_PREFIXES):
            raise BadRequest("`listener_id` must be a source (dc_), workflow (p_) or webhook (wh_) id.",
                             {"listener_id": ["must start with dc_, p_ or wh_"]})
        self._namespace_of(principal, listener_id, "listener_id")
        return listener_id

    def subscribe(self, principal: Principal, emitter_id: str | None, listener_id: str | None,
                  event_name: str | None, org_id: str | None, replay: str | None = None) -> Subscription:
        emitter_id = _required(emitter_id, "emitter_id")
        _check_replay(replay, emitter_id)
        listener_id = self._listener(principal, listener_id)
        if emitter_id in GLOBS:
            namespace = self.accounts.namespace(principal, org_id)
        elif emitter_id.startswith(("dc_", "p_")):
            namespace = self._namespace_of(principal, emitter_id, "emitter_id")
        else:
            raise BadRequest("`emitter_id` must be a source (dc_) or workflow (p_) id, or dc_* or p_*.",
                             {"emitter_id": ["must be dc_..., p_..., dc_* or p_*"]})
        channel = event_name or DEFAULT_CHANNEL
        sub = Subscription(subscription_key(namespace, emitter_id, listener_id, channel), namespace, emitter_id,
                           listener_id, channel, now_s(), backfilling=replay is not None)
        return self._add(sub)

    def auto_subscribe(self, principal: Principal, event_name: str | None, listener_id: str | None,
                       org_id: str | None) -> Subscription:
        channel = _required(event_name, "event_name")
        if channel not in RESERVED_CHANNELS:
            raise BadRequest("`event_name` must be $errors or $logs.", {"event_name": ["must be $errors or $logs"]})
        listener_id = self._listener(principal, listener_id)
        namespace = self.accounts.namespace(principal, org_id)
        sub = Subscription(subscription_key(namespace, "*", listener_id, channel, auto=True), namespace, "*",
                           listener_id, channel, now_s(), auto=True)
        return self._add(sub)

    def _add(self, sub: Subscription) -> Subscription:
        with self.uow() as uow:
            existing = next((s for s in uow.subscriptions.for_namespace(sub.namespace) if s.id == sub.id), None)
            if existing is not None:
                return existing
            uow.subscriptions.add(sub)
            if sub.backfilling:
                uow.outbox.add(backfill_for(sub.listener_id)(sub.id, sub.namespace, sub.emitter_id, sub.listener_id,
                                                             sub.event_name))
            uow.commit()
        return sub

    def unsubscribe(self, principal: Principal, emitter_id: str | None, listener_id: str | None,
                    event_name: str | None, org_id: str | None) -> None:
        emitter_id = _required(emitter_id, "emitter_id")
        listener_id = _required(listener_id, "listener_id")
        channel = event_name or DEFAULT_CHANNEL
        namespaces = {self.accounts.namespace(principal, org_id)}
        if emitter_id.startswith(("dc_", "p_")) and emitter_id not in GLOBS:
            with contextlib.suppress(NotFound):  # a deleted emitter's subscriptions went with it
                namespaces.add(self._namespace_of(principal, emitter_id, "emitter_id"))
        removed = False
        with self.uow() as uow:
            for namespace in namespaces:
                # `*` names an auto-subscription (what POST /auto_subscriptions made).
                key = subscription_key(namespace, emitter_id, listener_id, channel, auto=emitter_id == "*")
                removed = uow.subscriptions.remove(key) or removed
            uow.commit()
        if not removed:
            raise NotFound("No such subscription.")

    def listing(self, principal: Principal, org_id: str | None) -> list[Subscription]:
        namespace = self.accounts.namespace(principal, org_id)
        with self.uow(readonly=True) as uow:
            return uow.subscriptions.for_namespace(namespace)

    def matching(self, namespace: str, emitter_id: str, channel: str, created_at: int,
                 uow: UnitOfWork | None = None) -> list[Subscription]:
        """Fan-out's lookup, read at each commit (one indexed query) rather than cached, so a
        subscription made by any process or machine counts from its commit on. `uow`: read
        through a unit of work already open (a run's commit) rather than a new one."""
        if uow is not None:
            subs = uow.subscriptions.for_namespace(namespace)
        else:
            with self.uow(readonly=True) as fresh:
                subs = fresh.subscriptions.for_namespace(namespace)
        return [s for s in subs if s.matches(emitter_id, namespace, channel, created_at)]
