"""In-memory adapters for service tests (cosmicpython's fakes): every port, no I/O.

The fake unit of work behaves like the strictest store: writes are buffered and applied
atomically at `commit()`, where uniqueness and version conditions are checked (as DynamoDB's
TransactWriteItems does), and nothing a unit of work wrote is readable before it commits.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import inspect
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from headwater.adapters.in_process_lease import InProcessLease
from headwater.bootstrap import Adapters, Services, bootstrap
from headwater.domain.commands import Command, RunSource, TimerTick
from headwater.domain.connected_accounts import ConnectedAccount
from headwater.domain.errors import Conflict
from headwater.domain.events import Emit, EventId
from headwater.domain.models import Component, ComponentDefinition, Org, Source, SourceState, StoredEvent, User
from headwater.domain.oauth import OAuthClient, PendingConnect
from headwater.domain.pagination import Page, PageRequest, paginate
from headwater.domain.routing import Delivery, Subscription, Webhook
from headwater.domain.run_records import RunRecord
from headwater.domain.runs import RunResult, merge_db
from headwater.domain.snapshots import SNAPSHOTS_KEPT, StateSnapshot, newest
from headwater.domain.timers import Timer
from headwater.domain.workflows import Workflow
from headwater.ports import (
    AsyncTaskHandler,
    Bundle,
    Busy,
    Finished,
    Instance,
    NowHandler,
    Responded,
    RunAnswer,
    RunMessage,
    RunnerError,
    SendResult,
    Task,
    TaskHandler,
    Timed,
    results_of,
)
from headwater.settings import Settings

T = TypeVar("T")


@dataclass
class Data:
    users: dict[str, User] = field(default_factory=dict)
    orgs: dict[str, Org] = field(default_factory=dict)
    members: set[tuple[str, str]] = field(default_factory=set)
    keys: dict[str, tuple[str, bool]] = field(default_factory=dict)
    components: dict[str, Component] = field(default_factory=dict)
    registry: dict[str, str] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)
    states: dict[str, SourceState] = field(default_factory=dict)
    events: dict[tuple[str, str, str], StoredEvent] = field(default_factory=dict)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    webhooks: dict[str, Webhook] = field(default_factory=dict)
    deliveries: dict[str, Delivery] = field(default_factory=dict)
    workflows: dict[str, Workflow] = field(default_factory=dict)
    runs: dict[tuple[str, int], RunRecord] = field(default_factory=dict)
    snapshots: dict[tuple[str, int], StateSnapshot] = field(default_factory=dict)  # (source, seq % kept)
    seq: int = 0
    connected_accounts: dict[str, tuple[int, ConnectedAccount]] = field(default_factory=dict)  # id -> (seq, it)
    oauth_clients: dict[tuple[str, str], OAuthClient] = field(default_factory=dict)  # (owner, app) -> it
    pending_connects: dict[str, PendingConnect] = field(default_factory=dict)


def _claim(taken: set[Any], value: Any, field_name: str) -> None:
    if value in taken:
        raise Conflict(f"That {field_name} is taken.", field=field_name)


class _Repo:
    def __init__(self, uow: FakeUnitOfWork) -> None:
        self.uow = uow

    @property
    def data(self) -> Data:
        return self.uow.store.data

    def write(self, change: Callable[[Data], None]) -> None:
        if self.uow.readonly:
            raise RuntimeError("a read-only unit of work cannot write")
        self.uow.writes.append(change)


class FakeUsers(_Repo):
    def add(self, user: User) -> None:
        def change(d: Data) -> None:
            _claim({u.username for u in d.users.values()}, user.username, "username")
            d.users[user.id] = user
        self.write(change)

    def get(self, user_id: str) -> User | None:
        return self.data.users.get(user_id)

    def org_ids(self, user_id: str) -> frozenset[str]:
        return frozenset(o for o, u in self.data.members if u == user_id)


class FakeOrgs(_Repo):
    def add(self, org: Org) -> None:
        def change(d: Data) -> None:
            _claim({o.orgname for o in d.orgs.values()}, org.orgname, "orgname")
            d.orgs[org.id] = org
        self.write(change)

    def get(self, org_id: str) -> Org | None:
        return self.data.orgs.get(org_id)

    def add_member(self, org_id: str, user_id: str) -> None:
        self.write(lambda d: d.members.add((org_id, user_id)))

    def for_user(self, user_id: str) -> list[Org]:
        orgs = [self.data.orgs[o] for o, u in self.data.members if u == user_id]
        return sorted(orgs, key=lambda o: (o.created_at, o.id))


class FakeKeys(_Repo):
    def add(self, key_hash: str, user_id: str, created_at: int) -> None:
        self.write(lambda d: d.keys.__setitem__(key_hash, (user_id, True)))

    def user_for(self, key_hash: str) -> str | None:
        user_id, active = self.data.keys.get(key_hash, (None, False))
        return user_id if active else None

    def revoke(self, key_hash: str, revoked_at: int) -> bool:
        if self.user_for(key_hash) is None:
            return False
        self.write(lambda d: d.keys.__setitem__(key_hash, (d.keys[key_hash][0], False)))
        return True


class FakeComponents(_Repo):
    def add(self, component: Component) -> None:
        self.uow.store.data.seq += 1  # an atomic counter: taken even if the unit of work fails
        component.seq = self.uow.store.data.seq
        self.write(lambda d: d.components.__setitem__(component.id, component))

    def get(self, component_id: str) -> Component | None:
        return self.data.components.get(component_id)

    def latest_by_key(self, namespace: str, key: str) -> Component | None:
        if namespace == "registry":
            found = self.data.registry.get(key)
            return self.data.components.get(found) if found else None
        matches = [c for c in self.data.components.values() if c.namespace == namespace and c.key == key]
        return max(matches, key=lambda c: c.seq) if matches else None

    def list(self, namespace: str, page: PageRequest) -> Page[Component]:
        return paginate([(c.seq, c) for c in self.data.components.values() if c.namespace == namespace], page)

    def publish(self, component: Component) -> None:
        self.write(lambda d: d.registry.__setitem__(component.key or "", component.id))

    def registry(self, page: PageRequest) -> Page[Component]:
        published = [self.data.components[c] for c in self.data.registry.values()]
        return paginate([(c.seq, c) for c in published], page)


class FakeSources(_Repo):
    def _check(self, d: Data, source: Source, previous: Source | None) -> None:
        others = [s for s in d.sources.values() if s.id != source.id]
        _claim({(s.namespace, s.name_slug) for s in others}, (source.namespace, source.name_slug), "name_slug")
        if source.endpoint_id:
            _claim({s.endpoint_id for s in others}, source.endpoint_id, "endpoint_id")

    def add(self, source: Source) -> None:
        self.uow.store.data.seq += 1
        source.seq = self.uow.store.data.seq
        snapshot = copy.deepcopy(source)

        def change(d: Data) -> None:
            self._check(d, snapshot, None)
            d.sources[source.id] = snapshot
        self.write(change)

    def update(self, source: Source, previous: Source) -> None:
        snapshot = copy.deepcopy(source)

        def change(d: Data) -> None:
            self._check(d, snapshot, previous)
            d.sources[source.id] = snapshot
        self.write(change)

    def remove(self, source: Source) -> None:
        self.write(lambda d: d.sources.pop(source.id, None))

    def get(self, source_id: str) -> Source | None:
        found = self.data.sources.get(source_id)
        return copy.deepcopy(found) if found else None

    def by_endpoint(self, endpoint_id: str) -> Source | None:
        return next((copy.deepcopy(s) for s in self.data.sources.values() if s.endpoint_id == endpoint_id), None)

    def list(self, namespace: str, page: PageRequest) -> Page[Source]:
        return paginate([(s.seq, s) for s in self.data.sources.values() if s.namespace == namespace], page)


class FakeState(_Repo):
    def get(self, source_id: str) -> SourceState:
        return copy.deepcopy(self.data.states.get(source_id) or SourceState())

    def save(self, source_id: str, state: SourceState, expected_version: int) -> None:
        snapshot = copy.deepcopy(state)

        def change(d: Data) -> None:
            current = d.states.get(source_id)
            if (current.version if current else 0) != expected_version:
                raise Conflict(f"source {source_id} changed meanwhile", field="version")
            snapshot.version = expected_version + 1
            d.states[source_id] = snapshot
        self.write(change)
        self.uow.store.before_commit(self.uow, source_id)

    def remove(self, source_id: str) -> None:
        self.write(lambda d: d.states.pop(source_id, None))


class FakeEvents(_Repo):
    def _channel(self, emitter_id: str, channel: str) -> list[StoredEvent]:
        found = [e for (em, ch, _), e in self.data.events.items() if em == emitter_id and ch == channel]
        return sorted(found, key=lambda e: EventId.parse(e.id), reverse=True)

    def put(self, emitter_id: str, event: StoredEvent) -> None:
        self.write(lambda d: d.events.setdefault((emitter_id, event.channel, event.id), event))

    def trim(self, emitter_id: str, channel: str, keep: int) -> None:
        def change(d: Data) -> None:
            found = sorted((k for k in d.events if k[0] == emitter_id and k[1] == channel),
                           key=lambda k: EventId.parse(k[2]), reverse=True)
            for k in found[keep:]:
                del d.events[k]
        self.write(change)

    def get(self, emitter_id: str, channel: str, event_id: str) -> StoredEvent | None:
        return self.data.events.get((emitter_id, channel, event_id))

    def newest(self, emitter_id: str, channel: str, limit: int) -> list[StoredEvent]:
        return self._channel(emitter_id, channel)[:limit]

    def count(self, emitter_id: str, channel: str) -> int:
        return len(self._channel(emitter_id, channel))

    def after(self, emitter_id: str, channel: str, event_id: EventId, limit: int) -> list[StoredEvent]:
        return [e for e in reversed(self._channel(emitter_id, channel)) if EventId.parse(e.id) > event_id][:limit]

    def delete_range(self, emitter_id: str, channel: str | None, start: EventId | None, end: EventId | None) -> int:
        doomed = [k for k in self.data.events if k[0] == emitter_id and (channel is None or k[1] == channel)
                  and (start is None or EventId.parse(k[2]) >= start) and (end is None or EventId.parse(k[2]) <= end)]
        for k in doomed:
            del self.data.events[k]  # like DynamoDB's batch deletes: at once, not with the commit
        return len(doomed)


class FakeRunRecords(_Repo):
    def put(self, owner_id: str, record: RunRecord) -> None:
        self.write(lambda d: d.runs.setdefault((owner_id, record.seq), copy.deepcopy(record)))

    def trim(self, owner_id: str, below_seq: int) -> None:
        def change(d: Data) -> None:
            for key in [k for k in d.runs if k[0] == owner_id and k[1] < below_seq]:
                del d.runs[key]
        self.write(change)

    def get(self, owner_id: str, seq: int, floor: int) -> RunRecord | None:
        return copy.deepcopy(self.data.runs.get((owner_id, seq))) if seq >= floor else None

    def list(self, owner_id: str, page: PageRequest, floor: int) -> Page[RunRecord]:
        rows = [(seq, copy.deepcopy(r)) for (owner, seq), r in self.data.runs.items()
                if owner == owner_id and seq >= floor]
        return paginate(rows, page)

    def remove_all(self, owner_id: str) -> None:
        for key in [k for k in self.data.runs if k[0] == owner_id]:
            del self.data.runs[key]


class FakeSnapshots(_Repo):
    """A ring of SNAPSHOTS_KEPT slots per source, as the DynamoDB one."""

    def put(self, source_id: str, snapshot: StateSnapshot) -> None:
        kept = copy.deepcopy(snapshot)
        self.write(lambda d: d.snapshots.__setitem__((source_id, kept.seq % SNAPSHOTS_KEPT), kept))

    def list(self, source_id: str) -> list[StateSnapshot]:
        return newest([copy.deepcopy(s) for (owner, _), s in self.data.snapshots.items() if owner == source_id])

    def get(self, source_id: str, snapshot_id: str) -> StateSnapshot | None:
        return next((s for s in self.list(source_id) if s.id == snapshot_id), None)

    def remove_all(self, source_id: str) -> None:
        for key in [k for k in self.data.snapshots if k[0] == source_id]:
            del self.data.snapshots[key]


class FakeSubscriptions(_Repo):
    def add(self, subscription: Subscription) -> None:
        self.write(lambda d: d.subscriptions.setdefault(subscription.id, subscription))

    def remove(self, subscription_id: str) -> bool:
        found = subscription_id in self.data.subscriptions
        self.write(lambda d: d.subscriptions.pop(subscription_id, None))
        return found

    def for_namespace(self, namespace: str) -> list[Subscription]:
        return [s for s in self.data.subscriptions.values() if s.namespace == namespace]

    def remove_naming(self, resource_id: str) -> None:
        def change(d: Data) -> None:
            for key in [k for k, s in d.subscriptions.items() if resource_id in (s.emitter_id, s.listener_id)]:
                del d.subscriptions[key]
        self.write(change)

    def finish_backfill(self, subscription_id: str) -> None:
        def change(d: Data) -> None:
            if subscription_id in d.subscriptions:
                d.subscriptions[subscription_id] = replace(d.subscriptions[subscription_id],
                                                         backfilling=False)
        self.write(change)


class FakeWebhooks(_Repo):
    def add(self, webhook: Webhook) -> None:
        self.uow.store.data.seq += 1
        webhook.seq = self.uow.store.data.seq
        self.write(lambda d: d.webhooks.__setitem__(webhook.id, copy.deepcopy(webhook)))

    def get(self, webhook_id: str) -> Webhook | None:
        return copy.deepcopy(self.data.webhooks.get(webhook_id))

    def update(self, webhook: Webhook) -> None:
        """Everything but the signing secret, which is the webhook's for life (as the stores keep it)."""
        def change(d: Data) -> None:
            if webhook.id in d.webhooks:
                d.webhooks[webhook.id] = replace(webhook, signing_secret=d.webhooks[webhook.id].signing_secret)
        self.write(change)

    def remove(self, webhook_id: str) -> None:
        self.write(lambda d: d.webhooks.pop(webhook_id, None))

    def list(self, namespace: str, page: PageRequest) -> Page[Webhook]:
        return paginate([(w.seq, w) for w in self.data.webhooks.values() if w.namespace == namespace], page)


