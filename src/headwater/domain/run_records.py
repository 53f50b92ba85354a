"""Runs on record (DECISIONS, Extensions): what one run of a source or workflow was and did.

A record is made from what the run's commit already has (its result, its trigger, the events it
stored), so it costs no runner call and no read. It is bounded on its own, whatever the run did:
the trigger is kept whole when it fits (so the run can be run again), logs and the ids of emitted
events up to a budget, the stack cut. Values of the source's secrets are masked wherever the code
may have printed them (logs, the error).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from headwater.domain.http_interface import body_derivable, body_left_out, with_body
from headwater.domain.json_text import compact_json
from headwater.domain.models import StoredEvent

RUNS_KEPT = 100  # per source or workflow: the newest ones, as events are kept per channel
MAX_TRIGGER_BYTES = 256 * 1024  # a trigger larger than this is not kept (nor can the run be re-run)
MAX_LOG_BYTES = 64 * 1024  # of log lines in one record; later lines are counted, not kept
MAX_STACK_BYTES = 16 * 1024
MAX_IDS_PER_CHANNEL = 20
MAX_DB_KEYS = 100
MAX_UNDO_BYTES = 64 * 1024  # of `this.db` values before a run, in its record (past it: `incomplete`)
MASK = "[secret]"
_MIN_SECRET_CHARS = 4  # shorter values ("", "1", "yes") would mask ordinary words, and tell nothing

NOT_RUN = frozenset({"QUOTA_EXCEEDED", "ACCOUNT_NOT_FOUND", "ACCOUNT_NEEDS_RECONNECT",
                     "ACCOUNT_REFRESH_FAILED"})  # refused before any code ran


@dataclass(frozen=True)
class RunInfo:
    """What the run path knows of a run beyond its result: how it started."""

    kind: str  # http | timer | manual | subscription | rerun | hook
    hook: str | None = None  # for kind "hook"
    rerun_of: str | None = None  # for kind "rerun": the run whose input it took
    component_id: str | None = None  # the code that ran
    secrets: frozenset[str] = frozenset()  # values masked in logs and errors
    # a workflow's run emits its error itself: its record takes it from here (with the failing step)
    error: dict[str, Any] | None = None
    not_run: bool = False


@dataclass
class RunRecord:
    seq: int  # per source or workflow, from its state: the list's order and the id's second half
    ended_ms: int
    kind: str
    outcome: str  # "success" | "error" | "not_run" (refused before any code ran: quota, an account)
    duration_ms: float
    trigger: Any = None
    trigger_kept: bool = True  # False: it was over MAX_TRIGGER_BYTES (trigger_bytes says how large)
    trigger_bytes: int = 0
    cpu_ms: float | None = None
    hook: str | None = None
    rerun_of: str | None = None
    component_id: str | None = None
    error: dict[str, Any] | None = None
    response_status: int | None = None
    emitted: dict[str, dict[str, Any]] = field(default_factory=dict)  # channel -> {count, ids}
    db_keys_written: list[str] = field(default_factory=list)
    db_keys_count: int = 0
    # The undo log (a trial's `this.db` as it was before a run): for the keys the run wrote, their
    # values before it, `{"values": {...}, "absent": [...]}`, or `{"incomplete": <bytes>}` past
    # MAX_UNDO_BYTES. None when the run wrote no key (or its record predates the undo log).
    db_before: dict[str, Any] | None = None
    logs: list[dict[str, Any]] = field(default_factory=list)
    logs_dropped: int = 0

    @property
    def id(self) -> str:
        return run_id(self.ended_ms, self.seq)

    @property
    def rerunnable(self) -> bool:
        return self.trigger_kept and self.kind != "hook"

    # The trigger's JSON text, made once by make_record (which measures it): a record is written
    # for every run. An HTTP request's leaves its `body` out (`body_left_out`): it follows from `bodyRaw`.
    trigger_text: str | None = field(default=None, compare=False, repr=False)
    trigger_text_has_body: bool = field(default=True, compare=False, repr=False)
    db_before_text: str | None = field(default=None, compare=False, repr=False)  # made once, when measured

    def to_text(self, compact: bool = False) -> str:
        """The stored form: JSON text, fields at their default left out. `compact`: an HTTP
        request's `body` left out when it is its `bodyRaw` parsed (a store that bills per KB)."""
        trigger: Any = self.trigger if self.trigger_kept else None
        body_derived = False
        if self.trigger_text is not None and not self.trigger_text_has_body:
            encoded, body_parsed, body_derived = self.trigger_text, False, True
        elif compact and _body_is_parsed_raw(trigger):
            encoded, body_parsed = _encoded({k: v for k, v in trigger.items() if k != "body"}), True
        else:
            if self.trigger_text is None:
                self.trigger_text = _encoded(trigger)
            encoded, body_parsed = self.trigger_text, False
        values = self.__dict__
        data: dict[str, Any] = {"seq": self.seq, "ended_ms": self.ended_ms, "kind": self.kind,
                                "outcome": self.outcome, "duration_ms": self.duration_ms}
        for name, default in _OPTIONAL_DEFAULTS:
            value = values[name]
            if value is not None and value != default:
                data[name] = value
        tail = ""
        if self.db_before_text is not None and self.db_before is not None:
            del data["db_before"]
            tail = f',"db_before":{self.db_before_text}'
        if not self.trigger_kept:
            data["trigger_kept"] = False
        if body_parsed:
            data["body_parsed"] = True
        if body_derived:
            data["body_derived"] = True
        head = compact_json(data)
        return f'{head[:-1]}{tail},"trigger":{encoded}}}'

    @classmethod
    def from_text(cls, text: str) -> RunRecord:
        data = json.loads(text)
        record = cls(**{k: v for k, v in data.items() if k in _FIELDS})
        if data.get("body_parsed") and isinstance(record.trigger, dict):
            record.trigger["body"] = json.loads(record.trigger["bodyRaw"])
        elif data.get("body_derived"):
            record.trigger = with_body(record.trigger)
        return record


