"""The composition root: the one place that picks the adapters and wires the services."""

from __future__ import annotations

from dataclasses import dataclass

from headwater.ports import Bundler, Runner, UnitOfWorkFactory, UrlFetcher
from headwater.services.accounts import Accounts
from headwater.services.components import Components
from headwater.services.registry import Registry
from headwater.settings import Settings


@dataclass
class Adapters:
    uow: UnitOfWorkFactory
    bundler: Bundler
    runner: Runner
    fetcher: UrlFetcher


@dataclass
class Services:
    settings: Settings
    adapters: Adapters
    accounts: Accounts
    components: Components
    registry: Registry

    def close(self) -> None:
        self.adapters.runner.close()


def local_adapters(settings: Settings, runner: Runner | None = None) -> Adapters:
    from headwater.adapters.local.bundler import LocalBundler
    from headwater.adapters.local.node_runner import NodeRunnerPool
    from headwater.adapters.local.sqlite.database import Database
    from headwater.adapters.local.sqlite.uow import SqliteUnitOfWork
    from headwater.adapters.url_fetcher import HttpUrlFetcher

    db = Database(settings.database_path)
    return Adapters(
        uow=lambda: SqliteUnitOfWork(db),
        bundler=LocalBundler(settings),
        runner=runner or NodeRunnerPool(settings),
        fetcher=HttpUrlFetcher(settings),
    )


def bootstrap(settings: Settings | None = None, adapters: Adapters | None = None) -> Services:
    settings = settings or Settings()
    if adapters is None:
        if settings.backend != "local":
            raise ValueError(f"HEADWATER_BACKEND={settings.backend!r} has no adapters in this build; use 'local'.")
        adapters = local_adapters(settings)
    accounts = Accounts(adapters.uow, settings)
    components = Components(adapters.uow, accounts, adapters.bundler, adapters.runner, adapters.fetcher, settings)
    return Services(
        settings=settings,
        adapters=adapters,
        accounts=accounts,
        components=components,
        registry=Registry(components, adapters.bundler),
    )