class FakeDeliveries(_Repo):
    def add(self, delivery: Delivery) -> None:
        self.uow.store.data.seq += 1
        seq = self.uow.store.data.seq

        def change(d: Data) -> None:
            _claim(set(d.deliveries), delivery.id, "delivery")
            d.deliveries[delivery.id] = replace(copy.deepcopy(delivery), version=1)
            self.uow.store.delivery_seqs[delivery.id] = seq
        self.write(change)

    def get(self, delivery_id: str) -> Delivery | None:
        return copy.deepcopy(self.data.deliveries.get(delivery_id))

    def save(self, delivery: Delivery, expected_version: int) -> None:
        def change(d: Data) -> None:
            if d.deliveries[delivery.id].version != expected_version:
                raise Conflict("changed meanwhile", field="version")
            d.deliveries[delivery.id] = replace(copy.deepcopy(delivery), version=expected_version + 1)
        self.write(change)

    def for_webhook(self, webhook_id: str, page: PageRequest) -> Page[Delivery]:
        seqs = self.uow.store.delivery_seqs
        return paginate([(seqs[k], d) for k, d in self.data.deliveries.items() if d.webhook_id == webhook_id], page)


class FakeWorkflows(_Repo):
    def add(self, workflow: Workflow) -> None:
        def change(d: Data) -> None:
            _claim({(w.namespace, w.name) for w in d.workflows.values()}, (workflow.namespace, workflow.name), "name")
            d.workflows[workflow.id] = copy.deepcopy(workflow)
        self.write(change)

    def update(self, workflow: Workflow) -> None:
        self.write(lambda d: d.workflows.__setitem__(workflow.id, copy.deepcopy(workflow)))

    def get(self, workflow_id: str) -> Workflow | None:
        return copy.deepcopy(self.data.workflows.get(workflow_id))

    def by_name(self, namespace: str, name: str) -> Workflow | None:
        return next((copy.deepcopy(w) for w in self.data.workflows.values()
                     if w.namespace == namespace and w.name == name), None)

    def list(self, namespace: str) -> list[Workflow]:
        """Newest first, as the stores list them."""
        return [w for w in reversed(self.data.workflows.values()) if w.namespace == namespace]

    def remove(self, workflow: Workflow) -> None:
        self.write(lambda d: d.workflows.pop(workflow.id, None))