_FIELDS = tuple(f.name for f in fields(RunRecord)
                if f.name not in {"trigger_text", "trigger_text_has_body", "db_before_text"})
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(RunRecord) if f.default is not MISSING}
_DEFAULTS.update({f.name: f.default_factory() for f in fields(RunRecord)
                  if f.default_factory is not MISSING})
_OPTIONAL = tuple(name for name in _FIELDS
                  if name not in {"seq", "ended_ms", "kind", "outcome", "duration_ms", "trigger", "trigger_kept"})
_OPTIONAL_DEFAULTS = tuple((name, _DEFAULTS.get(name)) for name in _OPTIONAL)
_PARSED_BODY_FROM = 256  # a raw body shorter than this is not worth the parse to store it once


def _encoded(trigger: Any) -> str:
    return compact_json(trigger)


def _body_is_parsed_raw(trigger: Any) -> bool:
    if not isinstance(trigger, dict) or "body" not in trigger:
        return False
    raw = trigger.get("bodyRaw")
    if not isinstance(raw, str) or len(raw) < _PARSED_BODY_FROM:
        return False
    try:
        return bool(json.loads(raw) == trigger["body"])
    except ValueError:
        return False


def run_id(ended_ms: int, seq: int) -> str:
    """`<ms>-<seq>`, like an event id: when it ended, and its place among the owner's runs."""
    return f"{ended_ms}-{seq}"


def seq_of(run: str) -> int | None:
    """The seq a run id names, or None when it is not a run id."""
    ms, sep, seq = run.partition("-")
    if not sep or not ms.isdigit() or not seq.isdigit() or len(seq) > 18 or len(ms) > 16:
        return None
    return int(seq)


