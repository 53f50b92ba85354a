"""Snapshots of a source's `this.db` (issue 34): one taken at each deploy, update and restore,
the newest SNAPSHOTS_KEPT kept per source, and the JSON merge patch (RFC 7396) an owner edits
the state with. A snapshot holds what the component stored, secrets included: owner only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headwater.domain.runs import db_size

SNAPSHOTS_KEPT = 10
REASONS = ("deploy", "update", "restore")


@dataclass(frozen=True)
class StateSnapshot:
    """`seq` counts the source's snapshots from 1 (SourceState.snapshots): snapshot `n` takes the
    place of snapshot `n - SNAPSHOTS_KEPT`. `component_id`/`component_version`: the code that ran
    on this `db` (at a deploy, the new code; at an update or restore, the code being replaced)."""

    id: str
    seq: int
    created_at: int  # Unix seconds, as a source's created_at
    reason: str
    component_id: str
    component_version: str
    db: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Bytes of the db's compact JSON: what HEADWATER_DB_MAX_BYTES bounds."""
        return db_size(self.db)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "seq": self.seq, "created_at": self.created_at, "reason": self.reason,
                "component_id": self.component_id, "component_version": self.component_version, "db": self.db}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StateSnapshot:
        return cls(id=str(data["id"]), seq=int(data["seq"]), created_at=int(data["created_at"]),
                   reason=str(data["reason"]), component_id=str(data["component_id"]),
                   component_version=str(data.get("component_version") or ""), db=dict(data.get("db") or {}))


def newest(snapshots: list[StateSnapshot]) -> list[StateSnapshot]:
    """The kept ones, newest first: a store may still hold one pushed out (not yet overwritten)."""
    ordered = sorted(snapshots, key=lambda s: s.seq, reverse=True)
    return [s for s in ordered if s.seq > ordered[0].seq - SNAPSHOTS_KEPT] if ordered else []


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: an object patch merges key by key (null removes the key, an object merges into
    an object), anything else replaces the target."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


