"""Sources: deploy, update, delete and list deployed components (SPEC Sources, states table).

Hooks run before anything is kept: a hook that throws fails the request with 422 and leaves no
half-created source; what the hooks emitted and wrote is committed with the source itself, and
with a SyncSchedule command that makes the scheduler match the committed source. A name slug is
claimed by conditional insert: a taken one raises Conflict and the next one is tried.

Hooks are compute of the source's owner (its `user_id`), whoever deploys, updates or deletes it;
`additionalProps()` is the caller's. Past the payer's quota the request is refused (429) before
the code runs, but for a delete, which goes on without its deactivate hook.

Deploying, updating and deleting are coroutines: their code runs awaited holding no thread, in a
turn of the namespace's share of hooks or runner calls (TenantLimits); their store work and
bundling go to `offload`.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from headwater.domain import health, ids
from headwater.domain.commands import PurgeSource, RunSource, SyncSchedule
from headwater.domain.connected_accounts import AccountUses, reference
from headwater.domain.errors import BadRequest, Conflict, Forbidden, Invalid, NotFound, QuotaExceeded
from headwater.domain.models import Component, Principal, Source, SourceState
from headwater.domain.pagination import Page, PageRequest
from headwater.domain.props import ValidatedProps, validate
from headwater.domain.run_records import RunInfo
from headwater.domain.runs import RunResult, apply_db
from headwater.domain.slugs import candidate_slugs, slugify
from headwater.domain.snapshots import StateSnapshot
from headwater.domain.timers import Timer
from headwater.ports import EventBus, Offload, Secrets, UnitOfWork, UnitOfWorkFactory
from headwater.services import props as prop_forms
from headwater.services.accounts import Accounts
from headwater.services.cache import TtlCache
from headwater.services.clock import now_ms, now_s
from headwater.services.components import Components
from headwater.services.connected_accounts import app_prop_names, source_grants
from headwater.services.recording import Outcome, StateConflict, commit_outcomes
from headwater.services.runs import Runs
from headwater.settings import Settings

_ENDPOINT_TTL_S = 5.0
KEEP: Any = object()  # a setting not given


@dataclass
class SourceRequest:
    """The body of POST /sources and PUT /sources/{id}."""

    component_id: str | None = None
    component_code: str | None = None
    component_url: str | None = None
    component_key: str | None = None
    name: str | None = None
    configured_props: dict[str, Any] | None = None
    active: bool | None = None
    component_file: str | None = None  # shown in stacks in place of `component.js` (domain.file_names)
    # health settings (domain.health); on update, KEEP leaves them as they are and None clears
    # `expect_events_within`
    expect_events_within: Any = KEEP
    catch_up: Any = KEEP

    def health(self, old: Source | None = None) -> dict[str, Any]:
        """The source's health settings, validated: these given, the others as `old` has them."""
        errors: dict[str, list[str]] = {}
        values: dict[str, Any] = old.health_settings() if old else {"expect_events_within": None, "catch_up": "skip"}
        for name, check in (("expect_events_within", health.expect_events_within), ("catch_up", health.catch_up)):
            given = getattr(self, name)
            if given is KEEP:
                continue
            try:
                values[name] = check(given)
            except health.SettingError as e:
                errors[name] = [str(e)]
        if errors:
            raise Invalid(f"Some settings are not valid: {', '.join(errors)}.", errors)
        return values

    @property
    def names_component(self) -> bool:
        return any((self.component_id, self.component_code, self.component_url, self.component_key,
                    self.component_file))


@dataclass
class _Snap:
    """The snapshot a deploy, update or restore takes in its commit (domain.snapshots): of the
    state it replaces (`replaced`: read in the commit's unit of work, at the version the commit is
    conditioned on, so it is exactly what the commit replaces), else of the state it leaves (a
    deploy's). `component`: the code that ran on that state. `restored`: the db a restore leaves."""

    reason: str
    component: Component
    replaced: bool
    id: str = ""
    restored: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.id = self.id or ids.new_id("snapshot")

    def take(self, uow: UnitOfWork, source_id: str, state: SourceState) -> None:
        if self.restored is not None:
            state.db = dict(self.restored)
            state.db_changed_outside_runs()  # a trial cannot rebuild this.db across it (docs/trials.md)
        db = uow.state.get(source_id).db if self.replaced else state.db
        state.snapshots += 1
        uow.snapshots.put(source_id, StateSnapshot(
            id=self.id, seq=state.snapshots, created_at=now_s(), reason=self.reason,
            component_id=self.component.id, component_version=self.component.definition.version, db=db))


