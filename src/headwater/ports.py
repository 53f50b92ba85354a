"""The ports: what services need from the outside world. Adapters in `adapters/local` and
`adapters/aws` implement them; services and routes never know which set is in use.

Every write here is one that a DynamoDB `TransactWriteItems` or a conditional put can do: no
interactive transactions, no reading your own writes, uniqueness by conditional insert (a taken
name raises `Conflict` with its field), state saved conditionally on its version. A unit of work
may raise `Conflict` at the write or only at `commit()`: callers handle both the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from headwater.domain.commands import Command, RunSource, TimerTick
from headwater.domain.connected_accounts import ConnectedAccount
from headwater.domain.events import EventId
from headwater.domain.models import Component, ComponentDefinition, Org, Source, SourceState, StoredEvent, User
from headwater.domain.oauth import OAuthClient, PendingConnect, TokenSet
from headwater.domain.pagination import Page, PageRequest
from headwater.domain.routing import Delivery, Subscription, Webhook
from headwater.domain.run_records import RunRecord
from headwater.domain.runs import RunResult
from headwater.domain.snapshots import StateSnapshot
from headwater.domain.timers import Timer
from headwater.domain.workflows import Workflow

T = TypeVar("T")

# storage


class UserRepository(Protocol):
    def add(self, user: User) -> None:
        """Conflict("username") when the username is taken."""

    def get(self, user_id: str) -> User | None: ...
    def org_ids(self, user_id: str) -> frozenset[str]: ...


class OrgRepository(Protocol):
    def add(self, org: Org) -> None:
        """Conflict("orgname") when the orgname is taken."""

    def get(self, org_id: str) -> Org | None: ...
    def add_member(self, org_id: str, user_id: str) -> None:
        """Idempotent."""

    def for_user(self, user_id: str) -> list[Org]: ...


class ApiKeyRepository(Protocol):
    def add(self, key_hash: str, user_id: str, created_at: int) -> None: ...
    def user_for(self, key_hash: str) -> str | None: ...
    def revoke(self, key_hash: str, revoked_at: int) -> bool:
        """False when no active key has this hash."""


class ComponentRepository(Protocol):
    def add(self, component: Component) -> None:
        """Assigns `component.seq` (the list order), from an atomic counter."""

    def get(self, component_id: str) -> Component | None: ...
    def latest_by_key(self, namespace: str, key: str) -> Component | None: ...
    def list(self, namespace: str, page: PageRequest) -> Page[Component]: ...
    def publish(self, component: Component) -> None:
        """Adds or replaces the registry entry for the component's key."""

    def registry(self, page: PageRequest) -> Page[Component]:
        """The published components (one per key), newest first."""


class UsageRepository(Protocol):
    """Per user and UTC day (YYYY-MM-DD): runs admitted under the cap, runs done, compute used.
    Each method is one atomic update of its own, outside any unit of work."""

    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None: ...
    def totals(self, user_id: str, first_day: str, last_day: str) -> tuple[int, int]:
        """(invocations, compute_ms) over the inclusive range of days."""

    def admit(self, user_id: str, day: str, cap: int) -> bool:
        """Counts one more admitted run if fewer than `cap` were admitted that day."""

    def release(self, user_id: str, day: str) -> None:
        """An admitted run will never run: it gives its place back."""


class IngestCounts(Protocol):
    """Requests let in per tenant (a source's namespace) and fixed window (domain.ingest_budget),
    shared by every instance of the service. Each add is one atomic update of its own."""

    def add(self, tenant: str, window: int, n: int, allowance: int, expires_at: int) -> int:
        """Adds `n` to the window's count if the count is below `allowance`, and returns the count
        before the add (`allowance` or more: nothing was added). `expires_at` (Unix seconds): when
        the store may forget the count."""


class UsageLog(Protocol):
    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None:
        """Adds to the day's counters as part of the unit of work (an atomic add at commit), so a
        run's usage is counted exactly when its results are."""


