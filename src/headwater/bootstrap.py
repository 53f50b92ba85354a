"""The composition root: the one place that picks the adapters and wires the services."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from headwater.ports import (
    Bundler,
    EventBus,
    Runner,
    Scheduler,
    Secrets,
    Task,
    TaskQueue,
    UnitOfWorkFactory,
    UrlFetcher,
)
from headwater.services.accounts import Accounts
from headwater.services.components import Components
from headwater.services.events import DELETE_EVENTS, Events
from headwater.services.ingest import Ingest
from headwater.services.registry import Registry
from headwater.services.runs import RunItem, Runs
from headwater.services.sources import Sources
from headwater.settings import Settings

RUN = "run"


@dataclass
class Adapters:
    uow: UnitOfWorkFactory
    bundler: Bundler
    runner: Runner
    fetcher: UrlFetcher
    secrets: Secrets
    queue: TaskQueue
    scheduler: Scheduler
    bus: EventBus
    starters: list[Callable[[], None]] = field(default_factory=list)
    stoppers: list[Callable[[], None]] = field(default_factory=list)


@dataclass
class Services:
    settings: Settings
    adapters: Adapters
    accounts: Accounts
    components: Components
    registry: Registry
    runs: Runs
    sources: Sources
    events: Events
    ingest: Ingest

    def start(self) -> None:
        """Starts background work (task workers, timers): the server does, one-shot commands do not."""
        for start in self.adapters.starters:
            start()

    def close(self) -> None:
        for stop in self.adapters.stoppers:
            stop()
        self.adapters.runner.close()


def local_adapters(settings: Settings) -> Adapters:
    from headwater.adapters.local.bundler import LocalBundler
    from headwater.adapters.local.event_bus import LocalEventBus
    from headwater.adapters.local.node_runner import NodeRunnerPool
    from headwater.adapters.local.scheduler import LocalScheduler
    from headwater.adapters.local.secrets import FernetSecrets
    from headwater.adapters.local.sqlite.database import Database
    from headwater.adapters.local.sqlite.uow import SqliteUnitOfWork
    from headwater.adapters.local.task_queue import LocalTaskQueue
    from headwater.adapters.url_fetcher import HttpUrlFetcher

    db = Database(settings.database_path)

    def uow(readonly: bool = False) -> SqliteUnitOfWork:
        return SqliteUnitOfWork(db, readonly)

    queue = LocalTaskQueue(db, uow, settings.task_workers)
    scheduler = LocalScheduler(uow, queue, settings.timer_timeout_ms)
    return Adapters(
        uow=uow,
        bundler=LocalBundler(settings),
        runner=NodeRunnerPool(settings),
        fetcher=HttpUrlFetcher(settings),
        secrets=FernetSecrets(settings.data_dir / "secret.key", settings.secret_key or None),
        queue=queue,
        scheduler=scheduler,
        bus=LocalEventBus(),
        starters=[queue.start, scheduler.start],
        stoppers=[scheduler.stop, queue.stop],
    )


def bootstrap(settings: Settings | None = None, adapters: Adapters | None = None) -> Services:
    settings = settings or Settings()
    if adapters is None:
        if settings.backend != "local":
            raise ValueError(f"HEADWATER_BACKEND={settings.backend!r} has no adapters in this build; use 'local'.")
        adapters = local_adapters(settings)
    accounts = Accounts(adapters.uow, settings)
    components = Components(adapters.uow, accounts, adapters.bundler, adapters.runner, adapters.fetcher, settings)
    runs = Runs(adapters.uow, adapters.bundler, adapters.runner, adapters.secrets, adapters.bus, settings)
    sources = Sources(
        adapters.uow, accounts, components, runs, adapters.scheduler, adapters.queue, adapters.secrets, settings
    )
    events = Events(adapters.uow, sources, adapters.queue)
    ingest = Ingest(adapters.uow, components, sources, runs, adapters.queue, settings)
    def run_tasks(tasks: list[Task], on_partial: Callable[[Task, dict], None]) -> list:
        items = [
            RunItem(task.payload.get("event"), task.payload.get("timeout_ms") or settings.http_timeout_ms, task,
                    functools.partial(on_partial, task), reserved_by=task.payload.get("reserved_by"))
            for task in tasks
        ]
        return runs.run_batch(tasks[0].source_id or "", items)

    adapters.queue.handle(RUN, run_tasks)
    adapters.queue.handle(DELETE_EVENTS, lambda tasks, _: [events.delete(task) for task in tasks])
    return Services(
        settings=settings,
        adapters=adapters,
        accounts=accounts,
        components=components,
        registry=Registry(components, adapters.bundler),
        runs=runs,
        sources=sources,
        events=events,
        ingest=ingest,
    )
