"""Sources: deploy, update, delete and list deployed components (SPEC Sources, states table).

Hooks run before anything is kept: a hook that throws fails the request with 422 and leaves no
half-created source; what the hooks emitted and wrote is committed with the source itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.domain import ids
from headwater.domain.errors import BadRequest, Conflict, Invalid, NotFound
from headwater.domain.models import Component, Principal, Source, SourceState
from headwater.domain.pagination import Page, PageRequest
from headwater.domain.props import ValidatedProps, validate
from headwater.domain.slugs import slugify, unique_slug
from headwater.domain.timers import Timer
from headwater.ports import Scheduler, Secrets, TaskQueue, UnitOfWork, UnitOfWorkFactory
from headwater.services import props as prop_forms
from headwater.services.accounts import Accounts
from headwater.services.clock import now_s
from headwater.services.components import Components
from headwater.services.runs import RunResult, Runs
from headwater.settings import Settings


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

    @property
    def names_component(self) -> bool:
        return any((self.component_id, self.component_code, self.component_url, self.component_key))


class Sources:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        accounts: Accounts,
        components: Components,
        runs: Runs,
        scheduler: Scheduler,
        queue: TaskQueue,
        secrets: Secrets,
        settings: Settings,
    ) -> None:
        self.queue = queue
        self.uow = uow
        self.accounts = accounts
        self.components = components
        self.runs = runs
        self.scheduler = scheduler
        self.secrets = secrets
        self.settings = settings
        self.generation = 0  # bumped on every change, so caches of sources know to forget

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
        }
        if not include_user:
            del data["user_id"]
        return data

    # writing

    def _component_for(self, principal: Principal, namespace: str, req: SourceRequest) -> Component:
        """SPEC precedence: component_id, then code (url kept as metadata), then url, then registry key."""
        if req.component_id:
            return self.components.get(principal, req.component_id)
        if req.component_code is not None or req.component_url:
            code = self.components.resolve_code(req.component_code, req.component_url)
            return self.components.save(namespace, principal.user.id, code, req.component_url)
        if req.component_key:
            return self.components.get_registry(req.component_key)
        raise BadRequest(
            "Give `component_id`, `component_code`, `component_url` or `component_key`.",
            {"component_id": ["one of component_id, component_code, component_url, component_key is required"]},
        )

    def _props(self, component: Component, source_id: str, configured: dict[str, Any]) -> tuple[
        ValidatedProps, list[dict[str, Any]]
    ]:
        definition = component.definition
        if definition.type != "source":
            raise Invalid(f"Component {component.id} is an {definition.type}, not a source.",
                          {"component_id": ["is not a source"]})
        prop_list = definition.configurable_props
        if definition.has_additional_props:
            prop_list = self.runs.additional_props(component, source_id, configured)
        validated = validate(prop_list, configured)
        if validated.errors:
            names = ", ".join(validated.errors)
            raise Invalid(f"Some props are not valid: {names}.", validated.errors)
        return validated, prop_list

    def _hooks(self, source: Source, component: Component, names: list[str], state: SourceState) -> list[RunResult]:
        results = []
        for hook in names:
            if hook not in component.definition.hooks:
                continue
            result = self.runs.call_hook(source, component, hook, state)
            if result.error:
                raise Invalid(f"The {hook} hook failed: {result.error.get('message') or result.error.get('code')}",
                              {"hooks": [f"{hook}: {result.error.get('message')}"]})
            results.append(result)
            state.db.update(result.db_writes)
        return results

    def create(self, principal: Principal, req: SourceRequest, org_id: str | None) -> Source:
        namespace = self.accounts.namespace(principal, org_id)
        component = self._component_for(principal, namespace, req)
        source_id = ids.new_id("source")
        configured = dict(req.configured_props or {})
        validated, prop_defs = self._props(component, source_id, configured)
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
        )
        state = SourceState()
        with self.runs.lock(source_id):
            hook_results = self._hooks(source, component, ["deploy", "activate"], state)
            with self.uow() as uow:
                base = slugify(req.name) if req.name else slugify(component.definition.name)
                source.name_slug = unique_slug(base, uow.sources.slugs(namespace))
                source.name = req.name or source.name_slug
                uow.sources.add(source)
                channels = self._record_hooks(uow, source, component, hook_results)
                self._schedule(uow, source, validated)
                uow.commit()
        self._changed(source.id, channels)
        return source

    def update(self, principal: Principal, source_id: str, req: SourceRequest) -> Source:
        old = self.get(principal, source_id)
        old_component = self.components.by_id(old.component_id)
        component = self._component_for(principal, old.namespace, req) if req.names_component else old_component
        configured = (
            prop_forms.unmask(req.configured_props, old.configured_props, self.secrets)
            if req.configured_props is not None
            else prop_forms.for_runner(old.configured_props, self.secrets)
        )
        validated, prop_defs = self._props(component, source_id, configured)
        active = req.active is not False
        with self.runs.lock(source_id):
            with self.uow(readonly=True) as uow:
                state = uow.state.get(source_id)
            results = self._hooks(old, old_component, ["deactivate"], state) if old.active else []
            source = Source(
                **{**old.__dict__,
                   "component_id": component.id,
                   "configured_props": prop_forms.to_stored(validated, self.secrets, old.configured_props),
                   "prop_defs": prop_defs,
                   "endpoint_id": (old.endpoint_id or ids.new_id("endpoint")) if validated.http_props else None,
                   "active": active,
                   "updated_at": now_s()},
            )
            if active:
                results += self._hooks(source, component, ["activate"], state)
            with self.uow() as uow:
                if req.name and req.name != old.name:
                    source.name = req.name
                    taken = uow.sources.slugs(old.namespace) - {old.name_slug}
                    source.name_slug = unique_slug(slugify(req.name), taken)
                uow.sources.update(source)
                channels = self._record_hooks(uow, source, component, results)
                uow.timers.remove(source_id)
                if active:
                    self._schedule(uow, source, validated)
                uow.commit()
        self._changed(source.id, channels)
        return source

    def delete(self, principal: Principal, source_id: str) -> None:
        source = self.get(principal, source_id)
        component = self.components.by_id(source.component_id)
        with self.runs.lock(source_id):
            with self.uow(readonly=True) as uow:
                state = uow.state.get(source_id)
            if source.active and "deactivate" in component.definition.hooks:
                # A failing deactivate hook does not keep alive a source the user asked to delete.
                self.runs.call_hook(source, component, "deactivate", state)
            with self.uow() as uow:
                uow.sources.remove(source_id)
                uow.commit()
        self.runs.forget(source_id)
        self._changed(source_id, set())

    def _record_hooks(
        self, uow: UnitOfWork, source: Source, component: Component, results: list[RunResult]
    ) -> set[str]:
        channels: set[str] = set()
        for result in results:
            channels |= self.runs.record(uow, source, component, result, trigger=None, count_usage=False)
        self.runs.trim(uow, source.id, channels)
        return channels

    def _changed(self, source_id: str, channels: set[str]) -> None:
        """After a committed change: caches of sources forget, live readers and timers hear of it."""
        self.generation += 1
        self.runs.announce(source_id, channels)
        self.scheduler.changed()

    def manual_run(self, principal: Principal, source_id: str, event: Any) -> None:
        """POST /sources/{id}/run: the body is the event; a timer source without one gets a timer event."""
        source = self.get(principal, source_id)
        if not source.active:
            raise Conflict(f"Source {source_id} is inactive; activate it to run it.")
        timeout_ms = self.settings.http_timeout_ms
        if event is None:
            for prop in source.prop_defs:
                if prop["type"] == "$.interface.timer" and prop["name"] in source.configured_props:
                    event = Timer.parse(source.configured_props[prop["name"]]).event(now_s())
                    timeout_ms = self.settings.timer_timeout_ms
        with self.uow() as uow:
            task_id = uow.tasks.add("run", source_id, {"event": event, "timeout_ms": timeout_ms,
                                                       "trigger": "manual"}, 0)
            uow.commit()
        self.queue.submitted([task_id])

    def _schedule(self, uow: UnitOfWork, source: Source, validated: ValidatedProps) -> None:
        if not source.active:
            return
        for timer in validated.timers.values():
            uow.timers.set(source.id, timer.stored(), timer.next_fire(now_s()))
            break
