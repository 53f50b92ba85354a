"""The resources Headwater keeps, as plain dataclasses (no storage concerns)."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

Tier = Literal["free", "paid"]
REGISTRY_NAMESPACE = "registry"


@dataclass
class User:
    id: str
    username: str
    email: str
    tier: Tier
    created_at: int


@dataclass
class Org:
    id: str
    name: str
    orgname: str
    email: str
    owner_id: str
    created_at: int


@dataclass
class Principal:
    """Who is calling: the key's user and the orgs that user belongs to."""

    user: User
    org_ids: frozenset[str] = field(default_factory=frozenset)

    def can_see(self, namespace: str) -> bool:
        return namespace == self.user.id or namespace in self.org_ids


@dataclass
class ComponentDefinition:
    """What the runner's `describe` says of a component's code."""

    name: str
    version: str
    type: str
    key: str | None = None
    description: str | None = None
    dedupe: str | None = None
    hooks: list[str] = field(default_factory=list)
    has_additional_props: bool = False
    configurable_props: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_runner(cls, data: dict[str, Any]) -> ComponentDefinition:
        return cls(
            name=data["name"],
            version=str(data["version"]),
            type=data.get("type") or "source",
            key=data.get("key"),
            description=data.get("description"),
            dedupe=data.get("dedupe"),
            hooks=list(data.get("hooks") or []),
            has_additional_props=bool(data.get("has_additional_props")),
            configurable_props=list(data.get("configurable_props") or []),
        )