class SourceRepository(Protocol):
    def add(self, source: Source) -> None:
        """Assigns `source.seq`. Conflict("name_slug") when the slug is taken in its namespace,
        Conflict("endpoint_id") when the endpoint id is."""

    def update(self, source: Source, previous: Source) -> None:
        """Replaces `previous` (its slug and endpoint claims move when they change); Conflict as add."""

    def remove(self, source: Source) -> None:
        """The source record and its claims; its state and events go by a PurgeSource command."""

    def get(self, source_id: str) -> Source | None: ...
    def by_endpoint(self, endpoint_id: str) -> Source | None: ...
    def list(self, namespace: str, page: PageRequest) -> Page[Source]: ...


class StateRepository(Protocol):
    def get(self, source_id: str) -> SourceState:
        """A never-saved source has the empty state at version 0."""

    def save(self, source_id: str, state: SourceState, expected_version: int) -> None:
        """Stores `state` as version `expected_version + 1`; Conflict("version") when the stored
        version is not `expected_version` (another writer got there first)."""

    def remove(self, source_id: str) -> None: ...


class EventRepository(Protocol):
    def put(self, emitter_id: str, event: StoredEvent) -> None:
        """Idempotent under (emitter, channel, id): writing the same event again changes nothing."""

    def trim(self, emitter_id: str, channel: str, keep: int) -> None:
        """Retention: only the newest `keep` of the channel remain (may take effect after commit)."""

    def get(self, emitter_id: str, channel: str, event_id: str) -> StoredEvent | None: ...
    def newest(self, emitter_id: str, channel: str, limit: int) -> list[StoredEvent]: ...
    def count(self, emitter_id: str, channel: str) -> int: ...
    def after(self, emitter_id: str, channel: str, event_id: EventId, limit: int) -> list[StoredEvent]:
        """Oldest first: the retained events newer than event_id."""

    def delete_range(self, emitter_id: str, channel: str | None, start: EventId | None, end: EventId | None) -> int:
        """Deletes the inclusive range of one channel, or of all the emitter's channels (None), at
        once and in batches; idempotent. Returns how many it deleted."""


class RunRecordRepository(Protocol):
    """The runs on record of a source or workflow (domain.run_records), by their seq."""

    def put(self, owner_id: str, record: RunRecord) -> None:
        """Idempotent under (owner, seq): the same record again is the same item."""

    def trim(self, owner_id: str, below_seq: int) -> None:
        """Retention: records with a seq below `below_seq` may go. A store may keep them (a ring
        that overwrites them later): callers read with the floor, below which nothing is shown."""

    def get(self, owner_id: str, seq: int, floor: int) -> RunRecord | None:
        """None as well when `seq` is below `floor` (a record retention has let go)."""

    def list(self, owner_id: str, page: PageRequest, floor: int) -> Page[RunRecord]:
        """Newest first, by seq, only those with a seq of `floor` or more (`total_count` too)."""

    def remove_all(self, owner_id: str) -> None:
        """At once, not with the commit (a purge; idempotent)."""


class SnapshotRepository(Protocol):
    """Snapshots of sources' `this.db` (domain.snapshots), by their seq: the newest SNAPSHOTS_KEPT
    of a source are kept. A put of seq `n` is written with the unit of work and lets go of seq
    `n - SNAPSHOTS_KEPT` (a store may overwrite its slot: a ring, no delete)."""

    def put(self, source_id: str, snapshot: StateSnapshot) -> None: ...
    def list(self, source_id: str) -> list[StateSnapshot]:
        """The kept ones, newest first."""

    def get(self, source_id: str, snapshot_id: str) -> StateSnapshot | None:
        """None when the source has no kept snapshot of that id."""

    def remove_all(self, source_id: str) -> None:
        """At once, not with the commit (a purge; idempotent)."""


class SubscriptionRepository(Protocol):
    def add(self, subscription: Subscription) -> None:
        """Idempotent: the id is derived from what it routes (domain.routing.subscription_key)."""

    def remove(self, subscription_id: str) -> bool:
        """False when there was none."""

    def for_namespace(self, namespace: str) -> list[Subscription]:
        """Every subscription of a namespace (a user or an org): listing and fan-out matching."""

    def remove_naming(self, resource_id: str) -> None:
        """A deleted source, workflow or webhook takes the subscriptions naming it (as emitter or
        listener, in any namespace) along."""

    def finish_backfill(self, subscription_id: str) -> None:
        """Its backfill is over (`backfilling` False): fan-out routes to its listener directly from
        this commit on. Nothing when the subscription is gone (it is not made again)."""


