"""What a run did, and how it changes a source: pure, so any store can commit the outcome.

`record` turns (state, one run's result) into (the new state, the events to store, ids assigned).
It reads nothing and writes nothing: a service saves the new state conditionally on the old
version and, when another writer got there first, applies the same result again to the fresh
state, so neither a `this.db` write, an event nor a dedupe id is lost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from headwater.domain import health
from headwater.domain.events import DEFAULT_CHANNEL, Emit, EventId, dedupe, order_by_ts
from headwater.domain.json_text import compact_json
from headwater.domain.models import SourceState, StoredEvent, applied_key

ERRORS, LOGS = "$errors", "$logs"


@dataclass
class RunResult:
    """The runner's answer to a run or a hook (docs/runner-protocol.md, `run` result)."""

    emits: list[Emit] = field(default_factory=list)
    db_writes: dict[str, Any] = field(default_factory=dict)
    logs: list[dict[str, Any]] = field(default_factory=list)
    response: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    duration_ms: float = 0.0
    cpu_ms: float | None = None  # of the account's runner process while it ran, where measured from outside
    # actions only: what `run({$})` returned, its `$.export`s, `$.send`s and `$.flow.exit`
    return_value: Any = None
    exports: dict[str, Any] = field(default_factory=dict)
    sends: list[dict[str, Any]] = field(default_factory=list)
    flow_exit: dict[str, Any] | None = None

    @classmethod
    def failed(cls, code: str, message: str, stack: str | None = None) -> RunResult:
        return cls(error={"code": code, "name": "Error", "message": message, "stack": stack or ""})

    @property
    def error_code(self) -> str | None:
        return (self.error.get("code") or "RUNTIME_ERROR") if self.error else None

    @property
    def compute_ms(self) -> int:
        return math.ceil(self.duration_ms)


@dataclass(frozen=True)
class Limits:
    """DECISIONS, Limits: what one source may keep. A larger emit is not stored (a `$errors`
    event EVENT_TOO_LARGE says so), a longer log line is cut and marked, an emit to one more
    custom channel than allowed is refused (CHANNEL_LIMIT), and a run whose `this.db` writes would
    make the source's db larger than `max_db_bytes` of JSON has none of them applied (DB_TOO_LARGE)."""

    max_event_bytes: int = 1024 * 1024
    max_log_bytes: int = 64 * 1024
    max_channels: int = 100
    max_db_bytes: int = 1024 * 1024
    # Task ids remembered per source, against a duplicate delivery. Locally a crash between a
    # batch's outcome and its tasks' deletion replays the whole batch (up to 64 runs): all of it
    # must be known. On AWS the idempotency records keep each message id for 24 h, so the state
    # guards only against a duplicate racing its first delivery, and the template keeps fewer
    # (a smaller state item rewritten on each run: docs/aws.md, Cost).
    applied_kept: int = 256


@dataclass(frozen=True)
class RunContext:
    """Who ran, for error events (SPEC's `original_context` of a source), and the bounds."""

    source_id: str
    owner_id: str
    platform_version: str
    dedupe: str | None = None
    limits: Limits = field(default_factory=Limits)


@dataclass
class Recorded:
    state: SourceState
    events: list[StoredEvent]

    @property
    def channels(self) -> set[str]:
        return {e.channel for e in self.events}


def merge_db(db: dict[str, Any], writes: dict[str, Any]) -> dict[str, Any]:
    """A write of null (undefined in JS) deletes the key."""
    merged = {**db, **writes}
    return {k: v for k, v in merged.items() if v is not None}


def db_size(db: dict[str, Any]) -> int:
    """The size `this.db` is bounded in: bytes of its compact JSON, as a whole."""
    return len(compact_json(db).encode())


def apply_db(db: dict[str, Any], writes: dict[str, Any], max_bytes: int) -> tuple[dict[str, Any], str | None]:
    """`this.db` after one run's writes, or unchanged with the reason when they would make it larger
    than `max_bytes` (all of the run's writes or none: a partial set could break the component's own
    invariants). Writes that leave an already oversized db no larger (deletions, say) are applied,
    so a source over a lowered limit can still shrink back under it."""
    if not writes:
        return db, None
    merged = merge_db(db, writes)
    size = db_size(merged)
    if size <= max_bytes or size <= db_size(db):
        return merged, None
    return db, (f"The run's this.db writes were not applied: they would make the source's db {size} bytes "
                f"of JSON, over the limit of {max_bytes} bytes.")


@dataclass
class Tally:
    """The health counts of several runs recorded one after another (a batch's), counted into the
    state's activity buckets once: `health.count` rebuilds a bucket each time it is called, and a
    batch's runs land in the same one."""

    runs: int = 0
    events: int = 0
    errors: int = 0
    at_ms: int = 0

    def count_into(self, state: SourceState) -> None:
        if self.runs or self.events or self.errors:
            state.activity = health.count(state.activity, self.at_ms / 1000, (self.runs, self.events, self.errors, 0))
            self.runs = self.events = self.errors = 0