@dataclass
class Component:
    """A saved component (`sc_`): code plus what describe found in it."""

    id: str
    namespace: str
    created_by: str | None
    code: str
    code_hash: str
    definition: ComponentDefinition
    component_url: str | None
    created_at: int
    updated_at: int
    seq: int = 0
    packages: dict[str, str] = field(default_factory=dict)  # npm versions bundled: the lock a redeploy uses
    file_name: str | None = None  # the user's file, shown in stacks in place of `component.js` (file_names)

    @property
    def key(self) -> str | None:
        return self.definition.key

    def to_api(self) -> dict[str, Any]:
        d = self.definition
        return {
            "id": self.id,
            "code": self.code,
            "code_hash": self.code_hash,
            "name": d.name,
            "version": d.version,
            "key": d.key,
            "type": d.type,
            "description": d.description,
            "configurable_props": d.configurable_props,
            "packages": self.packages,
            "component_url": self.component_url,
            "component_file": self.file_name,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass
class Source:
    """A deployed component (`dc_`). `configured_props` is the stored form (secrets encrypted);
    `prop_defs` the final prop set it was validated against (static props plus additionalProps)."""

    id: str
    namespace: str
    user_id: str
    component_id: str
    name: str
    name_slug: str
    configured_props: dict[str, Any]
    prop_defs: list[dict[str, Any]]
    endpoint_id: str | None
    active: bool
    created_at: int
    updated_at: int
    seq: int = 0
    # prop -> {"account": "apn_...", "by": "u_..."}: the user who configured each account reference
    # and was checked for it (domain.connected_accounts.may_use reads it when credentials are handed over)
    account_grants: dict[str, dict[str, str]] = field(default_factory=dict)
    # health settings (domain.health): the most seconds it may go without emitting (None: no
    # expectation), and what its timer does with ticks missed while the service was down
    expect_events_within: int | None = None
    catch_up: str = "skip"

    def health_settings(self) -> dict[str, Any]:
        return {"expect_events_within": self.expect_events_within, "catch_up": self.catch_up}


@dataclass
class StoredEvent:
    """One retained event of an emitter's channel; `id` is `<ms>-<seq>` (domain.events.EventId)."""

    id: str
    indexed_at_ms: int
    event: Any
    metadata: dict[str, Any]
    channel: str = ""
    # `event` as compact JSON when `record` already encoded it (for its size bound): stores reuse it.
    encoded: str | None = field(default=None, compare=False, repr=False)


def applied_key(task_id: str) -> str:
    """What a source's state keeps of a task id: 12 characters (72 bits) of its hash, however long
    the id (an SQS message id is 36, a routed run's key 80 or more), so the state item, rewritten
    on every run, stays small; among the few hundred ids a state keeps, two keys alike are
    vanishingly unlikely."""
    return base64.urlsafe_b64encode(hashlib.blake2b(task_id.encode(), digest_size=9).digest()).decode()


@dataclass
class SourceState:
    """What a source keeps between runs, written only by a conditional save on `version`.

    `db` is its `$.service.db`, `dedupe` its dedupe cache; `last_ms`/`last_seq` the newest event
    id it assigned (ids are `<ms>-<seq>`, seq always grows); `applied` the newest task ids whose
    results are in, so a task delivered twice writes nothing twice (each as its `applied_key`; a
    state saved before those keys has whole ids, still recognised); `timer_run_since` when a timer
    run was queued and has not finished (a tick meanwhile is skipped); `last_tick` the newest tick
    taken (a tick delivered twice fires once). `version` 0 means never saved.

    Health (domain.health): `activity` its counters in time buckets, `last_run_ms` and
    `last_event_ms` (of its own channels, not `$logs`/`$errors`), `ran_tick` the newest tick that
    ran, `skipped_ticks` those that did not, in all, and `stalled` (`{why, since, tick}`) while a
    stall is on."""

    db: dict[str, Any] = field(default_factory=dict)
    dedupe: dict[str, Any] = field(default_factory=dict)
    last_ms: int = 0
    last_seq: int = 0
    applied: list[str] = field(default_factory=list)
    timer_run_since: float | None = None
    last_tick: float = 0.0
    channels: list[str] = field(default_factory=list)  # its custom channels, against the limit
    runs: int = 0  # runs on record so far: the next one's seq is one more (domain.run_records)
    # `runs` when `db` was last changed outside a run (a state patch or restore): rebuilding `db`
    # from the runs' undo logs cannot reach back past it (domain.trial_diff)
    db_outside_runs: int = 0
    activity: dict[str, Any] = field(default_factory=dict)
    last_run_ms: int = 0
    last_event_ms: int = 0
    ran_tick: float = 0.0
    skipped_ticks: int = 0
    stalled: dict[str, Any] | None = None
    snapshots: int = 0  # snapshots of `db` taken so far: the next one's seq is one more (domain.snapshots)
    version: int = 0

    def took(self, task_id: str) -> bool:
        """Whether the task's results are in (`applied` has its key, or its whole id)."""
        index = self._applied_index()
        return applied_key(task_id) in index or task_id in index

    def _applied_index(self) -> frozenset[str]:
        """`applied` as a set, built once per list (a run asks several times; a scan of the 256
        kept keys each time was a measurable share of a run's CPU, issue 32). `applied` is only
        ever replaced, never changed in place, so the list's identity says whether it is current."""
        cached: tuple[list[str], frozenset[str]] | None = self.__dict__.get("_applied_cache")
        if cached is None or cached[0] is not self.applied:
            cached = (self.applied, frozenset(self.applied))
            self.__dict__["_applied_cache"] = cached
        return cached[1]

    def to_json(self) -> dict[str, Any]:
        return {"db": self.db, "dedupe": self.dedupe, "last_ms": self.last_ms, "last_seq": self.last_seq,
                "applied": self.applied, "timer_run_since": self.timer_run_since, "last_tick": self.last_tick,
                "channels": self.channels, "runs": self.runs, **self._health_json(),
                **({"snapshots": self.snapshots} if self.snapshots else {}),
                **({"db_outside_runs": self.db_outside_runs} if self.db_outside_runs else {})}

    def db_changed_outside_runs(self) -> None:
        """To call where `db` is changed by anything but a run or hook (a state patch, a restore):
        a trial then says `this.db` before an earlier run cannot be rebuilt exactly."""
        self.db_outside_runs = self.runs

    def _health_json(self) -> dict[str, Any]:
        """Only what is set: a source nothing counted yet keeps its old, smaller item."""
        values = {"activity": self.activity, "last_run_ms": self.last_run_ms, "last_event_ms": self.last_event_ms,
                  "ran_tick": self.ran_tick, "skipped_ticks": self.skipped_ticks, "stalled": self.stalled}
        return {k: v for k, v in values.items() if v}

    @classmethod
    def from_json(cls, data: dict[str, Any], version: int) -> SourceState:
        return cls(db=data.get("db") or {}, dedupe=data.get("dedupe") or {}, last_ms=int(data.get("last_ms") or 0),
                   last_seq=int(data.get("last_seq") or 0), applied=list(data.get("applied") or []),
                   timer_run_since=data.get("timer_run_since"), last_tick=float(data.get("last_tick") or 0),
                   channels=list(data.get("channels") or []), activity=dict(data.get("activity") or {}),
                   last_run_ms=int(data.get("last_run_ms") or 0), last_event_ms=int(data.get("last_event_ms") or 0),
                   ran_tick=float(data.get("ran_tick") or 0), skipped_ticks=int(data.get("skipped_ticks") or 0),
                   stalled=data.get("stalled") or None, runs=int(data.get("runs") or 0),
                   snapshots=int(data.get("snapshots") or 0),
                   db_outside_runs=int(data.get("db_outside_runs") or 0), version=version)
