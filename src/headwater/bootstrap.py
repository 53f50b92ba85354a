"""The composition root: the one place that picks the adapters and wires the services."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from headwater.adapters.oauth_client import HttpOAuthClient
from headwater.adapters.threads import RequestThreads
from headwater.deployments import deployment
from headwater.domain.commands import (
    Backfill,
    BackfillWebhook,
    DeleteEvents,
    DeliverFirstAttempts,
    DeliverWebhook,
    FanOut,
    PurgeSource,
    RunSource,
    RunWorkflow,
    Send,
    SyncSchedule,
    TimerTick,
)
from headwater.domain.ingest_budget import Budget
from headwater.domain.messages import AccountNeedsReconnect
from headwater.metrics import metered_deliveries, metered_runs
from headwater.ports import (
    BlockingRunner,
    Bundler,
    EventBus,
    IngestCounts,
    Mailer,
    OAuthClientPort,
    ObjectStore,
    Offload,
    Runner,
    Scheduler,
    Secrets,
    SourceLease,
    StallWatch,
    TaskQueue,
    UnitOfWorkFactory,
    UrlFetcher,
    UsageRepository,
    WebhookSender,
    Writes,
)
from headwater.services.accounts import Accounts
from headwater.services.backfills import Backfills
from headwater.services.clock import utc_day
from headwater.services.components import Components
from headwater.services.connected_accounts import ConnectedAccounts
from headwater.services.destinations import Destinations
from headwater.services.events import Events
from headwater.services.ingest import Ingest
from headwater.services.ingest_budget import IngestBudgets
from headwater.services.messagebus import MessageBus
from headwater.services.oauth import OAuthConnections, reconnect_errors
from headwater.services.quota import Quota
from headwater.services.registry import Registry, RegistrySearch
from headwater.services.routing import Routing, for_commit
from headwater.services.run_records import RunRecords
from headwater.services.runs import Runs
from headwater.services.sealed_accounts import SealedAccounts
from headwater.services.source_state import SourceStates
from headwater.services.source_trials import SourceTrials
from headwater.services.sources import Sources
from headwater.services.stalls import Stalls
from headwater.services.subscriptions import Subscriptions
from headwater.services.tenant_slots import TenantLimits
from headwater.services.timers import Timers
from headwater.services.trials import Trials
from headwater.services.webhooks import Webhooks
from headwater.services.workflows import Workflows
from headwater.settings import Settings
from headwater.source_metrics import limit_source_labels

if TYPE_CHECKING:
    from headwater.adapters.local.task_queue import LocalTaskQueue


@dataclass
class Adapters:
    uow: UnitOfWorkFactory
    usage: UsageRepository
    lease: SourceLease
    bundler: Bundler
    runner: Runner  # for coroutines (runs)
    blocking_runner: BlockingRunner  # for threads (describe, options, hooks, steps, trials)
    writes: Writes  # where a run's coroutine commits its outcome
    fetcher: UrlFetcher
    secrets: Secrets
    queue: TaskQueue
    scheduler: Scheduler
    bus: EventBus
    sender: WebhookSender
    mailer: Mailer
    objects: ObjectStore
    ingest_counts: IngestCounts
    starters: list[Callable[[], None]] = field(default_factory=list)
    stoppers: list[Callable[[], None]] = field(default_factory=list)
    loop_users: list[Callable[[asyncio.AbstractEventLoop], None]] = field(default_factory=list)
    oauth_client: OAuthClientPort | None = None  # the OAuth client side (None: adapters.oauth_client's)
    offload: Offload = field(default_factory=RequestThreads)  # a coroutine's short blocking work
    watch: StallWatch | None = None  # the sources watched for stalls (None: none are)
    stall_check_s: float | None = None  # how often this process looks for stalls (None: someone else does)


@dataclass
class Services:
    settings: Settings
    adapters: Adapters
    accounts: Accounts
    components: Components
    registry: Registry
    runs: Runs
    sources: Sources
    timers: Timers
    events: Events
    ingest: Ingest
    subscriptions: Subscriptions
    webhooks: Webhooks
    routing: Routing
    workflows: Workflows
    run_records: RunRecords
    registry_search: RegistrySearch
    trials: Trials
    source_trials: SourceTrials
    connected_accounts: ConnectedAccounts
    oauth: OAuthConnections
    states: SourceStates  # issue 34: a source's this.db, its snapshots and restores
    stalls: Stalls | None = None

    def start(self) -> None:
        """Starts background work (task workers, timers): the server does, one-shot commands do not."""
        for start in self.adapters.starters:
            start()

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The server's event loop, running: adapters that can do their I/O there do (the runner's pipes)."""
        for use in self.adapters.loop_users:
            use(loop)

    def close(self) -> None:
        for stop in self.adapters.stoppers:
            stop()
        self.adapters.blocking_runner.close()


