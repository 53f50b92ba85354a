"""A trial on recorded traffic (`POST /v1/sources/{id}/trial`): pure parts.

`state_before`: `this.db` as it was before a run on record, from the current state and the undo
logs of the runs after it (domain.run_records.undo_log), newest first; said plainly when it cannot
be exact. `diff`: what a trial run emitted beside what the live run emitted then, matched by
channel, then by dedupe id (`meta.id`) where the emit has one, else by order among the channel's
emits without one (answers are masked by run_records.masked).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.domain.run_records import RunRecord

MAX_RUNS = 100
TRIAL_KINDS = frozenset({"http", "timer", "manual", "subscription", "rerun"})


@dataclass(frozen=True)
class StateBefore:
    db: dict[str, Any]
    exact: bool
    reason: str | None = None


def state_before(current: Mapping[str, Any], newest_first: Iterable[RunRecord], first_seq: int,
                 newest_seq: int, outside_at: int = 0) -> StateBefore:
    """`this.db` before run `first_seq`: `current` (the state after run `newest_seq`) with the undo
    log of every run from `newest_seq` down to `first_seq` applied, newest first. Not exact when one
    of those records is missing (let go, or never kept), predates undo logs, or its undo log was
    over its bound; nor when `this.db` was changed outside runs (a state patch or restore) after run
    `outside_at` (SourceState.db_outside_runs) and the first run tried is not after it."""
    db = dict(current)
    reasons: list[str] = []
    if outside_at >= first_seq:
        reasons.append(f"this.db was changed outside runs (a state patch or restore) after run {outside_at} of the "
                       "source")
    expected = newest_seq
    for record in newest_first:
        if record.seq < first_seq:
            break
        if record.seq > expected:
            continue  # recorded after the state was read
        if record.seq != expected:
            reasons.append(f"runs {record.seq + 1}..{expected} of the source are not on record")
        expected = record.seq - 1
        undo = record.db_before
        if record.db_keys_count and undo is None:
            reasons.append(f"run {record.id} wrote this.db keys before their values were kept")
            continue
        if undo is None:
            continue
        if "incomplete" in undo:
            reasons.append(f"run {record.id} changed more of this.db ({undo['incomplete']} bytes) than its record "
                           "keeps")
            continue
        db.update(undo.get("values") or {})
        for key in undo.get("absent") or ():
            db.pop(key, None)
    if expected >= first_seq:
        reasons.append(f"runs {first_seq}..{expected} of the source are not on record")
    if reasons:
        return StateBefore(db, False, "this.db before the first run is approximate: " + "; ".join(reasons) + ".")
    return StateBefore(db, True)


@dataclass(frozen=True)
class Emitted:
    """One emit on one side: its channel, dedupe id, event and summary (`known` False: a live event
    no longer retained, of which only the id is known)."""

    channel: str
    id: Any
    event: Any
    summary: Any = None
    event_id: str | None = None  # the live event's id
    known: bool = True


@dataclass
class Diff:
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    unchanged: int = 0
    unknown: list[dict[str, Any]] = field(default_factory=list)  # live events no longer retained

    def as_dict(self) -> dict[str, Any]:
        return {"added": self.added, "removed": self.removed, "changed": self.changed, "unchanged": self.unchanged,
                "unknown": self.unknown}


def diff(trial: list[Emitted], live: list[Emitted]) -> Diff:
    """Pairs by (channel, dedupe id), then the rest of each channel by order; an unretained live
    event pairs the same way, its pair told as `unknown` (neither added nor removed nor changed)."""
    out = Diff()
    live_by_id: dict[tuple[str, str], list[Emitted]] = {}
    for emit in live:
        if emit.known and emit.id is not None:
            live_by_id.setdefault((emit.channel, _key(emit.id)), []).append(emit)
    paired: set[int] = set()
    trial_rest: list[Emitted] = []
    for emit in trial:
        same = live_by_id.get((emit.channel, _key(emit.id))) if emit.id is not None else None
        if same:
            other = same.pop(0)
            paired.add(id(other))
            _compare(out, emit, other)
        else:
            trial_rest.append(emit)
    live_rest = [e for e in live if id(e) not in paired]
    for channel in dict.fromkeys([e.channel for e in trial_rest] + [e.channel for e in live_rest]):
        trials = [e for e in trial_rest if e.channel == channel]
        lives = [e for e in live_rest if e.channel == channel]
        # a live emit with an id is matched only by id; the unretained ones' ids are unknown
        loose_trial = [e for e in trials if e.id is None]
        loose_live = [e for e in lives if e.known and e.id is None]
        unretained = [e for e in lives if not e.known]
        for t, li in zip(loose_trial, loose_live, strict=False):
            _compare(out, t, li)
        matched = min(len(loose_trial), len(loose_live))
        left_trial = [e for e in trials if e.id is not None] + loose_trial[matched:]
        for t in left_trial:
            if unretained:
                u = unretained.pop(0)
                out.unknown.append({"channel": channel, "live_event_id": u.event_id, "trial": _side(t)})
            else:
                out.added.append({"channel": channel, "id": t.id, "trial": _side(t)})
        for li in [e for e in lives if e.known and e.id is not None and id(e) not in paired] + loose_live[matched:]:
            out.removed.append({"channel": channel, "id": li.id, "live": _side(li), "live_event_id": li.event_id})
        for u in unretained:
            out.unknown.append({"channel": channel, "live_event_id": u.event_id, "trial": None})
    return out


def _compare(out: Diff, trial: Emitted, live: Emitted) -> None:
    if _key(trial.event) == _key(live.event) and trial.summary == live.summary:
        out.unchanged += 1
    else:
        out.changed.append({"channel": trial.channel, "id": trial.id, "live": _side(live), "trial": _side(trial),
                            "live_event_id": live.event_id})


def _side(emit: Emitted) -> dict[str, Any]:
    return {"event": emit.event, "summary": emit.summary}


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