class WebhookRepository(Protocol):
    def add(self, webhook: Webhook) -> None:
        """Assigns `webhook.seq` (the list order)."""

    def get(self, webhook_id: str) -> Webhook | None: ...
    def update(self, webhook: Webhook) -> None: ...
    def remove(self, webhook_id: str) -> None: ...
    def list(self, namespace: str, page: PageRequest) -> Page[Webhook]: ...


class DeliveryRepository(Protocol):
    def add(self, delivery: Delivery) -> None:
        """Conflict("delivery") when a delivery with that id exists: fan-out is idempotent."""

    def get(self, delivery_id: str) -> Delivery | None: ...
    def save(self, delivery: Delivery, expected_version: int) -> None:
        """As version `expected_version + 1`; Conflict("version") when another writer got there first."""

    def for_webhook(self, webhook_id: str, page: PageRequest) -> Page[Delivery]:
        """Newest first."""


class WorkflowRepository(Protocol):
    def add(self, workflow: Workflow) -> None:
        """Assigns `workflow.seq`; Conflict("name") when the namespace has a workflow of that name."""

    def update(self, workflow: Workflow) -> None: ...
    def get(self, workflow_id: str) -> Workflow | None: ...
    def by_name(self, namespace: str, name: str) -> Workflow | None: ...
    def list(self, namespace: str) -> list[Workflow]: ...
    def remove(self, workflow: Workflow) -> None: ...


class ConnectedAccountRepository(Protocol):
    """Connected accounts (domain.connected_accounts); credentials come and go sealed."""

    def add(self, account: ConnectedAccount) -> None:
        """Stored at `account.version` (1 for a new one); Conflict("id") when the id exists."""

    def get(self, account_id: str) -> ConnectedAccount | None: ...
    def list(self, owner: str, page: PageRequest) -> Page[ConnectedAccount]:
        """The owner's accounts, newest first."""

    def list_many(self, owners: Collection[str], page: PageRequest) -> Page[ConnectedAccount]:
        """The accounts of all these owners in one list, newest first (seqs are comparable across
        owners)."""

    def save(self, account: ConnectedAccount, expected_version: int) -> None:
        """Stores `account` as version `expected_version + 1`; Conflict("version") when the stored
        version is not `expected_version` or the account is gone (another writer got there first)."""

    def remove(self, account_id: str) -> None:
        """Idempotent."""


class Outbox(Protocol):
    def add(self, command: Command, delay_s: float = 0.0) -> None:
        """Kept with this unit of work's changes and handed to the task queue after commit."""


class UnitOfWork(Protocol):
    """One atomic change: repositories plus commit. Leaving without commit writes nothing."""

    @property
    def users(self) -> UserRepository: ...
    @property
    def orgs(self) -> OrgRepository: ...
    @property
    def keys(self) -> ApiKeyRepository: ...
    @property
    def components(self) -> ComponentRepository: ...
    @property
    def sources(self) -> SourceRepository: ...
    @property
    def state(self) -> StateRepository: ...
    @property
    def events(self) -> EventRepository: ...
    @property
    def runs(self) -> RunRecordRepository: ...
    @property
    def snapshots(self) -> SnapshotRepository: ...
    @property
    def usage(self) -> UsageLog: ...
    @property
    def subscriptions(self) -> SubscriptionRepository: ...
    @property
    def webhooks(self) -> WebhookRepository: ...
    @property
    def deliveries(self) -> DeliveryRepository: ...
    @property
    def workflows(self) -> WorkflowRepository: ...
    @property
    def outbox(self) -> Outbox: ...
    @property
    def connected_accounts(self) -> ConnectedAccountRepository: ...
    @property
    def oauth_clients(self) -> OAuthClientRepository: ...
    @property
    def pending_connects(self) -> PendingConnectRepository: ...
    @property
    def max_writes(self) -> int | None:
        """How many items one commit may write (None: no limit)."""

    def __enter__(self) -> UnitOfWork: ...
    def __exit__(self, *exc: object) -> None: ...
    def commit(self) -> None: ...


class UnitOfWorkFactory(Protocol):
    def __call__(self, readonly: bool = False) -> UnitOfWork: ...


# background work