def local_adapters(settings: Settings) -> Adapters:
    from headwater.adapters.local.async_runner import AsyncNodeRunner
    from headwater.adapters.local.bundler import LocalBundler
    from headwater.adapters.local.event_bus import LocalEventBus
    from headwater.adapters.local.node_runner import NodeRunnerPool
    from headwater.adapters.local.peers import Peers
    from headwater.adapters.local.process_share import ProcessShare
    from headwater.adapters.local.scheduler import LocalScheduler
    from headwater.adapters.local.secrets import FernetSecrets
    from headwater.adapters.local.sqlite.checkpoints import WalCheckpointer
    from headwater.adapters.local.sqlite.store import SqliteStore
    from headwater.adapters.local.task_queue import LocalTaskQueue
    from headwater.adapters.loops import Portal

    share, peers = ProcessShare(0, 1, settings.run_dir), None
    if settings.process_index is not None:  # one of `headwater serve`'s processes
        share = ProcessShare(settings.process_index, settings.processes, settings.run_dir)
        peers = Peers(settings.run_dir, settings.process_index, settings.processes)
    store = SqliteStore(settings.database_path, peers)
    portal = Portal()
    queue = LocalTaskQueue(store.db, settings.task_workers, settings.background_yield_ms / 1000,
                           tenant_share=settings.tenant_worker_share, portal=portal, lease=store.lease,
                           share=share, peers=peers)
    usage = store.usage
    store.on_commit(queue.dispatch)
    scheduler = LocalScheduler(store.db, store.uow, share, peers)
    from headwater.adapters.local.stall_watch import SqliteStallWatch
    _local_gauges(queue)
    runner = NodeRunnerPool(settings, bill=lambda user_id, ms: usage.record(user_id, utc_day(), 0, ms))
    checkpoints = WalCheckpointer(store.db)
    return Adapters(
        uow=store.uow,
        usage=store.usage,
        lease=store.lease,
        ingest_counts=store.ingest_counts,
        bundler=LocalBundler(settings),
        # CPU a process used beyond its runs' measured time counts against its account's quota
        runner=AsyncNodeRunner(runner),
        blocking_runner=runner,
        writes=queue.writer,
        queue=queue,
        scheduler=scheduler,
        **_outside(settings),
        bus=LocalEventBus(peers),
        secrets=FernetSecrets(settings.data_dir / "secret.key", settings.secret_key or None),
        starters=[checkpoints.start, queue.start, scheduler.start],  # before the writers' connections
        stoppers=[scheduler.stop, queue.stop, checkpoints.stop],
        loop_users=[runner.attach, portal.attach],
        watch=SqliteStallWatch(store.db, share),
        stall_check_s=settings.stall_check_s,
    )


def _outside(settings: Settings) -> dict[str, Any]:
    """The adapters both sets share: what reaches outside the store (URLs, mail, S3)."""
    from headwater.adapters.destinations import S3ObjectStore, SmtpMailer
    from headwater.adapters.url_fetcher import HttpUrlFetcher
    from headwater.adapters.webhook_sender import HttpWebhookSender

    return {
        "fetcher": HttpUrlFetcher(settings),
        "sender": HttpWebhookSender(settings),
        "mailer": SmtpMailer(settings),
        "objects": S3ObjectStore(settings),
    }


