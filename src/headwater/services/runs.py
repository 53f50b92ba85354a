"""Running sources: runs and hooks through the runner, their outcomes committed on versioned state.

A run's emits are ordered by `ts`, deduped, stored with fresh ids and trimmed to the newest 100
per channel (`domain.runs.record`); its `this.db` writes, `$logs` and `$errors` commit with the
new state in one unit of work, so a crash leaves either all of a run or none of it (and its task
still queued, to run again; a task whose results are in is recognised and not run twice).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from headwater import __version__
from headwater.domain.commands import RunSource
from headwater.domain.errors import HeadwaterError, Invalid, QuotaExceeded
from headwater.domain.models import Component, Source, SourceState, StoredEvent
from headwater.domain.oauth import REFRESH_WAIT_S
from headwater.domain.routing import Routed
from headwater.domain.run_records import NOT_RUN, RunInfo, secret_values
from headwater.domain.runs import Limits, RunContext, RunResult
from headwater.ports import (
    Bundle,
    Bundler,
    EventBus,
    Finished,
    Instance,
    Offload,
    OnRespond,
    Responded,
    Runner,
    RunnerError,
    Secrets,
    SourceLease,
    Task,
    Timed,
    TryLater,
    UnitOfWork,
    UnitOfWorkFactory,
    UsageRepository,
    Writes,
)
from headwater.services import props as prop_forms
from headwater.services.cache import BoundedDict, TtlCache
from headwater.services.clock import now_ms, utc_day
from headwater.services.connected_accounts import (
    AccountUnusable,
    ConnectedAccounts,
    RefreshUnderWay,
    app_prop_names,
    references,
    source_uses,
)
from headwater.services.quota import Admission, Quota
from headwater.services.recording import Outcome, commit_outcomes
from headwater.services.tenant_slots import TenantLimits
from headwater.settings import Settings

_COMPONENT_CACHE = 10_000
_HOT_SOURCES = 1024  # sources whose state is kept in memory (the most recently run)
_RETRY_FIRST_S, _RETRY_MOST_S = 0.25, 5.0  # a run waiting on its account's refresh looks again after


# What a commit of `emitter_id`'s events writes to route them: (its unit of work, emitter_id,
# namespace, the emitter's created_at, the events, hops) -> Routed.
Routes = Callable[[UnitOfWork, str, str, int, list[StoredEvent], int], Routed]


@dataclass(frozen=True)
class _Hot:
    """What a source's runs need, kept in memory while it runs: its record, its component, its
    state as committed (with the version its next commit is conditional on) and its props as the
    runner takes them, but for connected accounts' credentials: those are read at each batch, so
    a run never has stale ones. Written only with the source's lease held."""

    source: Source
    component: Component
    state: SourceState
    props: dict[str, Any]