@dataclass(frozen=True)
class Task:
    """A command as the queue delivers it: `id` is the queue's own (a row id, an SQS message id)."""

    id: str
    command: Command
    attempts: int = 0
    not_before: float = 0.0  # Unix time before which it must not run
    deferred_since: float | None = None  # Unix time its handler first gave it back (TryLater), if it did


# Handlers take consecutive tasks of one command type and lane, so they can commit them together,
# and a callback for partial results (a run's respond()); they return one result a task. A handler
# that returns has finished its tasks; one that raises has them retried later (TryLater: given back
# without counting an attempt). A coroutine handler (a run) is awaited on an event loop, holding no
# thread while it waits; a plain one is called on a worker thread.
OnRespond = Callable[["Task", dict[str, Any]], None]
TaskResults = list[Any] | Future[list[Any]]
TaskHandler = Callable[[list["Task"], OnRespond], TaskResults]
AsyncTaskHandler = Callable[[list["Task"], OnRespond], Awaitable[list[Any]]]


NowHandler = Callable[[list[Task], OnRespond], "TaskResults | None"]


def results_of(value: TaskResults) -> list[Any]:
    """A plain handler's results, waited for when they come in a Future (webhook attempts)."""
    return value.result() if isinstance(value, Future) else value


RunAnswer = dict[str, Any] | RunResult | None
"""What a request waiting for its run hears (customResponse): the response the run gave to
`respond()`, else the run's result when it ended without one, or None when neither came in time
(or the run failed, to be retried by the queue)."""


class TaskQueue(Protocol):
    """Delivers committed commands to their handlers, one at a time per lane, at least once."""

    def handle(self, command: type[Command], handler: TaskHandler | AsyncTaskHandler,
               now: NowHandler | None = None) -> None:
        """`now`: the handler's form for a task handled the moment it is committed, by the process
        that committed it (the SQS queue's `after_commit` types: a webhook's first attempt); it
        returns None to leave the task to the queue."""

    async def ingest(self, command: RunSource) -> str:
        """Queues one run durably (group commit) and returns its task id once it is."""

    async def ingest_answered(self, command: RunSource, timeout_s: float) -> RunAnswer:
        """Queues one run durably and runs it in the caller's coroutine (the RunSource handler,
        holding the source's lease): its answer as a value, returned only once the task is
        durable. A run that fails is left to the queue, which retries it."""


class Scheduler(Protocol):
    """Timers: each due tick becomes a TimerTick command on the task queue (EventBridge Scheduler's
    CreateSchedule / DeleteSchedule on AWS)."""

    def set(self, source_id: str, timer: Timer) -> None:
        """Creates or replaces the source's schedule."""

    def remove(self, source_id: str) -> None:
        """Idempotent."""

    def ticked(self, tick: TimerTick, timer: Timer) -> bool:
        """Called by the tick's handler before it runs the source. False when the tick is stale
        (its schedule was replaced or removed since); a schedule that renews itself (AWS, under
        one minute) queues its next tick here."""


class StallWatch(Protocol):
    """The sources watched for stalls (domain.health), each with when to look at it next: what a
    periodic check reads instead of every source's state. Writes are outside any unit of work:
    an entry only says when to look, and a look reads the source and its state afresh."""

    def arm(self, source_id: str, check_at: float) -> None:
        """Watches the source (again), from `check_at`."""

    def disarm(self, source_id: str) -> None:
        """Idempotent."""

    def due(self, now: float, limit: int) -> list[tuple[str, float]]:
        """Up to `limit` (source id, check_at) due at `now`, soonest first; with several processes,
        those of this one's share."""

    def move(self, source_id: str, seen: float, check_at: float) -> bool:
        """Sets the next look to `check_at` if it is still `seen` (a look happens once)."""