class FakeConnectedAccounts(_Repo):
    def add(self, account: ConnectedAccount) -> None:
        self.uow.store.data.seq += 1
        seq = self.uow.store.data.seq

        def change(d: Data) -> None:
            _claim(set(d.connected_accounts), account.id, "id")
            d.connected_accounts[account.id] = (seq, account)
        self.write(change)

    def get(self, account_id: str) -> ConnectedAccount | None:
        found = self.data.connected_accounts.get(account_id)
        return found[1] if found else None

    def list(self, owner: str, page: PageRequest) -> Page[ConnectedAccount]:
        return paginate([x for x in self.data.connected_accounts.values() if x[1].owner == owner], page)

    def list_many(self, owners: Collection[str], page: PageRequest) -> Page[ConnectedAccount]:
        return paginate([x for x in self.data.connected_accounts.values() if x[1].owner in owners], page)

    def save(self, account: ConnectedAccount, expected_version: int) -> None:
        def change(d: Data) -> None:
            found = d.connected_accounts.get(account.id)
            if found is None or found[1].version != expected_version:
                raise Conflict("changed meanwhile", field="version")
            d.connected_accounts[account.id] = (found[0], replace(account, version=expected_version + 1))
        self.write(change)

    def remove(self, account_id: str) -> None:
        self.write(lambda d: d.connected_accounts.pop(account_id, None))