class Runs:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        usage: UsageRepository,
        lease: SourceLease,
        bundler: Bundler,
        runner: Runner,
        writes: Writes,
        secrets: Secrets,
        bus: EventBus,
        settings: Settings,
        connected: ConnectedAccounts,
        quota: Quota,
        offload: Offload,
        limits: TenantLimits,
        routes: Routes | None = None,
    ) -> None:
        """`routes`: what a run's commit writes for its events (routing.for_commit; none routed
        without it). Hooks and additionalProps wait for a turn of their namespace's share
        (`limits`), their store reads and bundling on `offload`."""
        self.uow = uow
        self.connected = connected
        self.quota = quota
        self.usage = usage
        self.lease = lease
        self.bundler = bundler
        self.runner = runner
        self.offload = offload
        self.limits = limits
        self.writes = writes
        self.secrets = secrets
        self.bus = bus
        self.settings = settings
        self._components: TtlCache[str, Component] = TtlCache(float("inf"), _COMPONENT_CACHE)
        self._hot: BoundedDict[str, _Hot] = BoundedDict(_HOT_SOURCES)
        self._bundles: BoundedDict[str, Bundle] = BoundedDict(_HOT_SOURCES)  # by component id
        self.routes: Routes = routes or (lambda uow, emitter_id, namespace, created_at, events, hops: Routed())

    @property
    def lease_s(self) -> float:
        """Long enough for the slowest hook or timer run, with room for the runner's grace."""
        s = self.settings
        return max(s.hook_timeout_ms, s.timer_timeout_ms, s.http_timeout_ms) / 1000 + 30

    # calling the runner

    def instance(self, source: Source, db: dict[str, Any], file_name: str | None = None) -> Instance:
        """AccountUnusable when a connected account the source uses cannot give credentials."""
        return self._instance(source, self.credentials(source, prop_forms.for_runner(source.configured_props,
                                                                                     self.secrets)), db, file_name)

    def credentials(self, source: Source, props: dict[str, Any], run: bool = False) -> dict[str, Any]:
        """`props` with each app prop's connected account turned into its current `$auth`. `run`:
        for the source's runs, whose failure is the source's `$errors` event."""
        return self.connected.resolve(props, app_prop_names(source.prop_defs), source_uses(source),
                                      source.id if run else None)

    def _instance(self, source: Source, props: dict[str, Any], db: dict[str, Any],
                  file_name: str | None = None) -> Instance:
        http = None
        for prop in source.prop_defs:
            if prop["type"] == "$.interface.http":
                http = {
                    "endpoint": f"{self.settings.base_url}/http/{source.endpoint_id}",
                    "customResponse": bool(prop.get("customResponse")),
                }
        return Instance(
            id=source.id,
            props=props,
            account=source.namespace,
            bill_to=source.user_id,
            db=db,
            env={"PD_COMPONENT": source.id},
            http=http,
            memory_mb=self.settings.run_memory_mb,
            file_name=file_name,
        )

    def context(self, source: Source, component: Component) -> RunContext:
        s = self.settings
        limits = Limits(s.max_event_bytes, s.max_log_bytes, s.max_channels, s.db_max_bytes, s.applied_kept)
        return RunContext(source.id, source.user_id, __version__, component.definition.dedupe, limits)

    async def call_hook(self, source: Source, component: Component, hook: str, db: dict[str, Any]) -> RunResult:
        """Compute of the source's owner: QuotaExceeded, and no code runs, when theirs is spent. In a
        turn of the namespace's share of hooks (TenantBusy when none comes in time), awaited
        holding no thread."""

        async def call() -> RunResult:
            try:
                bundle, instance = await self.offload.call(lambda: (
                    self.bundler.bundle(component.code, component.packages),
                    self.instance(source, db, component.file_name)))
                return await self.runner.hook(bundle, instance, hook, self.settings.hook_timeout_ms)
            except RunnerError as e:
                return e.as_result()
            except AccountUnusable as e:
                return RunResult.failed(e.code, e.message)
            except HeadwaterError as e:
                return RunResult.failed("RUNTIME_ERROR", e.message)

        async with self.limits.hooks.hold(source.namespace):
            return await self.quota.metered_async(source.user_id, call, self.offload)

    async def additional_props(self, component: Component, namespace: str, source_id: str,
                               configured: Callable[[], dict[str, Any]], bill_to: str) -> list[dict]:
        """Compute of `bill_to` (the caller): QuotaExceeded, and no code runs, when theirs is spent. In
        a turn of the namespace's share of runner calls, awaited holding no thread. `configured`:
        the props as the code gets them, read in that turn (resolving an account's credentials may
        refresh its token, which counts against the share too)."""

        async def call() -> Timed[list[dict[str, Any]]]:
            bundle, props = await self.offload.call(lambda: (
                self.bundler.bundle(component.code, component.packages), configured()))
            return await self.runner.additional_props(bundle, f"props:{source_id}", props,
                                                      self.settings.hook_timeout_ms, namespace, bill_to)

        try:
            async with self.limits.runner_calls.hold(namespace):
                return (await self.quota.metered_async(bill_to, call, self.offload)).value
        except RunnerError as e:
            raise Invalid(f"additionalProps failed: {e.message}", {"configured_props": [e.message]}) from None

    # reading what runs need

    def component(self, component_id: str) -> Component | None:
        """Saved components never change, so they are cached by id."""
        hit, found = self._components.get(component_id)
        if not hit:
            with self.uow(readonly=True) as uow:
                found = uow.components.get(component_id)
            if found is not None:
                self._components.put(component_id, found)
        return found

    # the free tier's daily cap (services/quota.py)

    def release(self, command: RunSource) -> None:
        """An admitted run that will never run gives its place back."""
        if command.reserved_by and command.reserved_day:
            self.usage.release(command.reserved_by, command.reserved_day)

    def _release_all(self, commands: list[RunSource]) -> None:
        for command in commands:
            self.release(command)

    # running

    async def run_batch(self, tasks: list[Task], on_respond: OnRespond | None = None) -> list[RunResult | None]:
        """Consecutive queued runs of one source (the RunSource handler), as one coroutine: one
        runner call for all of them, then committed together. None for each when the source is
        gone or inactive. `on_respond(task, response)` hears each run's `respond()` as it comes.

        The source's lease is held throughout (its runs never overlap, and go in the order they
        asked for it) and its state read (or taken from memory: see `_hot`). Store reads go to a
        worker thread only when the runs need them (a connected account's credentials, a free
        user's admission), the commit to `writes`. A batch whose account another caller is
        refreshing is given back (TryLater), having used no quota."""
        commands: list[RunSource] = [task.command for task in tasks]  # type: ignore[misc]
        assert all(isinstance(c, RunSource) for c in commands)
        source_id = tasks[0].command.lane or ""
        async with self.lease.held(source_id, self.lease_s):
            try:
                return await self._run_held(source_id, tasks, commands, on_respond)
            except TryLater:  # the source's state in memory stays good
                raise
            except BaseException:
                self._hot.pop(source_id, None)
                raise

    async def _run_held(self, source_id: str, tasks: list[Task], commands: list[RunSource],
                        on_respond: OnRespond | None) -> list[RunResult | None]:
        hot = None if self.lease.taken_elsewhere(source_id) else self._hot.get(source_id)
        if hot is None:
            hot = await asyncio.to_thread(self._read_hot, source_id)
        if hot is None:
            await asyncio.to_thread(self._release_all, commands)
            return [None] * len(tasks)
        known = hot

        def prepare() -> tuple[dict[str, Any] | AccountUnusable, tuple[dict[int, RunResult], list[int]]]:
            props = self._props(known, tasks)  # before runs are admitted: a batch given back used no quota
            return props, self._admit(known.source, known.state, tasks)

        needs_store = references(hot.props) or not all(self._admitted_ahead(c, hot.source.user_id) for c in commands)
        props, (refused, runnable) = await asyncio.to_thread(prepare) if needs_store else prepare()
        reported = await self._run(hot, props, [tasks[i] for i in runnable], on_respond) if runnable else []
        results = dict(refused)
        results.update(zip(runnable, reported, strict=True))
        secrets = self.secrets_of(hot.source, props if isinstance(props, dict) else hot.props)
        return await self.writes.call(functools.partial(self._record, hot, tasks, results, secrets))

    # the state of sources that run, kept while they do

    def _read_hot(self, source_id: str) -> _Hot | None:
        """The source, its component and state from the store (with the lease held): what its runs
        need, kept in memory from now on. None when the source cannot run (gone, inactive)."""
        with self.uow(readonly=True) as uow:
            source = uow.sources.get(source_id)
            state = uow.state.get(source_id)
        component = self.component(source.component_id) if source else None
        if source is None or component is None or not source.active:
            return None
        hot = _Hot(source, component, state, prop_forms.for_runner(source.configured_props, self.secrets))
        self._hot.put(source_id, hot)
        return hot

    def forget(self, source_id: str) -> None:
        """The source or its state changed other than by its runs (an update, hooks, a delete):
        its next run reads them again. Called with the source's lease held."""
        self._hot.pop(source_id, None)

    def _admitted_ahead(self, command: RunSource, user_id: str) -> bool:
        """Whether the run needs no store call to be admitted (counted at ingest, or a paid user)."""
        return bool(command.reserved_by) or self.quota.cached_tier(user_id) == "paid"

    def _admit(self, source: Source, state: SourceState,
               tasks: list[Task]) -> tuple[dict[int, RunResult], list[int]]:
        """Which tasks run: not those whose results are in already, nor those over the free tier's
        cap (they get their QUOTA_EXCEEDED result here)."""
        refused: dict[int, RunResult] = {}
        runnable: list[int] = []
        for i, task in enumerate(tasks):
            command: RunSource = task.command  # type: ignore[assignment]
            if state.took(command.route_key or task.id):
                continue
            admission = Admission(True) if command.reserved_by else self.quota.admit(source.user_id)
            if admission.admitted:
                runnable.append(i)
            else:
                refused[i] = RunResult.failed("QUOTA_EXCEEDED", admission.refusal.message if admission.refusal else "")
        return refused, runnable

    def _record(self, hot: _Hot, tasks: list[Task], results: dict[int, RunResult],
                secrets: frozenset[str]) -> list[RunResult | None]:
        """The runs' outcomes, their records, usage and fan-out in one commit (retried on a lost
        race); the state committed is the one the source's next runs start from."""
        source, component = hot.source, hot.component
        ctx = self.context(source, component)
        outcomes = []
        for i, task in enumerate(tasks):
            if i in results:
                command: RunSource = task.command  # type: ignore[assignment]
                info = RunInfo("rerun" if command.rerun_of else command.trigger, hook=None, rerun_of=command.rerun_of,
                               component_id=component.id, secrets=secrets)
                outcomes.append(Outcome(ctx, results[i], command.event, command.route_key or task.id, info,
                                        command.event_json()))

        counted = [o.result for o in outcomes if o.result.error_code not in NOT_RUN]

        def also(uow: UnitOfWork, new: SourceState) -> None:
            """Usage counts with the results; a timer run that ends lets the next tick run."""
            if counted:
                uow.usage.record(source.user_id, utc_day(), len(counted), sum(r.compute_ms for r in counted))
            if any(isinstance(t.command, RunSource) and t.command.trigger == "timer" for t in tasks):
                new.timer_run_since = None

        hops = max((t.command.hops for t in tasks if isinstance(t.command, RunSource)), default=0)
        # A timer run's tick saved the state after the runs before it committed (its `last_tick`,
        # `timer_run_since`), so the state in memory is a version behind: a commit tried on it
        # would fail its condition, and a failed DynamoDB transaction bills its write units (4 a
        # timer run). Such a commit reads the state instead.
        ticked = any(isinstance(t.command, RunSource) and t.command.trigger == "timer" for t in tasks)
        state, channels = commit_outcomes(self.uow, source.id, outcomes, now_ms, extra=also,
                                          route=lambda uow, events: self._routes(uow, source, events, hops),
                                          known=None if ticked else hot.state)
        self._hot.put(source.id, replace(hot, state=state))
        self.announce(source.id, channels)
        return [results.get(i) for i in range(len(tasks))]

    def secrets_of(self, source: Source, props: dict[str, Any]) -> frozenset[str]:
        """What a run's record masks: the values of its secret props and its accounts' credentials."""
        names = [p["name"] for p in source.prop_defs if p.get("secret") or p.get("type") == "app"]
        return secret_values(props.get(name) for name in names) if names else frozenset()

    def _props(self, hot: _Hot, tasks: list[Task]) -> dict[str, Any] | AccountUnusable:
        """The source's props with each connected account's current `$auth`, or why an account
        cannot give it. When another caller is refreshing an account whose token expired, the
        batch does not wait holding its thread: TryLater, until it has been deferred for
        REFRESH_WAIT_S in all (then it fails with ACCOUNT_REFRESH_FAILED)."""
        if all(hot.state.took(task.command.route_key or task.id) for task in tasks):  # type: ignore[attr-defined]
            return hot.props  # nothing will run
        try:
            return self.credentials(hot.source, hot.props, run=True)
        except RefreshUnderWay as e:
            after_s = _retry_after(tasks)
            if after_s is None:
                return e
            raise TryLater(e.message, after_s) from None
        except AccountUnusable as e:
            return e

    async def _run(self, hot: _Hot, props: dict[str, Any] | AccountUnusable, tasks: list[Task],
                   on_respond: OnRespond | None) -> list[RunResult]:
        """The tasks' runs in order, each seeing the `this.db` the ones before it left, in one
        runner call (no round trip to the runner per run), with the source's current credentials;
        each fails with the account's error code (a `$errors` event) when a connected account
        cannot give them."""
        if isinstance(props, AccountUnusable):
            return [RunResult.failed(props.code, props.message)] * len(tasks)
        instance = self._instance(hot.source, props, hot.state.db, hot.component.file_name)
        commands: list[RunSource] = [t.command for t in tasks]  # type: ignore[misc]
        try:
            bundle = await self._bundle(hot.component)
        except RunnerError as e:
            return [RunResult.failed(e.code, e.message, e.stack)] * len(tasks)
        except HeadwaterError as e:
            return [RunResult.failed("RUNTIME_ERROR", e.message)] * len(tasks)
        try:
            async for message in self.runner.run(bundle, instance, [c.event for c in commands],
                                                 max(c.timeout_ms for c in commands)):
                if isinstance(message, Responded):
                    if on_respond is not None:
                        on_respond(tasks[message.index], message.response)
                elif isinstance(message, Finished):
                    return message.results
        except RunnerError as e:  # the runner failed before it reported any run
            return [e.as_result() if i == 0 else RunResult.failed(e.code, e.message, e.stack)
                    for i in range(len(tasks))]  # the time it took is the first run's
        raise RunnerError("RUNNER_CRASHED", "the runner ended the call without its outcome")

    async def _bundle(self, component: Component) -> Bundle:
        bundle = self._bundles.get(component.id)
        if bundle is None:
            bundle = await asyncio.to_thread(self.bundler.bundle, component.code, component.packages)
            self._bundles.put(component.id, bundle)
        return bundle

    def refuse(self, source_id: str, trigger: Any, quota: QuotaExceeded) -> None:
        """A request turned away for quota (429) still leaves its QUOTA_EXCEEDED error event."""
        with self.uow(readonly=True) as uow:
            source = uow.sources.get(source_id)
        if source is not None:
            self.fail(source, trigger, "QUOTA_EXCEEDED", quota.message)

    def fail(self, source: Source, trigger: Any, code: str, message: str) -> None:
        """An error event for something that stopped before (or instead of) a run; routed like any."""
        component = self.component(source.component_id)
        if component is None:
            return
        outcome = Outcome(self.context(source, component), RunResult.failed(code, message), trigger)
        route = (lambda uow, events: self._routes(uow, source, events, 0)) if code != "HOP_LIMIT" else None
        _, channels = commit_outcomes(self.uow, source.id, [outcome], now_ms, route=route)
        self.announce(source.id, channels)

    def _routes(self, uow: UnitOfWork, source: Source, events: list[StoredEvent], hops: int) -> Routed:
        return self.routes(uow, source.id, source.namespace, source.created_at, events, hops)

    def announce(self, emitter_id: str, channels: set[str]) -> None:
        """After commit: live readers of these channels have new events."""
        for channel in channels:
            self.bus.published(emitter_id, channel)


def _retry_after(tasks: list[Task]) -> float | None:
    """When a batch waiting on its account's refresh looks again: soon at first, less often as it
    waits; None once it has waited REFRESH_WAIT_S in all."""
    since = min((task.deferred_since for task in tasks if task.deferred_since is not None), default=None)
    waited = 0.0 if since is None else time.time() - since
    if waited >= REFRESH_WAIT_S:
        return None
    return min(_RETRY_MOST_S, max(_RETRY_FIRST_S, waited / 4))

