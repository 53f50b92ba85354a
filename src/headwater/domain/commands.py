"""Commands: background work as typed values (cosmicpython's commands), not kind strings.

Services write them to the unit of work's outbox; the adapters hand them to the task queue after
commit (SQLite rows locally, SQS messages on AWS) and the queue delivers each to its handler in
`services/`. `to_message` / `from_message` are the one wire form every queue uses.

`namespace`: the tenant (a user or org id) that owns the source, workflow or webhook the work is
for, set by whoever writes the command, so that the local queue can bound each tenant's share of
its workers; None in a command queued by an older version (its lane is then a tenant of its own).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, ClassVar

from headwater.domain.http_interface import body_left_out, with_body


@dataclass(frozen=True)
class Command:
    """`lane`: commands of one lane run one at a time, in order (a source's runs, say)."""

    name: ClassVar[str] = ""

    @property
    def lane(self) -> str | None:
        return getattr(self, "source_id", None) or getattr(self, "workflow_id", None)

    @property
    def tenant(self) -> str | None:
        return getattr(self, "namespace", None)


@dataclass(frozen=True)
class RunSource(Command):
    """Run a source once with `event` (an HTTP request, a timer tick, a manual run)."""

    name: ClassVar[str] = "run_source"
    source_id: str
    event: Any
    timeout_ms: int
    trigger: str  # http | timer | manual | subscription
    reserved_by: str | None = None  # the user whose free-tier cap admitted it at ingest ...
    reserved_day: str | None = None  # ... on this UTC day (a dropped run gives its place back there)
    # remembered instead of the task id, so it runs once: an event routed here, or a request whose
    # run starts before its task's commit gives it an id
    route_key: str | None = None
    hops: int = 0  # how many subscriptions the event went through to get here
    namespace: str | None = None
    rerun_of: str | None = None  # a run on record whose input this is (POST .../runs/{id}/rerun)
    # `event` as stored, once something encoded it: the queue's task row and the run's record both
    # keep that text, and a hot source's commit should not make it twice. Not in the message.
    _event_json: str | None = field(default=None, init=False, compare=False, repr=False)

    def event_json(self) -> str:
        """`event` as compact JSON, made on the first call only; a request's without its `body`,
        which `with_body` makes again from `bodyRaw` (so its bytes are not stored twice)."""
        text = self._event_json
        if text is None:
            stored = body_left_out(self.event) if self.trigger == "http" else None
            text = compact_json(self.event if stored is None else stored)
            object.__setattr__(self, "_event_json", text)  # a cache of a value that never changes
        return text


@dataclass(frozen=True)
class TimerTick(Command):
    """The scheduler's tick for a timer source that was due at `due_at` (Unix seconds)."""

    name: ClassVar[str] = "timer_tick"
    source_id: str
    due_at: float
    token: str | None = None  # the schedule it came from, for schedules that renew themselves
    namespace: str | None = None


@dataclass(frozen=True)
class SyncSchedule(Command):
    """Make the scheduler match the source as committed: set its timer, or remove it."""

    name: ClassVar[str] = "sync_schedule"
    source_id: str
    namespace: str | None = None


@dataclass(frozen=True)
class DeleteEvents(Command):
    """DELETE /sources/{id}/events: an inclusive range of one channel (None: every channel)."""

    name: ClassVar[str] = "delete_events"
    source_id: str
    channel: str | None = None
    start_id: str | None = None
    end_id: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class PurgeSource(Command):
    """After a source is deleted: its state, events and schedule go too."""

    name: ClassVar[str] = "purge_source"
    source_id: str
    namespace: str | None = None


@dataclass(frozen=True)
class FanOut(Command):
    """Committed events of one emitter's channel go to every matching subscriber. `nonce` makes a
    redelivery (POST .../redeliver) a new routing rather than a duplicate of the first. `events`
    are the events themselves as committed (domain.routing.carried): a channel keeps only its
    newest 100, and a busy one trims them before a late fan-out could read them back. Without
    them (a command queued by an older version) the events are read by id."""

    name: ClassVar[str] = "fan_out"
    emitter_id: str
    namespace: str
    channel: str
    event_ids: tuple[str, ...]
    hops: int = 0
    nonce: str | None = None
    events: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class DeliverWebhook(Command):
    """One attempt of a webhook delivery (its retries are this command again, delayed). `attempt`:
    how many attempts the delivery had recorded when this one was queued, so a repeat of it finds
    its attempt recorded and does nothing (None in a command queued by an older version)."""

    name: ClassVar[str] = "deliver_webhook"
    delivery_id: str
    manual: bool = False  # a retry asked for by the user: sent even when the delivery is dead
    attempt: int | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class DeliverFirstAttempts(Command):
    """The first attempts of the webhook deliveries one commit made: one outbox item for all of
    them rather than one each (on AWS, 3 write units a delivery). Each is DeliverWebhook's attempt
    0 (a repeat finds it recorded and does nothing); the retries are DeliverWebhook."""

    name: ClassVar[str] = "deliver_first_attempts"
    delivery_ids: tuple[str, ...]
    namespace: str | None = None


@dataclass(frozen=True)
class Backfill(Command):
    """A late listener's backfill (POST /subscriptions?replay=retained): the emitter's retained
    events of the channel, oldest first, delivered to the listener before any new one. With
    `events` (carried as a FanOut carries them), it is instead new events that fan-out held for the
    listener while its backfill was not over: delivered once it is. A subscription's backfill and
    the events held behind it share one lane, so they run one at a time, in commit order.
    `namespace`: the subscription's, which its deliveries count against as fan-out's do."""

    name: ClassVar[str] = "backfill"
    subscription_id: str
    namespace: str
    emitter_id: str
    listener_id: str
    channel: str
    events: tuple[dict[str, Any], ...] = ()
    hops: int = 0
    nonce: str | None = None

    @property
    def lane(self) -> str | None:
        return f"backfill:{self.subscription_id}"


@dataclass(frozen=True)
class BackfillWebhook(Backfill):
    """A Backfill whose listener is a webhook: its own type, so that on AWS it goes to the webhook
    queue, whose function may send and sign (a source's or workflow's goes with fan-outs)."""

    name: ClassVar[str] = "backfill_webhook"


def backfill_for(listener_id: str) -> type[Backfill]:
    return BackfillWebhook if listener_id.startswith("wh_") else Backfill


@dataclass(frozen=True)
class RunWorkflow(Command):
    """Run a workflow's steps once with `event` as `steps.trigger.event`."""

    name: ClassVar[str] = "run_workflow"
    workflow_id: str
    event: Any
    route_key: str | None = None
    hops: int = 0
    namespace: str | None = None
    rerun_of: str | None = None  # a run on record whose input this is


@dataclass(frozen=True)
class Send(Command):
    """A workflow's `$.send.http`, `.email` or `.s3`: one attempt, retried like a webhook delivery."""

    name: ClassVar[str] = "send"
    workflow_id: str
    kind: str  # http | email | s3
    config: dict[str, Any]
    key: str  # the same across retries
    attempt: int = 0
    namespace: str | None = None

    @property
    def lane(self) -> str | None:
        return None  # sends go out in parallel, not behind the workflow's runs


COMMANDS: dict[str, type[Command]] = {
    c.name: c for c in (RunSource, TimerTick, SyncSchedule, DeleteEvents, PurgeSource, FanOut, DeliverWebhook,
                        DeliverFirstAttempts, RunWorkflow, Send, Backfill, BackfillWebhook)
}


def to_message(command: Command) -> dict[str, Any]:
    """Fields are JSON values, tuples or primitives: no deep copy (`asdict` would copy each event)."""
    names = _FIELDS.get(command.name)
    if names is None:
        names = _FIELDS[command.name] = tuple(f.name for f in dataclasses.fields(command) if f.init)
    return {"type": command.name, **{name: getattr(command, name) for name in names}}


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
# The C encoder JSONEncoder.encode makes anew on every call, made once: that setup was most of the
# cost of encoding a small value, and a hot source encodes several per run. No check for cycles:
# what is encoded here came from JSON or is built of it.
_C_COMPACT = (None if c_make_encoder is None
              else c_make_encoder(None, str, encode_basestring, None, ":", ",", False, False, True))


def compact_json(value: Any) -> str:
    """JSON without spaces, non-ASCII kept as is; what JSON cannot hold becomes its `str`."""
    if _C_COMPACT is None:
        return _COMPACT.encode(value)
    return "".join(_C_COMPACT(value, 0))


def message_text(command: Command) -> str:
    """`to_message` as JSON text. A run's event goes in as `RunSource.event_json` (made once, and
    there for its record to take)."""
    if not isinstance(command, RunSource):
        return json.dumps(to_message(command))
    message = to_message(command)
    del message["event"]
    head = compact_json(message)
    return f'{head[:-1]},"event":{command.event_json()}}}'


_FIELDS: dict[str, tuple[str, ...]] = {}


def from_message(message: dict[str, Any]) -> Command:
    fields = dict(message)
    kind = COMMANDS.get(fields.pop("type", ""))
    if kind is None:
        raise ValueError(f"unknown command {message.get('type')!r}")
    for name in ("event_ids", "events", "delivery_ids"):
        if isinstance(fields.get(name), list):
            fields[name] = tuple(fields[name])
    if fields.get("trigger") == "http":
        fields["event"] = with_body(fields.get("event"))
    if isinstance(fields.get("due_at"), str):
        # EventBridge Scheduler fills `<aws.scheduler.scheduled-time>` in as an ISO 8601 time.
        fields["due_at"] = datetime.fromisoformat(fields["due_at"].replace("Z", "+00:00")).timestamp()
    return kind(**fields)