class FakeOAuthClients(_Repo):
    def put(self, client: OAuthClient) -> None:
        self.write(lambda d: d.oauth_clients.__setitem__((client.owner, client.app), client))

    def get(self, owner: str, app: str) -> OAuthClient | None:
        return self.data.oauth_clients.get((owner, app))

    def list(self, owner: str) -> list[OAuthClient]:
        return sorted((c for c in self.data.oauth_clients.values() if c.owner == owner), key=lambda c: c.app)

    def remove(self, owner: str, app: str) -> None:
        self.write(lambda d: d.oauth_clients.pop((owner, app), None))


class FakePendingConnects(_Repo):
    def add(self, pending: PendingConnect) -> None:
        def change(d: Data) -> None:
            _claim(set(d.pending_connects), pending.state, "state")
            d.pending_connects[pending.state] = pending
        self.write(change)

    def get(self, state: str) -> PendingConnect | None:
        found = self.data.pending_connects.get(state)
        return found if found and found.expires_at >= int(time.time()) else None

    def take(self, state: str) -> None:
        def change(d: Data) -> None:
            if d.pending_connects.pop(state, None) is None:
                raise Conflict("taken", field="state")
        self.write(change)


class FakeUsageLog(_Repo):
    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None:
        usage = self.uow.store.usage
        self.uow.after_commit.append(lambda: usage.record(user_id, day, invocations, compute_ms))


class FakeOutbox(_Repo):
    def add(self, command: Command, delay_s: float = 0.0) -> None:
        if self.uow.readonly:
            raise RuntimeError("a read-only unit of work cannot write")
        self.uow.commands.append((command, delay_s))