class Sources:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        accounts: Accounts,
        components: Components,
        runs: Runs,
        secrets: Secrets,
        settings: Settings,
        offload: Offload,
        bus: EventBus,
    ) -> None:
        """`bus`: where a change of a source is told, so every cache of its endpoint forgets it."""
        self.uow = uow
        self.offload = offload
        self.accounts = accounts
        self.components = components
        self.runs = runs
        self.secrets = secrets
        self.settings = settings
        self.endpoints: TtlCache[str, Source | None] = TtlCache(_ENDPOINT_TTL_S)
        self.bus = bus
        bus.on_endpoint_changed(self.endpoints.forget)

    # reading

    def get(self, principal: Principal, source_id: str) -> Source:
        with self.uow(readonly=True) as uow:
            source = uow.sources.get(source_id)
        if source is None or not principal.can_see(source.namespace):
            raise NotFound(f"No source {source_id}.")
        return source

    def list(self, principal: Principal, org_id: str | None, page: PageRequest) -> Page[Source]:
        namespace = self.accounts.namespace(principal, org_id)
        with self.uow(readonly=True) as uow:
            return uow.sources.list(namespace, page)

    def to_api(self, source: Source, include_user: bool = True) -> dict[str, Any]:
        data = {
            "id": source.id,
            "user_id": source.user_id,
            "component_id": source.component_id,
            "configured_props": prop_forms.for_api(source, self.settings.base_url),
            "active": source.active,
            "created_at": source.created_at,
            "updated_at": source.updated_at,
            "name": source.name,
            "name_slug": source.name_slug,
            **source.health_settings(),
        }
        if not include_user:
            del data["user_id"]
        return data

    # writing

    async def _component_for(self, principal: Principal, namespace: str, req: SourceRequest) -> Component:
        """SPEC precedence: component_id, then code (url kept as metadata), then url, then registry key."""
        if req.component_file is not None and (req.component_code is None or req.component_id):
            raise BadRequest("`component_file` names the file of `component_code`: give the code too.",
                             {"component_file": ["goes with component_code"]})
        component_id, key = req.component_id, req.component_key
        if component_id:
            def usable() -> Component:
                component = self.components.get(principal, component_id)
                self.components.check_usable_in(principal, component, namespace)
                return component
            return await self.offload.call(usable)
        if req.component_code is not None or req.component_url:
            code = await self.components.resolve_code(namespace, req.component_code, req.component_url)
            return await self.components.save_async(namespace, principal.user.id, code, req.component_url,
                                                    req.component_file)
        if key:
            return await self.offload.call(lambda: self.components.get_registry(key))
        raise BadRequest(
            "Give `component_id`, `component_code`, `component_url` or `component_key`.",
            {"component_id": ["one of component_id, component_code, component_url, component_key is required"]},
        )

    async def _props(self, principal: Principal, component: Component, namespace: str, source_id: str,
                     configured: dict[str, Any], stored_secrets: builtins.set[str] | None = None,
                     carried: builtins.set[str] | None = None,
                     kept: Mapping[str, tuple[str, str]] | None = None) -> tuple[
        ValidatedProps, builtins.list[dict[str, Any]], dict[str, dict[str, str]]
    ]:
        """The props validated, the final prop set, and the grants of their account references.
        `kept`: the grants of the references the source had already (see ConnectedAccounts.check)."""
        definition = component.definition
        if definition.type != "source":
            raise Invalid(f"Component {component.id} is an {definition.type}, not a source.",
                          {"component_id": ["is not a source"]})
        defined = definition.configurable_props
        connected = self.runs.connected
        # before additionalProps runs: no credentials but those this caller may use here reach its code
        await self.offload.call(lambda: connected.check(principal, configured, defined, namespace, kept))
        prop_list = defined
        if definition.has_additional_props:
            uses = AccountUses(namespace, principal.user.id, kept or {})
            prop_list = await self.runs.additional_props(
                component, namespace, source_id, lambda: connected.resolve(configured, app_prop_names(defined), uses),
                principal.user.id)
        validated = validate(prop_list, configured, stored_secrets or (), carried or ())
        if validated.errors:
            names = ", ".join(validated.errors)
            raise Invalid(f"Some props are not valid: {names}.", validated.errors)
        # what is kept, defaults included: a reference in a default is checked like one given
        grants = await self.offload.call(lambda: connected.check(principal, validated.values, prop_list, namespace,
                                                                 kept))
        return validated, prop_list, grants

    async def _hooks(self, source: Source, component: Component, names: builtins.list[str],
                     db: dict[str, Any]) -> builtins.list[tuple[str, RunResult]]:
        """Runs the hooks the component has, in order; each sees the `this.db` the previous left."""
        results: builtins.list[tuple[str, RunResult]] = []
        for hook in names:
            if hook not in component.definition.hooks:
                continue
            result = await self.runs.call_hook(source, component, hook, db)
            if result.error:
                raise Invalid(f"The {hook} hook failed: {result.error.get('message') or result.error.get('code')}",
                              {"hooks": [f"{hook}: {result.error.get('message')}"]})
            results.append((hook, result))
            db = self._db_after(db, result)
        return results

    def _db_after(self, db: dict[str, Any], result: RunResult) -> dict[str, Any]:
        """The `this.db` the next hook sees: what committing `result` will leave (writes over the
        bound are dropped then, with a DB_TOO_LARGE error event, by domain.runs.record)."""
        return apply_db(db, result.db_writes, self.settings.db_max_bytes)[0]

    def _db(self, source_id: str) -> dict[str, Any]:
        with self.uow(readonly=True) as uow:
            return uow.state.get(source_id).db

    def _outcomes(self, source: Source, component: Component,
                  results: builtins.list[tuple[str, RunResult]]) -> builtins.list[Outcome]:
        """The hooks' outcomes, each kept on record as a run of kind `hook`."""
        if not results:
            return []
        ctx = self.runs.context(source, component)
        secrets = self.runs.secrets_of(source, prop_forms.for_runner(source.configured_props, self.secrets))
        return [Outcome(ctx, result, run=RunInfo("hook", hook=hook, component_id=component.id, secrets=secrets))
                for hook, result in results]

    async def create(self, principal: Principal, req: SourceRequest, org_id: str | None) -> Source:
        namespace = await self.offload.call(lambda: self.accounts.namespace(principal, org_id))
        component = await self._component_for(principal, namespace, req)
        source_id = ids.new_id("source")
        settings = req.health()
        configured = dict(req.configured_props or {})
        validated, prop_defs, grants = await self._props(principal, component, namespace, source_id, configured)
        ts = now_s()
        source = Source(
            id=source_id,
            namespace=namespace,
            user_id=principal.user.id,
            component_id=component.id,
            name="",
            name_slug="",
            configured_props=prop_forms.to_stored(validated, self.secrets),
            prop_defs=prop_defs,
            endpoint_id=ids.new_id("endpoint") if validated.http_props else None,
            active=req.active is not False,
            created_at=ts,
            updated_at=ts,
            account_grants=grants,
            **settings,
        )
        hooks = ["deploy", "activate"] if source.active else ["deploy"]  # activate waits for the source to be enabled
        async with self.runs.lease.held(source_id, self.runs.lease_s):
            outcomes = self._outcomes(source, component, await self._hooks(source, component, hooks, {}))
            base = slugify(req.name) if req.name else slugify(component.definition.name)
            channels = await self.offload.call(lambda: self._commit_named(
                source, candidate_slugs(base), lambda slug: req.name or slug, outcomes,
                lambda uow: uow.sources.add(source), retry=True, snap=_Snap("deploy", component, replaced=False)))
        self._changed(source, channels)
        return source

    async def update(self, principal: Principal, source_id: str, req: SourceRequest) -> Source:
        old, old_component = await self.offload.call(lambda: self._with_component(principal, source_id))
        settings = req.health(old)
        component = await self._component_for(principal, old.namespace, req) if req.names_component else old_component
        configured = (
            prop_forms.unmask(req.configured_props, old.configured_props, self.secrets)
            if req.configured_props is not None
            else prop_forms.for_runner(old.configured_props, self.secrets)
        )
        secret = prop_forms.stored_secrets(old.configured_props)
        carried = prop_forms.carried_secrets(req.configured_props, old.configured_props)
        kept = source_grants(old)
        if req.names_component or req.configured_props is not None:
            unchanged = component.code_hash == old_component.code_hash and _plain(configured) == _plain(
                prop_forms.for_runner(old.configured_props, self.secrets))
            if not unchanged:  # checked before any code of it runs (additionalProps would get the accounts)
                await self.offload.call(lambda: self._may_change(principal, old.namespace, kept, configured))
        validated, prop_defs, grants = await self._props(principal, component, old.namespace, source_id, configured,
                                                         secret, carried, kept)
        active = req.active is not False
        async with self.runs.lease.held(source_id, self.runs.lease_s):
            db = await self.offload.call(lambda: self._db(source_id))
            results = await self._hooks(old, old_component, ["deactivate"], db) if old.active else []
            outcomes = self._outcomes(old, old_component, results)
            source = Source(
                **{**old.__dict__,
                   "component_id": component.id,
                   "configured_props": prop_forms.to_stored(validated, self.secrets, old.configured_props, carried),
                   "prop_defs": prop_defs,
                   "endpoint_id": (old.endpoint_id or ids.new_id("endpoint")) if validated.http_props else None,
                   "active": active,
                   "updated_at": now_s(),
                   "account_grants": grants,
                   **settings},
            )
            if active:
                for _, result in results:
                    db = self._db_after(db, result)
                outcomes += self._outcomes(source, component, await self._hooks(source, component, ["activate"], db))
            renamed = bool(req.name and req.name != old.name)
            slugs = candidate_slugs(slugify(req.name)) if req.name and renamed else [old.name_slug]
            channels = await self.offload.call(lambda: self._commit_named(
                source, slugs, lambda _: req.name if renamed and req.name else old.name, outcomes,
                lambda uow: uow.sources.update(source, old), retry=renamed,
                snap=_Snap("update", old_component, replaced=True)))
        self._changed(old, set())
        self._changed(source, channels)
        return source

    async def restore(self, principal: Principal, source_id: str, snapshot_id: str) -> str:
        """Puts a snapshot's `this.db` back, as an update of nothing else: the deactivate hook of
        the running code on the current db, the activate hook on the restored one (both when the
        source is active), `updated_at` moved, and a snapshot of the state it replaces taken in the
        same commit (so a restore can be undone). Returns that snapshot's id."""
        old, component = await self.offload.call(lambda: self._with_component(principal, source_id))

        def found() -> StateSnapshot:
            with self.uow(readonly=True) as uow:
                snapshot = uow.snapshots.get(source_id, snapshot_id)
            if snapshot is None:
                raise NotFound(f"No snapshot {snapshot_id} of source {source_id}.")
            return snapshot
        snapshot = await self.offload.call(found)
        if snapshot.size > self.settings.db_max_bytes:
            raise Invalid(f"The snapshot's this.db is {snapshot.size} bytes of JSON, over the limit of "
                          f"{self.settings.db_max_bytes} bytes (HEADWATER_DB_MAX_BYTES).",
                          {"snapshot_id": ["its this.db is over the size limit"]})
        async with self.runs.lease.held(source_id, self.runs.lease_s):
            db = await self.offload.call(lambda: self._db(source_id))
            results = await self._hooks(old, component, ["deactivate"], db) if old.active else []
            outcomes = self._outcomes(old, component, results)
            source = Source(**{**old.__dict__, "updated_at": now_s()})
            restored = dict(snapshot.db)
            if old.active:
                activated = await self._hooks(source, component, ["activate"], restored)
                outcomes += self._outcomes(source, component, activated)
                for _, result in activated:
                    restored = self._db_after(restored, result)
            snap = _Snap("restore", component, replaced=True, restored=restored)
            try:
                channels = await self.offload.call(lambda: self._commit(
                    source, outcomes, lambda uow: uow.sources.update(source, old), snap))
            except StateConflict:
                raise Conflict(f"The state of source {source_id} kept changing: try again.", field="state") from None
        self._changed(source, channels)
        return snap.id

    def _with_component(self, principal: Principal, source_id: str) -> tuple[Source, Component]:
        source = self.get(principal, source_id)
        return source, self.components.by_id(source.component_id)

    def _commit_named(self, source: Source, slugs: Iterable[str], name: Callable[[str], str],
                      outcomes: builtins.list[Outcome], write: Callable[[UnitOfWork], None], retry: bool,
                      snap: _Snap | None = None) -> set[str]:
        """`_commit` under the first of `slugs` that is free (`retry`), else the first."""
        for slug in slugs:
            source.name_slug = slug
            source.name = name(slug)
            try:
                return self._commit(source, outcomes, write, snap)
            except Conflict as e:
                if e.field != "name_slug" or not retry:
                    raise
        raise Conflict("No name is free for the source.", field="name_slug")

    def _may_change(self, principal: Principal, namespace: str, kept: Mapping[str, tuple[str, str]],
                    configured: dict[str, Any]) -> None:
        """Changing the code or props of a source requires being allowed to use each account it
        keeps (DECISIONS, Accounts): new code, or a prop that steers it (a URL), would hand the
        editor credentials they may not use. Pausing, resuming and renaming do not; giving such a
        prop an account the editor may use does."""
        refused = {name: [f"uses the connected account {account_id}, which you may not use"]
                   for name, (account_id, _) in kept.items()
                   if reference(configured.get(name)) == account_id
                   and not self.runs.connected.may_use(principal.user.id, account_id, namespace)}
        if refused:
            raise Forbidden(f"The source uses an account you may not use ({', '.join(refused)}): only its owner may "
                            "change the source's code or props; give those props an account of yours to change them.",
                            refused)

    async def delete(self, principal: Principal, source_id: str) -> None:
        source, component = await self.offload.call(lambda: self._with_component(principal, source_id))
        async with self.runs.lease.held(source_id, self.runs.lease_s):
            if source.active and "deactivate" in component.definition.hooks:
                db = await self.offload.call(lambda: self._db(source_id))
                # A failing deactivate hook does not keep alive a source the user asked to delete, nor
                # does its owner's spent quota (then the hook does not run).
                with contextlib.suppress(QuotaExceeded):
                    await self.runs.call_hook(source, component, "deactivate", db)
            await self.offload.call(lambda: self._remove(source))
            self.runs.forget(source_id)
        self._changed(source, set())

    def _remove(self, source: Source) -> None:
        with self.uow() as uow:
            uow.sources.remove(source)
            uow.subscriptions.remove_naming(source.id)
            uow.outbox.add(PurgeSource(source.id, source.namespace))
            uow.commit()

    def _commit(self, source: Source, outcomes: builtins.list[Outcome],
                write: Callable[[UnitOfWork], None], snap: _Snap | None = None) -> set[str]:
        """The source record, what its hooks did, the schedule's sync and the snapshot of its state
        in one unit of work."""
        def extra(uow: UnitOfWork, state: SourceState) -> None:
            write(uow)
            if snap is not None:
                snap.take(uow, source.id, state)

        _, channels = commit_outcomes(self.uow, source.id, outcomes, now_ms, extra=extra,
                                      commands=[SyncSchedule(source.id, source.namespace)])
        self.runs.forget(source.id)
        return channels

    def _changed(self, source: Source, channels: set[str]) -> None:
        """After a committed change: the endpoint's caches forget it, live readers hear of it."""
        if source.endpoint_id:
            self.bus.endpoint_changed(source.endpoint_id)
        self.runs.announce(source.id, channels)

    def by_endpoint(self, endpoint_id: str) -> Source | None:
        """The HTTP interface's lookup, cached: another machine's change shows within a few seconds."""
        hit, source = self.endpoints.get(endpoint_id)
        if not hit:
            with self.uow(readonly=True) as uow:
                source = uow.sources.by_endpoint(endpoint_id)
            self.endpoints.put(endpoint_id, source)
        return source

    def timer(self, source: Source) -> Timer | None:
        """The source's timer, when it is active and has one."""
        if not source.active:
            return None
        for prop in source.prop_defs:
            if prop["type"] == "$.interface.timer" and prop["name"] in source.configured_props:
                return Timer.parse(source.configured_props[prop["name"]])
        return None

    def manual_run(self, principal: Principal, source_id: str, event: Any) -> None:
        """POST /sources/{id}/run: the body is the event; a timer source without one gets a timer event."""
        source = self.get(principal, source_id)
        if not source.active:
            raise Conflict(f"Source {source_id} is inactive; activate it to run it.")
        timeout_ms = self.settings.http_timeout_ms
        timer = self.timer(source)
        if event is None and timer is not None:
            event = timer.event(now_s())
            timeout_ms = self.settings.timer_timeout_ms
        with self.uow() as uow:
            uow.outbox.add(RunSource(source_id, event, timeout_ms, "manual", namespace=source.namespace))
            uow.commit()



def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """Prop values but account references: what steers the code beside the accounts it uses."""
    return {name: value for name, value in values.items() if reference(value) is None}