def make_record(seq: int, info: RunInfo, error: dict[str, Any] | None, not_run: bool, duration_ms: float,
                cpu_ms: float | None, trigger: Any, events: Iterable[StoredEvent], db_writes: dict[str, Any],
                logs: Iterable[dict[str, Any]], response: dict[str, Any] | None, ended_ms: int,
                trigger_text: str | None = None, db: Mapping[str, Any] | None = None) -> RunRecord:
    """The record of one run: its own error (not the `$errors` events of refusals, which are among
    its emitted events), the events it stored by channel, the keys it wrote and, given `db` (the
    state the run started from), their values before it (`undo_log`). `trigger_text`: the trigger
    as stored (`RunSource.event_json`), when it was made already (for the task row)."""
    masked = _Masker(info.secrets) if info.secrets else _unmasked
    error = info.error or error
    not_run = not_run or info.not_run
    has_body = info.kind != "http" or not body_derivable(trigger)
    if trigger_text is None:
        trigger_text = _encoded(trigger if has_body else body_left_out(trigger))
    encoded = trigger_text
    size = len(encoded.encode())
    kept = size <= MAX_TRIGGER_BYTES
    emitted: dict[str, dict[str, Any]] = {}
    for event in events:
        entry = emitted.setdefault(event.channel, {"count": 0, "ids": []})
        entry["count"] += 1
        if len(entry["ids"]) < MAX_IDS_PER_CHANNEL:
            entry["ids"].append(event.id)
    kept_logs, dropped, budget = [], 0, MAX_LOG_BYTES
    for line in logs:
        message = masked(str(line.get("message", "")))
        budget -= len(message.encode())
        if budget < 0:
            dropped += 1
            continue
        kept_logs.append({"level": str(line.get("level", "log")), "message": message, "ts": line.get("ts")})
    status = response.get("status") if isinstance(response, dict) else None
    undo = undo_log(db, db_writes) if db is not None and db_writes else None
    return RunRecord(
        seq=seq, ended_ms=ended_ms, kind=info.kind,
        outcome="not_run" if not_run else ("error" if error else "success"),
        duration_ms=round(duration_ms, 3), trigger=trigger if kept else None, trigger_kept=kept,
        trigger_bytes=size, cpu_ms=cpu_ms, hook=info.hook,
        rerun_of=info.rerun_of, component_id=info.component_id,
        error=None if error is None else {
            "code": str(error.get("code") or "RUNTIME_ERROR"),
            "message": masked(str(error.get("message") or "")),
            "stack": _cut(masked(str(error.get("stack") or "")), MAX_STACK_BYTES),
            **({"step": str(error["step"])} if error.get("step") else {}),
        },
        response_status=status if isinstance(status, int) and not isinstance(status, bool) else None,
        emitted=emitted, db_keys_written=sorted(db_writes)[:MAX_DB_KEYS], db_keys_count=len(db_writes),
        db_before=undo[0] if undo else None, db_before_text=undo[1] if undo else None,
        logs=kept_logs, logs_dropped=dropped, trigger_text=encoded if kept else "null",
        trigger_text_has_body=has_body or not kept,
    )


def undo_log(db: Mapping[str, Any], writes: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """What the keys `writes` touches held in `db` before: their values, and those that were absent;
    `{"incomplete": <bytes>}` when that is over MAX_UNDO_BYTES of JSON. With its JSON text (measured
    here, and what the record keeps)."""
    undo: dict[str, Any] = {}
    values = {key: db[key] for key in writes if key in db}
    absent = sorted(key for key in writes if key not in db)
    if values:
        undo["values"] = values
    if absent:
        undo["absent"] = absent
    text = _encoded(undo)
    size = len(text.encode())
    if size <= MAX_UNDO_BYTES:
        return undo, text
    incomplete = {"incomplete": size}
    return incomplete, _encoded(incomplete)


def secret_values(values: Iterable[Any]) -> frozenset[str]:
    """The strings to mask: every string long enough to mean something in `values`, nested ones too."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if len(value) >= _MIN_SECRET_CHARS:
                found.add(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    for value in values:
        walk(value)
    return frozenset(found)


def masked(value: Any, secrets: Collection[str]) -> Any:
    """`value` with each of `secrets` replaced by MASK in every string (keys too), longest first:
    what the state routes and trial answers show."""
    if not secrets:
        return value
    mask = _Masker(secrets)

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return mask(item)
        if isinstance(item, dict):
            return {mask(str(k)): walk(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v) for v in item]
        return item

    return walk(value)


def _unmasked(text: str) -> str:
    return text


class _Masker:
    def __init__(self, secrets: Collection[str]) -> None:
        self.secrets = sorted(secrets, key=len, reverse=True)  # a secret containing another goes first

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


def _cut(text: str, max_bytes: int) -> str:
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode(errors="ignore") + f" …[cut: {len(data) - max_bytes} more bytes]"
