"""Event ids, ordering, dedupe and truncation (SPEC Events, DECISIONS Events). No I/O."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any

RETAINED_PER_CHANNEL = 100
UNIQUE_CACHE = 100
TRUNCATE_BYTES = 1024
DEFAULT_CHANNEL = ""
RESERVED_CHANNELS = ("$errors", "$logs")


@total_ordering
@dataclass(frozen=True)
class EventId:
    """`<ms>-<seq>`: compared as numbers, never as strings."""

    ms: int
    seq: int

    @classmethod
    def parse(cls, text: str) -> EventId:
        ms, sep, seq = text.partition("-")
        if not sep or not ms.isdigit() or not seq.isdigit():
            raise ValueError(f"{text!r} is not an event id (<ms>-<seq>)")
        return cls(int(ms), int(seq))

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"

    def __lt__(self, other: EventId) -> bool:
        return (self.ms, self.seq) < (other.ms, other.seq)


@dataclass
class Emit:
    """One `$emit(event, meta)` call of a run."""

    event: Any
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def channel(self) -> str:
        name = self.meta.get("name")
        return name if isinstance(name, str) else DEFAULT_CHANNEL


def order_by_ts(emits: list[Emit]) -> list[Emit]:
    """SPEC: when `ts` is given, events are emitted oldest to newest (stable for equal or missing ts)."""
    if not any(isinstance(e.meta.get("ts"), int | float) for e in emits):
        return emits
    def has_ts(e: Emit) -> bool:
        return isinstance(e.meta.get("ts"), int | float) and not isinstance(e.meta.get("ts"), bool)

    # Events with a ts are sorted among the slots they occupy; the others keep their places.
    timed = iter(sorted((e for e in emits if has_ts(e)), key=lambda e: e.meta["ts"]))
    return [next(timed) if has_ts(e) else e for e in emits]


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


@dataclass
class Deduped:
    kept: list[Emit]
    state: dict[str, Any]
    refused: list[str] = field(default_factory=list)


def _id_key(value: Any) -> str:
    """Ids compare by JSON value, so 1 and "1" stay distinct as they are to the component."""
    return json.dumps(value, sort_keys=True)


def dedupe(strategy: str | None, state: dict[str, Any], emits: list[Emit]) -> Deduped:
    """Applies a dedupe strategy to one run's emits (already ordered by ts).

    unique: FIFO of the last 100 ids; greatest: numeric id above the largest seen;
    last: only the events after the cached id, all when it is not among them.
    An event without the id its strategy needs is refused with a reason, never silently lost.
    """
    if strategy not in ("unique", "greatest", "last"):
        return Deduped(emits, state)
    refused = [f"event {i} has no `id`, which dedupe {strategy!r} needs" for i, e in enumerate(emits)
               if e.meta.get("id") is None]
    emits = [e for e in emits if e.meta.get("id") is not None]
    if strategy == "unique":
        seen: list[str] = list(state.get("ids", []))
        members = set(seen)
        kept = []
        for e in emits:
            key = _id_key(e.meta["id"])
            if key in members:
                continue
            kept.append(e)
            seen.append(key)
            members.add(key)
        return Deduped(kept, {"ids": seen[-UNIQUE_CACHE:]}, refused)
    if strategy == "greatest":
        best = state.get("greatest")
        kept = []
        for e in emits:
            n = _numeric(e.meta["id"])
            if n is None:
                refused.append(f"id {e.meta['id']!r} is not numeric, which dedupe 'greatest' needs")
                continue
            if best is not None and n <= best:
                continue
            kept.append(e)
            best = n
        return Deduped(kept, {"greatest": best} if best is not None else state, refused)
    last = state.get("last")
    kept = emits
    if last is not None:
        keys = [_id_key(e.meta["id"]) for e in emits]
        if last in keys:
            kept = emits[len(keys) - keys[::-1].index(last):]
    if not kept:
        return Deduped([], state, refused)
    return Deduped(kept, {"last": _id_key(kept[-1].meta["id"])}, refused)


def summary_event(event: Any, expand: bool) -> Any:
    """DECISIONS truncation: over 1024 bytes of JSON and no `expand=event`, a preview stands in."""
    if expand:
        return event
    text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode())
    if size <= TRUNCATE_BYTES:
        return event
    return {"$truncated": True, "size": size, "preview": text[:TRUNCATE_BYTES]}


def channel_of(name: str | None) -> str:
    return name or DEFAULT_CHANNEL


def in_range(event_id: EventId, start: EventId | None, end: EventId | None) -> bool:
    return (start is None or event_id >= start) and (end is None or event_id <= end)


def newest_ids(ids: Iterable[EventId], keep: int = RETAINED_PER_CHANNEL) -> list[EventId]:
    return sorted(ids, reverse=True)[:keep]