class SourceLease(Protocol):
    """One holder per source at a time, across machines (runs and hooks never overlap), taken in
    the order asked for where the store can tell: the one place a source's order and exclusion live."""

    def hold(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> AbstractContextManager[None]:
        """Waits for the lease (up to `wait_s`, by default `ttl_s`), holds it for the block; raises
        Busy when it cannot be had. A holder that dies loses it after `ttl_s`."""

    def held(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> AbstractAsyncContextManager[None]:
        """`hold` for a coroutine: it waits holding no thread."""

    def taken_elsewhere(self, source_id: str) -> bool:
        """Asked with the lease held: whether another process may have held it since this one
        last did, so that what this process keeps of the source in memory is read again."""


class Writes(Protocol):
    """Where a coroutine's blocking store work goes (a run's commit): locally the one writer's
    thread, in order with the ingest groups; on AWS a worker thread."""

    async def call(self, write: Callable[[], T]) -> T: ...


class Offload(Protocol):
    """Where a coroutine's short blocking work that is not a commit goes (store reads, bundling, a
    bounded URL fetch): a worker thread of the adapter's choosing, the coroutine waiting holding
    none. What waits long (a runner call) is awaited on the Runner port instead."""

    async def call(self, work: Callable[[], T]) -> T: ...


class Busy(Exception):
    """A lease is held by another worker: try again later."""


class TryLater(Busy):
    """A handler's tasks wait on work another caller is doing (an account's refresh): the queue
    gives them back for `after_s`, first in their lane, holding no worker and counting no failed
    attempt, and sets their `deferred_since` (the handler bounds how long it defers in all)."""

    def __init__(self, message: str, after_s: float) -> None:
        super().__init__(message)
        self.after_s = after_s


# code


@dataclass(frozen=True)
class Bundle:
    """Component code turned into one runnable script, made once per code hash."""

    hash: str
    code: str
    packages: dict[str, str] = field(default_factory=dict)  # npm name -> version bundled
    # SHA-256 of the bundle's content (`code`), hex: its name where it is kept apart from its code (the
    # bundle bucket, a runner's /tmp), checked before it is loaded; "" where the code travels with it.
    sha256: str = ""


class Bundler(Protocol):
    def bundle(self, code: str, lock: Mapping[str, str] | None = None) -> Bundle:
        """Raises Invalid when the code does not parse or an npm import cannot be installed. `lock`:
        versions recorded for this code before (a component's `packages`), installed again."""

    def source_of(self, entry_file: str) -> str:
        """One ESM source text for a file and its relative imports (registry publishing)."""

    def sources_of(self, entry_files: Sequence[str]) -> list[tuple[str | None, str | None]]:
        """`source_of` of many files at once: (code, None) or (None, failure message) each."""

    def bundle_many(self, codes: Sequence[str]) -> dict[str, str]:
        """Bundles many codes at once (registry publishing), each as `bundle` would, so that
        `bundle` of any of them is then a lookup: the failures, code -> message."""

    def discard(self, code: str) -> None:
        """Drops code's bundle where it is kept (registry publishing: a helper module's, which
        is never run); a later `bundle` of the code makes it again."""

    def prune_store(self) -> bool:
        """Drops what only bundling needs (npm packages installed for it: every bundle holds its
        own), once registry publishing is done; a later bundle installs again. False: left, in use."""


@dataclass(frozen=True)
class Instance:
    """A deployed component as the runner sees it: everything a run needs travels with it."""

    id: str
    props: dict[str, Any]
    account: str = ""  # whose code it is (a user or org id): runners are never shared across accounts
    db: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    http: dict[str, Any] | None = None  # {"endpoint": url, "customResponse": bool}
    memory_mb: int = 256
    bill_to: str = ""  # the user whose quota pays for CPU the account's process uses beyond its runs
    file_name: str | None = None  # code sent as text: the file its stacks name (domain.file_names)


@dataclass(frozen=True)
class Timed(Generic[T]):
    """A runner call's answer with the call's time as the caller measured it (from the request
    sent to the answer read, whatever the runner says): what the call is billed."""

    value: T
    duration_ms: float


@dataclass(frozen=True)
class Responded:
    """A run's `respond()`: the HTTP answer for the request that started the `index`th run."""

    index: int
    response: dict[str, Any]


@dataclass(frozen=True)
class Finished:
    """A runner call's outcome: each run's result, in order."""

    results: list[RunResult]


RunMessage = Responded | Finished


class Runner(Protocol):
    """The Node runner (docs/runner-protocol.md), for coroutines: every call waits holding no
    thread. A failure of the call itself (the code does not load, the runner crashed) raises
    RunnerError; what the component's own code does wrong is in `RunResult.error`. A `run` raises
    only when no run of its batch was reported: the runner reports code that does not load as
    each run's LOAD_ERROR, and a crash fails the runs not reported yet. Calls without
    an instance (describe, additional_props, options) name the `account` whose process makes them:
    no runner process serves two accounts.

    Every call names the user who pays for it: `bill_to` of the calls without an instance,
    `Instance.bill_to` of the others ("" only for the operator's own calls: registry publishing).
    Its time, measured here, comes back with its answer (`RunResult.duration_ms`, `Timed`) or its
    failure (`RunnerError.duration_ms`) for the caller to record; CPU a runner process uses beyond
    its calls' measured time is billed by the adapter to the payer of its last call."""

    async def describe(self, bundle: Bundle, timeout_ms: int, account: str,
                       bill_to: str) -> Timed[ComponentDefinition]: ...

    def run(self, bundle: Bundle, instance: Instance, events: list[Any], timeout_ms: int) -> AsyncIterator[RunMessage]:
        """The events' runs in order in one call, each seeing the `db` the ones before it wrote:
        the runner's messages as they come (each `respond()` as Responded), then Finished."""

    async def hook(self, bundle: Bundle, instance: Instance, hook: str, timeout_ms: int) -> RunResult: ...

    async def run_step(self, bundle: Bundle, instance: Instance, steps: dict[str, Any], timeout_ms: int) -> RunResult:
        """An action's `run({$, steps})`: the result carries return_value, exports, sends, flow_exit."""

    async def additional_props(self, bundle: Bundle, instance_id: str, props: dict[str, Any],
                               timeout_ms: int, account: str, bill_to: str) -> Timed[list[dict[str, Any]]]: ...

    async def options(self, bundle: Bundle, instance_id: str, prop: str, props: dict[str, Any], page: int,
                      prev_context: Any, query: str | None, timeout_ms: int, account: str,
                      bill_to: str) -> Timed[dict[str, Any]]: ...

    async def aclose(self) -> None: ...


class BlockingRunner(Protocol):
    """The Runner port for callers that are threads (sync routes, the CLI, plain task handlers):
    the same calls, each holding its caller until it ends."""

    def describe(self, bundle: Bundle, timeout_ms: int, account: str, bill_to: str) -> Timed[ComponentDefinition]: ...

    def run(self, bundle: Bundle, instance: Instance, event: Any, timeout_ms: int,
            on_respond: Callable[[dict[str, Any]], None] | None = None) -> RunResult: ...

    def run_many(self, bundle: Bundle, instance: Instance, events: list[Any], timeout_ms: int,
                 on_respond: Callable[[int, dict[str, Any]], None] | None = None) -> list[RunResult]:
        """`run` of each event in order, each seeing the `db` the ones before it wrote (their writes
        merged into `instance.db`), in one call; `on_respond(index, response)`."""

    def hook(self, bundle: Bundle, instance: Instance, hook: str, timeout_ms: int) -> RunResult: ...

    def run_step(self, bundle: Bundle, instance: Instance, steps: dict[str, Any], timeout_ms: int) -> RunResult:
        """An action's `run({$, steps})`: the result carries return_value, exports, sends, flow_exit."""

    def additional_props(self, bundle: Bundle, instance_id: str, props: dict[str, Any],
                         timeout_ms: int, account: str, bill_to: str) -> Timed[list[dict[str, Any]]]: ...

    def options(self, bundle: Bundle, instance_id: str, prop: str, props: dict[str, Any], page: int,
                prev_context: Any, query: str | None, timeout_ms: int, account: str,
                bill_to: str) -> Timed[dict[str, Any]]: ...

    def close(self) -> None: ...


class RunnerError(Exception):
    def __init__(self, code: str, message: str, stack: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.stack = stack
        self.duration_ms = 0.0  # how long the call ran before it failed, as its caller measured it

    def as_result(self) -> RunResult:
        """The failed call as a run's result: its error, and the time it took (billed like a run's)."""
        result = RunResult.failed(self.code, self.message, self.stack)
        result.duration_ms = self.duration_ms
        return result


# the rest


@dataclass(frozen=True)
class SendResult:
    status: int | None  # None: no answer (refused by policy, timeout, connection error)
    error: str | None = None
    retry_after: str | None = None
    duration_ms: int = 0


class WebhookSender(Protocol):
    def post(self, url: str, body: bytes, headers: dict[str, str]) -> SendResult:
        """One POST within 15 s (the whole exchange, from connecting to the answer's last header),
        redirects not followed, the URL policy applied to the address actually connected to.
        Never raises for the receiver's faults: they are in the result."""

    def request(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> SendResult:
        """The same for any method (a workflow's `$.send.http`)."""


class Mailer(Protocol):
    """A workflow's `$.send.email`: SMTP where the operator configured it."""

    @property
    def configured(self) -> bool: ...

    def send(self, to: str, subject: str, text: str | None, html: str | None) -> SendResult: ...


class ObjectStore(Protocol):
    """A workflow's `$.send.s3`: S3 (or any S3-compatible store) where the operator configured it."""

    @property
    def configured(self) -> bool: ...

    def put(self, bucket: str, key: str, body: bytes, content_type: str) -> SendResult: ...


class UrlFetcher(Protocol):
    async def fetch_text(self, url: str) -> str:
        """GETs a URL within the size and time limits (the time bounding the whole exchange, the
        name's resolution included), awaited holding no thread; raises Invalid when it cannot."""


class Secrets(Protocol):
    def encrypt(self, value: Any) -> str: ...
    def decrypt(self, token: str) -> Any: ...


class EventBus(Protocol):
    """Tells live readers (SSE) that an emitter's channel has new events, and the caches of
    endpoints that a source behind one changed: in this process and the others that serve the
    same store where they can be told (elsewhere caches expire on their own)."""

    def published(self, emitter_id: str, channel: str) -> None: ...
    def listen(self, emitter_id: str, channel: str) -> asyncio.Event: ...
    def unlisten(self, emitter_id: str, channel: str, event: asyncio.Event) -> None: ...
    def endpoint_changed(self, endpoint_id: str) -> None: ...
    def on_endpoint_changed(self, forget: Callable[[str], None]) -> None: ...


# OAuth 2.0 (issue 22, part B)


@dataclass(frozen=True)
class OAuthEndpoints:
    """An app's OAuth client as a token request needs it: the secret opened (never stored so)."""

    client_id: str
    client_secret: str | None
    authorize_url: str
    token_url: str
    scopes: tuple[str, ...] = ()
    extra_params: Mapping[str, str] = field(default_factory=dict)


class OAuthGrantError(Exception):
    """The provider refused for good (`invalid_grant`: a revoked or expired refresh token, a
    code used twice...): only a new authorization (a reconnect) helps. The message quotes the
    provider's error code and description, never a token."""


class OAuthUnavailable(Exception):
    """The token endpoint could not be reached or failed (network, timeout, 5xx, 429) after the
    adapter's retries: the same request may work later."""


class OAuthClientPort(Protocol):
    """The client side of the authorization code grant with PKCE (S256) and of refresh."""

    def authorization_url(self, endpoints: OAuthEndpoints, redirect_uri: str, state: str, verifier: str) -> str: ...

    async def exchange(self, endpoints: OAuthEndpoints, code: str, redirect_uri: str, verifier: str) -> TokenSet:
        """A coroutine (a connect's callback awaits it holding no thread), ended within the
        token deadline. Raises OAuthGrantError or OAuthUnavailable."""

    def refresh(self, endpoints: OAuthEndpoints, refresh_token: str) -> TokenSet:
        """From a worker thread, ended within the token deadline. Raises OAuthGrantError or
        OAuthUnavailable (transient failures retried first)."""


class OAuthClientRepository(Protocol):
    """Apps' OAuth clients (domain.oauth.OAuthClient), one per (owner, app); the secret sealed."""

    def put(self, client: OAuthClient) -> None:
        """Creates or replaces."""

    def get(self, owner: str, app: str) -> OAuthClient | None: ...
    def list(self, owner: str) -> list[OAuthClient]:
        """The owner's clients, by app name."""

    def remove(self, owner: str, app: str) -> None:
        """Idempotent."""


class PendingConnectRepository(Protocol):
    """Connects in progress (domain.oauth.PendingConnect), by `state`."""

    def add(self, pending: PendingConnect) -> None:
        """Conflict("state") when the state exists."""

    def get(self, state: str) -> PendingConnect | None:
        """None when there is none or it expired."""

    def take(self, state: str) -> None:
        """Removes it, once: Conflict("state") when it is gone (taken meanwhile), at the write or at commit."""