class FakeUnitOfWork:
    max_writes: int | None

    def __init__(self, store: FakeStore, readonly: bool) -> None:
        self.store = store
        self.readonly = readonly
        self.max_writes = store.max_writes
        self.writes: list[Callable[[Data], None]] = []
        self.commands: list[tuple[Command, float]] = []
        self.users = FakeUsers(self)
        self.orgs = FakeOrgs(self)
        self.keys = FakeKeys(self)
        self.components = FakeComponents(self)
        self.sources = FakeSources(self)
        self.state = FakeState(self)
        self.events = FakeEvents(self)
        self.runs = FakeRunRecords(self)
        self.snapshots = FakeSnapshots(self)
        self.usage = FakeUsageLog(self)
        self.subscriptions = FakeSubscriptions(self)
        self.webhooks = FakeWebhooks(self)
        self.deliveries = FakeDeliveries(self)
        self.workflows = FakeWorkflows(self)
        self.outbox = FakeOutbox(self)
        self.connected_accounts = FakeConnectedAccounts(self)
        self.oauth_clients = FakeOAuthClients(self)
        self.pending_connects = FakePendingConnects(self)
        self.after_commit: list[Callable[[], None]] = []

    def __enter__(self) -> FakeUnitOfWork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.writes, self.commands, self.after_commit = [], [], []

    def commit(self) -> None:
        if self.max_writes is not None and len(self.writes) + len(self.commands) > self.max_writes:
            raise AssertionError(f"{len(self.writes)} writes in one commit, over {self.max_writes}")
        with self.store.lock:
            draft = copy.deepcopy(self.store.data)
            for change in self.writes:
                change(draft)
            self.store.data = draft
            self.store.commits += 1
        commands, self.writes, self.commands = self.commands, [], []
        for effect in self.after_commit:
            effect()
        self.store.queue.enqueue(commands)


class FakeStore:
    def __init__(self, queue: FakeQueue, usage: FakeUsage, max_writes: int | None = None) -> None:
        self.data = Data()
        self.usage = usage
        self.delivery_seqs: dict[str, int] = {}
        self.lock = threading.Lock()
        self.queue = queue
        self.max_writes = max_writes
        self.commits = 0
        # A test can slip another writer in between a unit of work's state read and its commit.
        self.before_commit: Callable[[FakeUnitOfWork, str], None] = lambda uow, source_id: None

    def uow(self, readonly: bool = False) -> FakeUnitOfWork:
        return FakeUnitOfWork(self, readonly)


class FakeUsage:
    def __init__(self) -> None:
        self.days: dict[tuple[str, str], dict[str, int]] = {}

    def _day(self, user_id: str, day: str) -> dict[str, int]:
        return self.days.setdefault((user_id, day), {"invocations": 0, "compute_ms": 0, "admitted": 0})

    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None:
        row = self._day(user_id, day)
        row["invocations"] += invocations
        row["compute_ms"] += compute_ms

    def totals(self, user_id: str, first_day: str, last_day: str) -> tuple[int, int]:
        rows = [r for (u, d), r in self.days.items() if u == user_id and first_day <= d <= last_day]
        return sum(r["invocations"] for r in rows), sum(r["compute_ms"] for r in rows)

    def admit(self, user_id: str, day: str, cap: int) -> bool:
        row = self._day(user_id, day)
        if row["admitted"] >= cap:
            return False
        row["admitted"] += 1
        return True

    def release(self, user_id: str, day: str) -> None:
        row = self._day(user_id, day)
        row["admitted"] = max(0, row["admitted"] - 1)


class FakeIngestCounts:
    """The IngestCounts port in memory; `adds` counts the calls (the store calls a lease costs)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, int], int] = {}
        self.adds = 0
        self._lock = threading.Lock()

    def add(self, tenant: str, window: int, n: int, allowance: int, expires_at: int) -> int:
        with self._lock:
            self.adds += 1
            before = self.counts.get((tenant, window), 0)
            if before < allowance:
                self.counts[(tenant, window)] = before + n
            return before


class FakeLease(InProcessLease):
    """The in-process lease (adapters/in_process_lease.py) is in memory already: the fakes use it as
    is, so a service test's waits and order are the stores' (the contract suite checks all three)."""


class LeaseHeldElsewhere:
    """A lease as a stuck machine holds it: any id held is refused at once, even to its holder."""

    def __init__(self) -> None:
        self.holding: set[str] = set()

    @contextmanager
    def hold(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> Iterator[None]:
        if source_id in self.holding:
            raise Busy(source_id)
        self.holding.add(source_id)
        try:
            yield
        finally:
            self.holding.discard(source_id)


class FakeWrites:
    """The Writes port in the test's own thread: the write, at once."""

    async def call(self, write: Callable[[], T]) -> T:
        return write()


def to_end(value: Any) -> Any:
    """A handler's results: a coroutine's run to its end (on a thread of its own when the caller
    is on an event loop already), a Future's waited for."""
    if not inspect.iscoroutine(value):
        return results_of(value)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(value)
    context = contextvars.copy_context()
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(context.run, asyncio.run, value).result()


