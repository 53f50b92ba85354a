"""Where events go (SPEC Subscriptions, Webhooks; DECISIONS Webhook deliveries). No I/O.

A subscription routes an emitter's channel to a listener: a source (`dc_`), a workflow (`p_`) or
a webhook (`wh_`). Its emitter may be a glob, `dc_*` or `p_*`: every source or workflow of the
subscription's namespace, present and future. A webhook delivery is retried on a schedule with
jitter, honours `Retry-After`, and records every attempt.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Literal

from headwater.domain.commands import Command
from headwater.domain.events import DEFAULT_CHANNEL
from headwater.domain.models import StoredEvent

GLOBS = {"dc_*": "dc_", "p_*": "p_"}
REPLAYS = ("retained",)  # what POST /subscriptions?replay= may ask for
LISTENER_PREFIXES = ("dc_", "p_", "wh_")
FAN_OUT_BYTES = 128 * 1024  # the events one FanOut carries, at most (one larger event goes alone)
# A run's commit writes its webhook deliveries itself (no FanOut) when only webhooks listen, up to
# this many deliveries of at most FAN_OUT_BYTES together: one transaction instead of two.
INLINE_DELIVERIES = 8
MAX_HOPS = 8  # A -> B -> A ... stops here, with a `$errors` event on the emitter that would go on
DELIVERY_TIMEOUT_S = 15.0
DEFAULT_RETRY_SCHEDULE = (5, 300, 1800, 7200, 18000, 36000, 36000)


@dataclass
class Subscription:
    id: str
    namespace: str
    emitter_id: str  # an id, or a glob of GLOBS
    listener_id: str
    event_name: str = DEFAULT_CHANNEL
    created_at: int = 0
    auto: bool = False  # an auto-subscription: every source and workflow created after it
    # made with `replay=retained` and its backfill not over yet: fan-out holds the emitter's new
    # events for the listener behind the retained ones (services/backfills.py)
    backfilling: bool = False

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "emitter_id": self.emitter_id, "listener_id": self.listener_id,
                "event_name": self.event_name}

    def matches(self, emitter_id: str, namespace: str, channel: str, emitter_created_at: int) -> bool:
        if channel != self.event_name or namespace != self.namespace or emitter_id == self.listener_id:
            return False
        if self.auto:
            return emitter_id.startswith(("dc_", "p_")) and emitter_created_at >= self.created_at
        prefix = GLOBS.get(self.emitter_id)
        if prefix is None:
            return emitter_id == self.emitter_id
        return emitter_id.startswith(prefix)


def subscription_key(namespace: str, emitter_id: str, listener_id: str, event_name: str, auto: bool = False) -> str:
    """Duplicates are idempotent: the same (emitter, listener, channel) is one subscription."""
    raw = "\0".join((namespace, emitter_id, listener_id, event_name, "auto" if auto else ""))
    return "sub_" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def delivery_key(webhook_id: str, emitter_id: str, event_id: str) -> str:
    """One delivery per (webhook, event), whatever the number of fan-outs of that event."""
    raw = "\0".join((webhook_id, emitter_id, event_id))
    return "msg_" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def routed_key(emitter_id: str, event_id: str, listener_id: str) -> str:
    """What a listener's run remembers, so an event that reaches it twice runs it once."""
    return f"route:{emitter_id}:{event_id}:{listener_id}"


@dataclass
class Webhook:
    id: str
    namespace: str
    user_id: str
    url: str
    signing_secret: str  # stored encrypted (Secrets) by the service; plain `whsec_...` in memory
    name: str | None = None
    description: str | None = None
    active: bool = True
    created_at: int = 0
    updated_at: int = 0
    seq: int = 0

    def to_api(self, include_user: bool = False) -> dict[str, Any]:
        data = {"id": self.id, "user_id": self.user_id, "name": self.name, "description": self.description,
                "url": self.url, "active": self.active, "created_at": self.created_at,
                "updated_at": self.updated_at}
        if not include_user:
            del data["user_id"]
        return data


@dataclass
class Attempt:
    at_ms: int
    status: int | None  # the receiver's status code; None when no answer came
    error: str | None = None
    duration_ms: int = 0


DeliveryStatus = Literal["pending", "succeeded", "failed", "dead"]


@dataclass
class Delivery:
    """One event sent to one webhook: `id` is also the `webhook-id` header, the same on retries."""

    id: str
    webhook_id: str
    emitter_id: str
    event_id: str
    payload: dict[str, Any]  # the event summary item with the full event
    status: DeliveryStatus = "pending"
    attempts: list[Attempt] = field(default_factory=list)
    next_at: float | None = None
    created_at_ms: int = 0
    version: int = 0

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "webhook_id": self.webhook_id, "emitter_id": self.emitter_id,
                "event_id": self.event_id, "status": self.status,
                "next_attempt_at": None if self.next_at is None else int(self.next_at),
                "created_at_ms": self.created_at_ms,
                "attempts": [{"at_ms": a.at_ms, "status": a.status, "error": a.error, "duration_ms": a.duration_ms}
                             for a in self.attempts]}


def parse_schedule(text: str) -> tuple[int, ...]:
    """`HEADWATER_WEBHOOK_RETRY_SCHEDULE`: seconds, comma-separated."""
    try:
        schedule = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"webhook retry schedule {text!r} is not comma-separated seconds") from None
    if any(s < 0 for s in schedule):
        raise ValueError("webhook retry delays must not be negative")
    return schedule


def retry_delay(failures: int, schedule: tuple[int, ...], retry_after_s: float | None,
                rng: random.Random | None = None) -> float | None:
    """Seconds until the next attempt after `failures` failed ones; None when the schedule is
    used up (the delivery is dead). Jitter of up to a tenth spreads retries of one outage;
    `Retry-After` is honoured when it asks for longer."""
    if failures > len(schedule):
        return None
    base = float(schedule[failures - 1])
    jitter = (rng or random).uniform(0, base / 10)
    return max(base + jitter, retry_after_s or 0.0)


def outcome_of(status: int | None) -> DeliveryStatus:
    if status is not None and 200 <= status < 300:
        return "succeeded"
    return "failed"


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """`Retry-After` in seconds or as an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    from email.utils import parsedate_to_datetime
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now_s)
    except (TypeError, ValueError):
        return None


@dataclass
class Routed:
    """What a run's commit writes for its events' listeners: commands (FanOut, DeliverWebhook) and
    the deliveries it makes itself."""

    commands: list[Command] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)


def carried(event: StoredEvent) -> dict[str, Any]:
    """An event as a FanOut carries it (StoredEvent(**carried(e)) gives it back)."""
    return {"id": event.id, "indexed_at_ms": event.indexed_at_ms, "event": event.event, "metadata": event.metadata,
            "channel": event.channel}


def fan_out_parts(events: list[StoredEvent], limit: int = FAN_OUT_BYTES) -> list[list[StoredEvent]]:
    """Consecutive events in groups of at most `limit` bytes of JSON, so that each FanOut fits a
    queue message and a store item; an event over the limit alone is a group of its own."""
    parts: list[list[StoredEvent]] = []
    size = limit
    for event in events:
        weight = event_weight(event)
        if size + weight > limit:
            parts.append([])
            size = 0
        parts[-1].append(event)
        size += weight
    return parts


def event_weight(event: StoredEvent) -> int:
    """About the bytes of JSON an event takes in a message or an item."""
    weight = len(event.encoded) if event.encoded is not None else len(json.dumps(event.event, default=str))
    return weight + len(json.dumps(event.metadata, default=str))
