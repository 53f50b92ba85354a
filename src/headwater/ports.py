"""The ports: what services need from the outside world. Adapters in `adapters/local` and
`adapters/aws` implement them; services and routes never know which set is in use."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from headwater.domain.events import EventId
from headwater.domain.models import Component, Org, Source, SourceState, StoredEvent, User
from headwater.domain.pagination import Page, PageRequest


@dataclass(frozen=True)
class Task:
    """A durable unit of background work: a source run, an event deletion, ..."""

    id: int
    kind: str
    source_id: str | None
    payload: dict[str, Any]
    run_at: float
    attempts: int = 0


class UserRepository(Protocol):
    def add(self, user: User) -> None: ...
    def get(self, user_id: str) -> User | None: ...
    def by_username(self, username: str) -> User | None: ...
    def org_ids(self, user_id: str) -> frozenset[str]: ...


class OrgRepository(Protocol):
    def add(self, org: Org) -> None: ...
    def get(self, org_id: str) -> Org | None: ...
    def orgnames(self) -> set[str]: ...
    def add_member(self, org_id: str, user_id: str) -> None: ...
    def for_user(self, user_id: str) -> list[Org]: ...


class ApiKeyRepository(Protocol):
    def add(self, key_hash: str, user_id: str, created_at: int) -> None: ...
    def user_for(self, key_hash: str) -> str | None: ...
    def revoke(self, key_hash: str, revoked_at: int) -> bool: ...


class ComponentRepository(Protocol):
    def add(self, component: Component) -> None: ...
    def get(self, component_id: str) -> Component | None: ...
    def latest_by_key(self, namespace: str, key: str) -> Component | None: ...
    def list(self, namespace: str, page: PageRequest) -> Page[Component]: ...
    def publish(self, component: Component) -> None:
        """Adds or replaces the registry entry for the component's key."""


class UsageRepository(Protocol):
    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None: ...
    def totals(self, user_id: str, first_day: str, last_day: str) -> tuple[int, int]:
        """(invocations, compute_ms) over the inclusive range of UTC days (YYYY-MM-DD)."""


class SourceRepository(Protocol):
    def add(self, source: Source) -> None: ...
    def update(self, source: Source) -> None: ...
    def remove(self, source_id: str) -> None:
        """Removes the source with its state, events and timer."""
    def get(self, source_id: str) -> Source | None: ...
    def by_endpoint(self, endpoint_id: str) -> Source | None: ...
    def slugs(self, namespace: str) -> set[str]: ...
    def list(self, namespace: str, page: PageRequest) -> Page[Source]: ...


class StateRepository(Protocol):
    def get(self, source_id: str) -> SourceState: ...
    def save(self, source_id: str, state: SourceState) -> None: ...


class EventRepository(Protocol):
    def append(self, emitter_id: str, channel: str, event: Any, metadata: dict[str, Any], now_ms: int) -> EventId: ...
    def trim(self, emitter_id: str, channel: str, keep: int) -> None: ...
    def newest(self, emitter_id: str, channel: str, limit: int) -> list[StoredEvent]: ...
    def count(self, emitter_id: str, channel: str) -> int: ...
    def after(self, emitter_id: str, channel: str, event_id: EventId, limit: int) -> list[StoredEvent]: ...
    def delete_range(
        self, emitter_id: str, channel: str | None, start: EventId | None, end: EventId | None
    ) -> int:
        """Deletes the inclusive range of one channel, or of all the emitter's channels (None)."""


class TaskRepository(Protocol):
    def add(self, kind: str, source_id: str | None, payload: dict[str, Any], run_at: float) -> int: ...
    def done(self, task_id: int) -> None: ...
    def retry(self, task_id: int, run_at: float) -> None: ...
    def pending(self, task_ids: list[int] | None = None) -> list[Task]: ...
    def pending_for(self, source_id: str, kind: str) -> int: ...


class TimerRepository(Protocol):
    def set(self, source_id: str, spec: dict[str, Any], next_at: float) -> None: ...
    def remove(self, source_id: str) -> None: ...
    def advance(self, source_id: str, expected_at: float, next_at: float) -> bool: ...
    def all(self) -> list[tuple[str, dict[str, Any], float]]: ...


class UnitOfWork(Protocol):
    """One atomic change: repositories plus commit. Leaving without commit rolls back."""

    users: UserRepository
    orgs: OrgRepository
    keys: ApiKeyRepository
    components: ComponentRepository
    usage: UsageRepository
    sources: SourceRepository
    state: StateRepository
    events: EventRepository
    tasks: TaskRepository
    timers: TimerRepository

    def __enter__(self) -> UnitOfWork: ...
    def __exit__(self, *exc: object) -> None: ...
    def commit(self) -> None: ...


class UnitOfWorkFactory(Protocol):
    def __call__(self, readonly: bool = False) -> UnitOfWork: ...


@dataclass(frozen=True)
class Bundle:
    """Component code turned into one runnable script, made once per code hash."""

    hash: str
    code: str


class Bundler(Protocol):
    def bundle(self, code: str) -> Bundle:
        """Raises Invalid when the code does not parse or an npm import cannot be installed."""

    def source_of(self, entry_file: str) -> str:
        """One ESM source text for a file and its relative imports (registry publishing)."""


class Runner(Protocol):
    def call(
        self,
        op: str,
        request: dict[str, Any],
        bundle: Bundle | None = None,
        on_partial: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Runs one runner op (docs/runner-protocol.md) and returns its `result`.

        A runner-side failure of the call itself raises RunnerError with the runner's code."""

    def close(self) -> None: ...


class UrlFetcher(Protocol):
    def fetch_text(self, url: str) -> str:
        """GETs a URL within the size and time limits; raises Invalid when it cannot."""


# Handlers take consecutive tasks of one kind and lane (a source), so that they can commit them
# together, and a callback for partial results (a run's respond()); they return one result a task.
TaskHandler = Callable[[list[Task], Callable[[Task, dict[str, Any]], None]], list[Any]]


@dataclass
class Ingested:
    task_id: int
    outcome: Any = None  # an asyncio.Future when a response was asked for


class TaskQueue(Protocol):
    """Runs tasks after their transaction commits, one at a time per source, retrying failures."""

    def submitted(self, task_ids: list[int]) -> None:
        """Tells the queue that tasks were committed (added through `UnitOfWork.tasks`)."""

    def handle(self, kind: str, handler: TaskHandler) -> None: ...

    async def ingest(self, kind: str, source_id: str, payload: dict[str, Any], respond: bool = False) -> Ingested:
        """Adds one task durably (group commit) and returns once it is committed. With `respond`,
        `Ingested.outcome` resolves to ("respond", response) at the run's respond() call, or to
        ("done", handler result) when the run ends without one."""


class Scheduler(Protocol):
    """Fires timers: enqueues a timer run for each tick, once, never overlapping a pending one."""

    def changed(self) -> None:
        """Timers were added, moved or removed (through `UnitOfWork.timers`)."""


class Secrets(Protocol):
    def encrypt(self, value: Any) -> str: ...
    def decrypt(self, token: str) -> Any: ...


class EventBus(Protocol):
    """Tells live readers (SSE) that an emitter's channel has new events."""

    def published(self, emitter_id: str, channel: str) -> None: ...
    def listen(self, emitter_id: str, channel: str) -> asyncio.Event: ...
    def unlisten(self, emitter_id: str, channel: str, event: asyncio.Event) -> None: ...


class RunnerError(Exception):
    def __init__(self, code: str, message: str, stack: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.stack = stack
