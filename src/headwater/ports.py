"""The ports: what services need from the outside world. Adapters in `adapters/local` and
`adapters/aws` implement them; services and routes never know which set is in use."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from headwater.domain.models import Component, Org, User
from headwater.domain.pagination import Page, PageRequest


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


class UnitOfWork(Protocol):
    """One atomic change: repositories plus commit. Leaving without commit rolls back."""

    users: UserRepository
    orgs: OrgRepository
    keys: ApiKeyRepository
    components: ComponentRepository
    usage: UsageRepository

    def __enter__(self) -> UnitOfWork: ...
    def __exit__(self, *exc: object) -> None: ...
    def commit(self) -> None: ...


UnitOfWorkFactory = Callable[[], UnitOfWork]


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


class TaskQueue(Protocol):
    def enqueue(self, kind: str, payload: dict[str, Any], delay_seconds: float = 0) -> str: ...


class Scheduler(Protocol):
    def schedule(self, source_id: str, timer: dict[str, Any]) -> None: ...
    def unschedule(self, source_id: str) -> None: ...


class EventLog(Protocol):
    def iter_channel(self, emitter_id: str, channel: str) -> Iterator[dict[str, Any]]: ...


class RunnerError(Exception):
    def __init__(self, code: str, message: str, stack: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.stack = stack