class FakeQueue:
    """Keeps committed commands until a test runs them (`drain`), through the real handlers."""

    def __init__(self) -> None:
        self.handlers: dict[str, TaskHandler | AsyncTaskHandler] = {}
        self.pending: list[tuple[Task, float]] = []
        self.ids = 0
        self.results: list[tuple[Task, Any]] = []

    def enqueue(self, commands: list[tuple[Command, float]]) -> None:
        for command, delay in commands:
            self.ids += 1
            self.pending.append((Task(str(self.ids), command), delay))

    def handle(self, command: type[Command], handler: TaskHandler | AsyncTaskHandler,
               now: NowHandler | None = None) -> None:
        self.handlers[command.name] = handler

    async def ingest(self, command: RunSource) -> str:
        self.enqueue([(command, 0.0)])
        return self.pending[-1][0].id

    async def ingest_answered(self, command: RunSource, timeout_s: float) -> RunAnswer:
        """Committed, then run at once by the caller's coroutine: its first respond(), else its
        result; a run that fails stays pending (the queue would retry it)."""
        self.enqueue([(command, 0.0)])
        entry = self.pending[-1]
        responses: list[dict[str, Any]] = []
        try:
            results = await self.handlers[command.name]([entry[0]], lambda _task, response: responses.append(response))  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - left pending, as the queue would retry it
            return None
        self.pending.remove(entry)
        self.results.append((entry[0], results[0]))
        return responses[0] if responses else results[0]  # type: ignore[no-any-return]

    def of(self, kind: type[Command]) -> list[Any]:
        return [t.command for t, _ in self.pending if isinstance(t.command, kind)]

    def drain(self, only: type[Command] | None = None) -> list[tuple[Task, Any]]:
        """Runs pending commands (and what they queue) one at a time, as a worker would."""
        done = []
        while True:
            ready = [p for p in self.pending if only is None or isinstance(p[0].command, only)]
            if not ready:
                return done
            self.pending.remove(ready[0])
            task = ready[0][0]
            result = to_end(self.handlers[task.command.name]([task], lambda t, r: None))[0]
            done.append((task, result))
            self.results.append((task, result))

    def redeliver(self, task: Task) -> Any:
        return to_end(self.handlers[task.command.name]([task], lambda t, r: None))[0]


class FakeScheduler:
    def __init__(self) -> None:
        self.timers: dict[str, Timer] = {}
        self.stale: set[str] = set()

    def set(self, source_id: str, timer: Timer) -> None:
        self.timers[source_id] = timer

    def remove(self, source_id: str) -> None:
        self.timers.pop(source_id, None)

    def ticked(self, tick: TimerTick, timer: Timer) -> bool:
        return tick.token not in self.stale


class FakeStallWatch:
    def __init__(self) -> None:
        self.entries: dict[str, float] = {}

    def arm(self, source_id: str, check_at: float) -> None:
        self.entries[source_id] = check_at

    def disarm(self, source_id: str) -> None:
        self.entries.pop(source_id, None)

    def due(self, now: float, limit: int) -> list[tuple[str, float]]:
        return sorted(((s, at) for s, at in self.entries.items() if at <= now), key=lambda e: e[1])[:limit]

    def move(self, source_id: str, seen: float, check_at: float) -> bool:
        if self.entries.get(source_id) != seen:
            return False
        self.entries[source_id] = check_at
        return True


class FakeBundler:
    def bundle(self, code: str, lock: Mapping[str, str] | None = None) -> Bundle:
        return Bundle(str(hash(code)), code)

    def source_of(self, entry_file: str) -> str:
        raise NotImplementedError("registry publishing is not part of the service tests")

    def sources_of(self, entry_files: Sequence[str]) -> list[tuple[str | None, str | None]]:
        raise NotImplementedError("registry publishing is not part of the service tests")

    def bundle_many(self, codes: Sequence[str]) -> dict[str, str]:
        return {}

    def discard(self, code: str) -> None:
        pass

    def prune_store(self) -> bool:
        return True