def aws_adapters(settings: Settings, clients: dict[str, Any] | None = None, runner: BlockingRunner | None = None,
                 bundler: Bundler | None = None) -> Adapters:
    """DynamoDB, SQS, EventBridge Scheduler and KMS behind the same ports (docs/aws.md). `clients` are
    boto3 clients by service name (built here at first use when not given: a warm Lambda
    container keeps them). The runner is the runner Lambda (emulated: the local sandboxed
    processes behind the same invoke); so is the bundler (the runner Lambda's `bundle` op)."""
    import boto3

    from headwater.adapters.aws.config import AwsConfig
    from headwater.adapters.aws.dynamodb.store import DynamoStore
    from headwater.adapters.aws.kms_secrets import KmsSecrets
    from headwater.adapters.aws.scheduler import EventBridgeScheduler
    from headwater.adapters.aws.sqs_queue import S3Payloads, SqsTaskQueue
    from headwater.adapters.aws.stall_watch import DynamoStallWatch
    from headwater.adapters.local.event_bus import LocalEventBus
    from headwater.adapters.threads import ThreadedRunner, ThreadWrites

    config = AwsConfig()
    clients = dict(clients or {})
    for name in ("dynamodb", "sqs", "scheduler"):
        clients.setdefault(name, boto3.client(name, endpoint_url=config.endpoint_url))
    store = DynamoStore(clients["dynamodb"], config.resources_table, config.events_table)
    payloads = None
    if config.payload_bucket:
        clients.setdefault("s3", boto3.client("s3", endpoint_url=config.endpoint_url))
        payloads = S3Payloads(clients["s3"], config.payload_bucket)
    queue = SqsTaskQueue(clients["sqs"], config.run_queue_url, store, routes=config.routes(),
                         payloads=payloads, after_commit=config.at_once,
                         ordered_url=config.run_order_queue_url or None)
    store.on_commit(queue.send)
    scheduler = EventBridgeScheduler(
        clients["scheduler"], clients["sqs"], clients["dynamodb"], group_name=config.schedule_group,
        queue_arn=config.run_queue_arn, queue_url=config.run_queue_url, target_arn=config.timer_function_arn or None,
        role_arn=config.scheduler_role_arn,
        dead_letter_arn=config.scheduler_dlq_arn or None, table_name=config.resources_table)
    if runner is None or bundler is None:
        function_runner, function_bundler = _runner_function(settings, config, clients)
        runner, bundler = runner or function_runner, bundler or function_bundler
    return Adapters(
        uow=store.uow,
        usage=store.usage,
        lease=store.lease,
        ingest_counts=store.ingest_counts,
        bundler=bundler,
        runner=ThreadedRunner(runner),
        blocking_runner=runner,
        writes=ThreadWrites(),
        queue=queue,
        scheduler=scheduler,
        **_outside(settings),
        bus=LocalEventBus(),  # a Lambda's live readers are its own; the others read the table
        secrets=KmsSecrets(lambda: _client(clients, "kms", config), config.kms_key_arn),
        watch=DynamoStallWatch(clients["dynamodb"], config.resources_table),  # looked at by the sweep
    )