def record(state: SourceState, ctx: RunContext, result: RunResult, trigger: Any, now_ms: int,
           task_id: str | None = None, tally: Tally | None = None) -> Recorded:
    """The new state and the events of one run or hook: emits ordered by ts and deduped, then its
    `$logs`, refused emits as warnings, and its `$errors` events (refused db writes and emits, then
    the run's own error), each with the next id."""
    outcome = dedupe(ctx.dedupe, state.dedupe, order_by_ts(result.emits))
    limits = ctx.limits
    db, db_refused = apply_db(state.db, result.db_writes, limits.max_db_bytes)
    new = replace(state, db=db, dedupe=outcome.state)
    if task_id is not None:
        new.applied = [*state.applied, applied_key(task_id)][-limits.applied_kept:]
    events: list[StoredEvent] = []

    def add(channel: str, event: Any, meta: dict[str, Any], encoded: str | None = None) -> None:
        new.last_ms = max(new.last_ms, now_ms)
        new.last_seq += 1
        event_id = str(EventId(new.last_ms, new.last_seq))
        ts = meta.get("ts")
        metadata = {
            "emitter_id": ctx.source_id,
            "emit_id": event_id,
            "name": channel,
            "summary": meta.get("summary") if isinstance(meta.get("summary"), str) else None,
            "id": meta.get("id"),
            "ts": ts if isinstance(ts, int | float) and not isinstance(ts, bool) else now_ms,
        }
        events.append(StoredEvent(event_id, now_ms, event, metadata, channel, encoded))

    refusals: list[dict[str, Any]] = []
    if db_refused:  # the run's other outcomes (emits, logs) stand: only its db writes are dropped
        refusals.append({"code": "DB_TOO_LARGE", "message": db_refused})
    channels = set(new.channels)
    for emit in outcome.kept:
        encoded = compact_json(emit.event)
        size = len(encoded.encode())
        if size > limits.max_event_bytes:
            refusals.append({"code": "EVENT_TOO_LARGE", "message": f"An emitted event of {size} bytes was not stored: "
                             f"events are limited to {limits.max_event_bytes} bytes of JSON."})
            continue
        if emit.channel not in channels and emit.channel not in (DEFAULT_CHANNEL, ERRORS, LOGS):
            if len(channels) >= limits.max_channels:
                refusals.append({"code": "CHANNEL_LIMIT", "message": f"An event to channel {emit.channel!r} was not "
                                 f"stored: a source may use {limits.max_channels} channels."})
                continue
            channels.add(emit.channel)
        add(emit.channel, emit.event, emit.meta, encoded)
    new.channels = sorted(channels)
    for log in result.logs:
        add(LOGS, {"level": log.get("level", "log"), "message": cut(str(log.get("message", "")), limits.max_log_bytes),
                   "ts": log.get("ts", now_ms)}, {})
    for reason in outcome.refused:
        add(LOGS, {"level": "warn", "message": f"event not emitted: {reason}", "ts": now_ms}, {})
    for refusal in refusals:
        add(ERRORS, error_event(ctx, trigger, {**refusal, "stack": ""}, now_ms), {})
    if result.error:
        add(ERRORS, error_event(ctx, trigger, result.error, now_ms), {})
    recovered = _count(new, events, now_ms, ran=task_id is not None, tally=tally)
    if recovered:
        add(ERRORS, error_event(ctx, trigger, recovered, now_ms), {})
    return Recorded(new, events)


def _count(state: SourceState, events: list[StoredEvent], now_ms: int, ran: bool,
           tally: Tally | None = None) -> dict[str, Any] | None:
    """The run's part of the source's health (domain.health), counted on `state` (or in `tally`, to
    be counted in with its batch's); the error that says a stall ended, when this run ends it. A
    task's outcome is a run; hooks and failures before a run are not; stall notices are not errors
    of the source's."""
    emitted = sum(1 for e in events if e.channel not in (ERRORS, LOGS))
    errors = sum(1 for e in events if e.channel == ERRORS and e.event["error"]["code"] not in health.NOTICES)
    if tally is None:
        state.activity = health.count(state.activity, now_ms / 1000, (int(ran), emitted, errors, 0))
    else:
        tally.runs, tally.events, tally.errors = tally.runs + int(ran), tally.events + emitted, tally.errors + errors
        tally.at_ms = now_ms
    if ran:
        state.last_run_ms = now_ms
    if emitted:
        state.last_event_ms = now_ms
    if state.stalled and health.recovers(state.stalled, state.ran_tick, emitted > 0):
        message = health.recovery_message(state.stalled, now_ms / 1000)
        state.stalled = None
        return {"code": health.RECOVERED, "message": message, "stack": ""}
    return None





CUT_MARK = " …[cut: {n} more bytes]"


def cut(text: str, max_bytes: int) -> str:
    """A log line over the limit keeps its first `max_bytes` bytes and says how much was cut."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode(errors="ignore") + CUT_MARK.format(n=len(data) - max_bytes)


def error_event(ctx: RunContext, trigger: Any, error: dict[str, Any], ms: int) -> dict[str, Any]:
    """DECISIONS `$errors` event of a source: SPEC's workflow error shape with `source_id`."""
    return {
        "original_event": trigger,
        "original_context": {
            "id": f"{ms}",
            "ts": ms,
            "source_id": ctx.source_id,
            "source_type": "COMPONENT",
            "verified": False,
            "owner_id": ctx.owner_id,
            "platform_version": ctx.platform_version,
        },
        "error": {
            "code": error.get("code") or "RUNTIME_ERROR",
            "cellId": None,
            "ts": ms,
            "stack": error.get("stack") or "",
            "message": error.get("message") or "",
        },
    }