class FakeRunner:
    """Components are described by a dict literal in their code; runs call `script(instance, event)`.
    Calls without an instance take `duration_ms` (as the caller would measure it), and so does a
    call whose script raises a RunnerError; `bills` lists (op, bill_to) of every call."""

    def __init__(self) -> None:
        self.script: Callable[[Instance, Any], RunResult] = lambda instance, event: RunResult()
        self.hooks: Callable[[Instance, str], RunResult] = lambda instance, hook: RunResult()
        self.calls: list[tuple[str, str]] = []
        self.accounts: list[tuple[str, str]] = []  # (op, account) of the calls without an instance
        self.bills: list[tuple[str, str]] = []  # (op, who pays) of every call
        self.duration_ms = 0.0
        self.describe_error: RunnerError | None = None

    def _measured(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except RunnerError as e:
            e.duration_ms = e.duration_ms or self.duration_ms
            raise

    def describe(self, bundle: Bundle, timeout_ms: int, account: str, bill_to: str) -> Timed[ComponentDefinition]:
        self.accounts.append(("describe", account))
        self.bills.append(("describe", bill_to))
        if self.describe_error is not None:
            self.describe_error.duration_ms = self.duration_ms
            raise self.describe_error
        return Timed(ComponentDefinition(**eval(bundle.code)), self.duration_ms)  # noqa: S307 - the tests' own literals

    def run(self, bundle: Bundle, instance: Instance, event: Any, timeout_ms: int,
            on_respond: Callable[[dict[str, Any]], None] | None = None) -> RunResult:
        self.calls.append(("run", instance.id))
        self.bills.append(("run", instance.bill_to))
        result = self._measured(lambda: self.script(instance, event))
        if on_respond is not None and result.response is not None:
            on_respond(result.response)
        return result

    def run_many(self, bundle: Bundle, instance: Instance, events: list[Any], timeout_ms: int,
                 on_respond: Callable[[int, dict[str, Any]], None] | None = None) -> list[RunResult]:
        results = []
        for index, event in enumerate(events):
            respond = None if on_respond is None else functools.partial(on_respond, index)
            result = self.run(bundle, instance, event, timeout_ms, respond)
            instance = replace(instance, db=merge_db(instance.db, result.db_writes))
            results.append(result)
        return results

    def hook(self, bundle: Bundle, instance: Instance, hook: str, timeout_ms: int) -> RunResult:
        self.calls.append((hook, instance.id))
        self.bills.append((hook, instance.bill_to))
        return self._measured(lambda: self.hooks(instance, hook))

    def run_step(self, bundle: Bundle, instance: Instance, steps: dict[str, Any], timeout_ms: int) -> RunResult:
        self.calls.append(("step", instance.id))
        self.bills.append(("step", instance.bill_to))
        return self._measured(lambda: self.script(instance, steps))

    def additional_props(self, bundle: Bundle, instance_id: str, props: dict[str, Any],
                         timeout_ms: int, account: str, bill_to: str) -> Timed[list[dict[str, Any]]]:
        self.accounts.append(("additional_props", account))
        self.bills.append(("additional_props", bill_to))
        return Timed(list(eval(bundle.code)["configurable_props"]), self.duration_ms)  # noqa: S307

    def options(self, bundle: Bundle, instance_id: str, prop: str, props: dict[str, Any], page: int,
                prev_context: Any, query: str | None, timeout_ms: int, account: str,
                bill_to: str) -> Timed[dict[str, Any]]:
        self.accounts.append(("options", account))
        self.bills.append(("options", bill_to))
        return Timed({"options": [], "context": None}, self.duration_ms)

    def close(self) -> None:
        pass


class FakeAsyncRunner:
    """The Runner port over a FakeRunner's scripts, in the caller's coroutine (no thread): a run's
    RunResult.response is yielded as its respond() before the outcome."""

    def __init__(self, fake: FakeRunner) -> None:
        self.fake = fake

    async def describe(self, bundle: Bundle, timeout_ms: int, account: str, bill_to: str) -> Timed[ComponentDefinition]:
        return self.fake.describe(bundle, timeout_ms, account, bill_to)

    async def run(self, bundle: Bundle, instance: Instance, events: list[Any],
                  timeout_ms: int) -> AsyncIterator[RunMessage]:
        results = self.fake.run_many(bundle, instance, events, timeout_ms)
        for index, result in enumerate(results):
            if result.response is not None:
                yield Responded(index, result.response)
        yield Finished(results)

    async def hook(self, bundle: Bundle, instance: Instance, hook: str, timeout_ms: int) -> RunResult:
        return self.fake.hook(bundle, instance, hook, timeout_ms)

    async def run_step(self, bundle: Bundle, instance: Instance, steps: dict[str, Any], timeout_ms: int) -> RunResult:
        return self.fake.run_step(bundle, instance, steps, timeout_ms)

    async def additional_props(self, bundle: Bundle, instance_id: str, props: dict[str, Any], timeout_ms: int,
                               account: str, bill_to: str) -> Timed[list[dict[str, Any]]]:
        return self.fake.additional_props(bundle, instance_id, props, timeout_ms, account, bill_to)

    async def options(self, bundle: Bundle, instance_id: str, prop: str, props: dict[str, Any], page: int,
                      prev_context: Any, query: str | None, timeout_ms: int, account: str,
                      bill_to: str) -> Timed[dict[str, Any]]:
        return self.fake.options(bundle, instance_id, prop, props, page, prev_context, query, timeout_ms, account,
                                 bill_to)

    async def aclose(self) -> None:
        pass


class FakeSecrets:
    def encrypt(self, value: Any) -> str:
        import json
        return "enc:" + json.dumps(value)

    def decrypt(self, token: str) -> Any:
        import json
        return json.loads(token.removeprefix("enc:"))


class FakeBus:
    def __init__(self) -> None:
        self.published_to: list[tuple[str, str]] = []
        self._forgetters: list[Callable[[str], None]] = []

    def endpoint_changed(self, endpoint_id: str) -> None:
        for forget in self._forgetters:
            forget(endpoint_id)

    def on_endpoint_changed(self, forget: Callable[[str], None]) -> None:
        self._forgetters.append(forget)

    def published(self, emitter_id: str, channel: str) -> None:
        self.published_to.append((emitter_id, channel))

    def listen(self, emitter_id: str, channel: str) -> asyncio.Event:
        return asyncio.Event()

    def unlisten(self, emitter_id: str, channel: str, event: asyncio.Event) -> None:
        pass


class FakeSender:
    """Answers each request with the next scripted status (200 when the script runs out)."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.sent: list[tuple[str, str, bytes, dict[str, str]]] = []

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> SendResult:
        return self.request("POST", url, body, headers)

    def request(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> SendResult:
        self.sent.append((method, url, body, headers))
        status = self.statuses.pop(0) if self.statuses else 200
        return SendResult(status, None if status < 300 else f"answered {status}")


class FakeMailer:
    def __init__(self) -> None:
        self.configured = True
        self.sent: list[tuple[str, str, str | None, str | None]] = []

    def send(self, to: str, subject: str, text: str | None, html: str | None) -> SendResult:
        self.sent.append((to, subject, text, html))
        return SendResult(200)


class FakeObjects:
    def __init__(self) -> None:
        self.configured = True
        self.objects: dict[tuple[str, str], bytes] = {}

    def put(self, bucket: str, key: str, body: bytes, content_type: str) -> SendResult:
        self.objects[(bucket, key)] = body
        return SendResult(200)


class FakeFetcher:
    async def fetch_text(self, url: str) -> str:
        raise NotImplementedError("no network in service tests")


@dataclass
class World:
    services: Services
    store: FakeStore
    queue: FakeQueue
    runner: FakeRunner
    scheduler: FakeScheduler
    usage: FakeUsage
    bus: FakeBus
    sender: FakeSender
    ingest_counts: FakeIngestCounts


def world(max_writes: int | None = None, **settings: Any) -> World:
    queue, usage = FakeQueue(), FakeUsage()
    store = FakeStore(queue, usage, max_writes)
    runner, scheduler, bus, sender = FakeRunner(), FakeScheduler(), FakeBus(), FakeSender()
    counts = FakeIngestCounts()
    settings.setdefault("ingest_rate", 0)  # no budget unless a test asks for one
    adapters = Adapters(uow=store.uow, usage=usage, lease=FakeLease(), ingest_counts=counts, bundler=FakeBundler(),
                        runner=FakeAsyncRunner(runner), blocking_runner=runner, writes=FakeWrites(),
                        fetcher=FakeFetcher(), secrets=FakeSecrets(), queue=queue,
                        scheduler=scheduler, bus=bus,
                        sender=sender, mailer=FakeMailer(), objects=FakeObjects(), watch=FakeStallWatch())
    services = bootstrap(Settings(**settings), adapters)
    return World(services, store, queue, runner, scheduler, usage, bus, sender, counts)


def emits(*items: tuple[Any, dict[str, Any]]) -> list[Emit]:
    return [Emit(event, meta) for event, meta in items]


class FakeOAuthClient:
    """ports.OAuthClientPort: codes and refresh tokens it issued, each refresh token usable once
    (rotation, as strict providers do); `refreshes` counts the refreshes it answered, `fail_next`
    makes the next calls raise (an OAuthGrantError or OAuthUnavailable instance)."""

    def __init__(self, clock: Callable[[], float] = time.time, lifetime_s: int = 3600) -> None:
        self.clock = clock
        self.lifetime_s = lifetime_s
        self.codes: dict[str, str] = {}  # code -> the verifier it was authorized with
        self.live_refresh: set[str] = set()
        self.refreshes = 0
        self.fail_next: list[Exception] = []
        self.lock = threading.Lock()
        self._n = 0

    def authorization_url(self, endpoints: Any, redirect_uri: str, state: str, verifier: str) -> str:
        return f"{endpoints.authorize_url}?state={state}&redirect_uri={redirect_uri}&client_id={endpoints.client_id}"

    def authorize(self, verifier_of_state: str) -> str:
        """The provider's side of a user authorizing: a code for that verifier."""
        code = f"code-{len(self.codes)}"
        self.codes[code] = verifier_of_state
        return code

    def _tokens(self) -> Any:
        from headwater.domain.oauth import TokenSet
        self._n += 1
        refresh = f"refresh-{self._n}"
        self.live_refresh.add(refresh)
        return TokenSet(f"access-{self._n}", refresh, int(self.clock()) + self.lifetime_s, "read", "uid-1")

    async def exchange(self, endpoints: Any, code: str, redirect_uri: str, verifier: str) -> Any:
        from headwater.ports import OAuthGrantError
        with self.lock:
            if self.fail_next:
                raise self.fail_next.pop(0)
            if self.codes.pop(code, None) != verifier:
                raise OAuthGrantError("the provider refused: invalid_grant")
            return self._tokens()

    def refresh(self, endpoints: Any, refresh_token: str) -> Any:
        from headwater.ports import OAuthGrantError
        with self.lock:
            if self.fail_next:
                raise self.fail_next.pop(0)
            if refresh_token not in self.live_refresh:
                self.live_refresh.clear()  # a refresh token used twice revokes the grant
                raise OAuthGrantError("the provider refused: invalid_grant")
            self.live_refresh.discard(refresh_token)
            self.refreshes += 1
            return self._tokens()