def _runner_function(settings: Settings, config: Any, clients: dict[str, Any]) -> tuple[BlockingRunner, Bundler]:
    """The runner Lambda, invoked one request at a time, runs components and bundles them. It has
    no AWS permission: the bundle bucket is read here and reached by the runner only through the
    presigned URLs a request carries (S3Bundles). Emulated, the same requests and answers go to the
    local sandboxed runner processes and bundler (local_runner_function.py), the URLs to the moto bucket.
    Component files of the operator's (`source_of`: publish, workflow files) are read by the local
    bundler."""
    from headwater.adapters.aws.bundle_bucket import S3Bundles
    from headwater.adapters.aws.lambda_bundler import LambdaBundler
    from headwater.adapters.aws.lambda_runner import LambdaRunner, boto3_invoke
    from headwater.adapters.local.bundler import LocalBundler

    bundles = None
    if config.bundle_bucket:
        import boto3
        from botocore.config import Config

        # SigV4 (buckets refuse SigV2 URLs); its own client: the presigned URLs carry this signature
        s3 = boto3.client("s3", endpoint_url=config.endpoint_url, config=Config(signature_version="s3v4"))
        bundles = S3Bundles(clients.setdefault("s3-presign", s3), config.bundle_bucket)
    if settings.backend == "aws-emulated" or not config.runner_function:
        from headwater.adapters.aws.local_runner_function import LocalRunnerFunction
        from headwater.adapters.local.node_runner import NodeRunnerPool

        pool = NodeRunnerPool(settings)
        local = LocalBundler(settings)
        if bundles is None:
            return LambdaRunner(pool.invoke, on_close=pool.close), local
        # its bundles self-contained, as the Lambda runner's are (no shared package store there)
        function = LocalRunnerFunction(pool, LocalBundler(settings, shared_packages=False))
        return (LambdaRunner(function.invoke, on_close=pool.close, bundles=bundles),
                LambdaBundler(function.invoke, local.source_of, bundles))
    invoke = boto3_invoke(_client(clients, "lambda", config), config.runner_function)
    return (LambdaRunner(invoke, bundles=bundles),
            LambdaBundler(invoke, lambda entry_file: LocalBundler(settings).source_of(entry_file), bundles))


def _client(clients: dict[str, Any], service: str, config: Any) -> Any:
    import boto3

    return clients.setdefault(service, boto3.client(service, endpoint_url=config.endpoint_for(service)))


def _local_gauges(queue: LocalTaskQueue) -> None:
    """/metrics: the task queue's depth and wait, and the runner processes (scraped when read)."""
    import os
    import time

    from headwater.metrics import node_descendants, register_gauges

    def read() -> list[tuple[str, str, dict[str, str], float]]:
        depth, age = queue.stats(time.time())
        runners = node_descendants(os.getpid())
        return [
            ("headwater_queue_depth", "Tasks queued or running", {}, depth),
            ("headwater_queue_oldest_seconds", "How long the oldest due task has waited", {}, age),
            ("headwater_runner_processes", "Node runner processes alive", {}, len(runners)),
            ("headwater_runner_memory_bytes", "Resident memory of the runner processes", {},
             sum(rss for _, rss in runners)),
        ]

    register_gauges(read)


def bootstrap(settings: Settings | None = None, adapters: Adapters | None = None) -> Services:
    settings = settings or Settings()
    if adapters is None:
        if settings.backend == "local":
            adapters = local_adapters(settings)
        elif settings.backend == "aws":
            adapters = aws_adapters(settings)
        elif settings.backend == "aws-emulated":
            # the emulated deployment `headwater serve` made there, found by its entry point
            deployment(settings.backend).load_environment(settings.data_dir)
            adapters = aws_adapters(settings)
        else:
            raise ValueError(f"HEADWATER_BACKEND={settings.backend!r}: use 'local', 'aws' or 'aws-emulated'.")
    a = adapters
    accounts = Accounts(a.uow, a.usage, settings)
    messages = MessageBus()
    sealed = SealedAccounts(a.uow, a.secrets)
    oauth = OAuthConnections(a.uow, sealed, a.oauth_client or HttpOAuthClient(settings), a.lease, a.secrets,
                             settings, messages=messages)
    connected_accounts = ConnectedAccounts(a.uow, accounts, sealed, fresh=oauth.fresh)
    quota = Quota(a.uow, a.usage, settings)
    limits = TenantLimits(settings.tenant_runner_calls, settings.tenant_runner_call_wait_s)
    components = Components(a.uow, accounts, a.bundler, a.blocking_runner, a.fetcher, settings, connected_accounts,
                            quota, a.runner, a.offload, limits)
    subscriptions = Subscriptions(a.uow, accounts)
    runs = Runs(a.uow, a.usage, a.lease, a.bundler, a.runner, a.writes, a.secrets, a.bus, settings,
                connected_accounts, quota, a.offload, limits, routes=functools.partial(for_commit, subscriptions))
    sources = Sources(a.uow, accounts, components, runs, a.secrets, settings, a.offload, a.bus)
    stalls = _stalls(a, sources)
    timers = Timers(a.uow, sources, a.scheduler, settings, stalls)
    events = Events(a.uow, sources, a.scheduler)
    budgets = (IngestBudgets(a.ingest_counts, Budget(settings.ingest_rate, settings.ingest_burst))
               if settings.ingest_rate else None)
    ingest = Ingest(components, sources, runs, a.queue, settings, budgets)
    webhooks = Webhooks(a.uow, accounts, subscriptions, a.sender, a.secrets, settings)
    routing = Routing(a.uow, subscriptions, sources, runs, settings)
    destinations = Destinations(a.uow, a.sender, a.mailer, a.objects, settings)
    workflows = Workflows(a.uow, accounts, components, subscriptions, runs, a.bundler, a.blocking_runner, destinations,
                          settings, a.offload)
    messages.subscribe(AccountNeedsReconnect, lambda m: reconnect_errors(a.uow, runs, m.account, m.message,
                                                                          m.for_run))
    limit_source_labels(settings.metrics_sources)
    a.queue.handle(RunSource, metered_runs(runs.run_batch))
    a.queue.handle(TimerTick, timers.tick)
    a.queue.handle(SyncSchedule, timers.sync)
    a.queue.handle(DeleteEvents, events.delete)
    a.queue.handle(PurgeSource, events.purge)
    a.queue.handle(FanOut, routing.fan_out)
    a.queue.handle(DeliverWebhook, metered_deliveries(webhooks.deliver), now=metered_deliveries(webhooks.deliver_now))
    a.queue.handle(DeliverFirstAttempts, metered_deliveries(webhooks.deliver_first),
                   now=metered_deliveries(webhooks.deliver_first_now))
    a.queue.handle(RunWorkflow, workflows.run)
    a.queue.handle(Send, destinations.send)
    backfills = Backfills(a.uow, routing, metered_deliveries(webhooks.deliver))
    a.queue.handle(Backfill, backfills.backfill)
    a.queue.handle(BackfillWebhook, backfills.backfill)
    trials = Trials(components, quota, a.runner, a.offload, limits, settings)
    return Services(
        settings=settings,
        adapters=a,
        accounts=accounts,
        components=components,
        registry=Registry(components, a.bundler),
        runs=runs,
        run_records=RunRecords(a.uow, sources, workflows, settings),
        sources=sources,
        timers=timers,
        events=events,
        ingest=ingest,
        subscriptions=subscriptions,
        webhooks=webhooks,
        routing=routing,
        workflows=workflows,
        registry_search=RegistrySearch(a.uow),
        trials=trials,
        source_trials=SourceTrials(a.uow, sources, components, trials, a.secrets, a.offload, settings),
        connected_accounts=connected_accounts,
        oauth=oauth,
        stalls=stalls,
        states=SourceStates(a.uow, sources, runs, settings, a.offload, a.secrets),
    )


def _stalls(a: Adapters, sources: Sources) -> Stalls | None:
    """Stalls looked for over the adapters' watch, periodically where they say how often; counted
    in /metrics."""
    import time

    from headwater.metrics import STALLS, count_recovery
    from headwater.services import recording

    if a.watch is None:
        return None
    stalls = Stalls(sources, a.watch, on_stalled=lambda source, why: STALLS.labels(why).inc())
    if count_recovery not in recording.on_recovered:
        recording.on_recovered.append(count_recovery)
    if a.stall_check_s:
        from headwater.adapters.local.periodic import Periodic

        loop = Periodic("stalls", a.stall_check_s, lambda: stalls.check(time.time()))
        a.starters.append(loop.start)
        a.stoppers.insert(0, loop.stop)
    return stalls
