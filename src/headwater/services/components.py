"""Saving components and reading them back (SPEC: Components).

Saving runs the code: it is bundled (once per code hash) and described by the Node runner, so
a component that does not load is refused with the loader's message before anything is kept.
Loading it is compute of the user who saves it (services/quota.py), as a prop's `options()` is of
the user who asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from headwater.domain import file_names, ids
from headwater.domain.connected_accounts import AccountUses
from headwater.domain.errors import BadRequest, Invalid, NotFound, PayloadTooLarge, Unavailable
from headwater.domain.models import REGISTRY_NAMESPACE, Component, ComponentDefinition, Principal
from headwater.domain.pagination import Page, PageRequest
from headwater.ports import (
    BlockingRunner,
    Bundle,
    Bundler,
    Offload,
    Runner,
    RunnerError,
    Timed,
    UnitOfWorkFactory,
    UrlFetcher,
)
from headwater.services.accounts import Accounts
from headwater.services.clock import now_s
from headwater.services.connected_accounts import ConnectedAccounts, app_prop_names
from headwater.services.quota import Quota
from headwater.services.tenant_slots import TenantLimits
from headwater.settings import Settings

_USER_FAULTS = {"LOAD_ERROR", "CONFIGURATION_ERROR", "TIMEOUT", "OUT_OF_MEMORY"}
# options() that throws (its API not reached, a TypeError of its own) is the component's failure,
# not the runner's: a 422 naming it, never a 503 that tells the form to try again later.
_OPTIONS_FAULTS = _USER_FAULTS | {"RUNTIME_ERROR"}


@dataclass(frozen=True)
class _OptionsCall:
    """A prop's `options()` call, checked and ready for the runner."""

    bundle: Bundle
    caller: str
    prop: str
    configured: dict[str, Any]
    page: int
    prev_context: Any
    query: str | None
    namespace: str


class Components:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        accounts: Accounts,
        bundler: Bundler,
        runner: BlockingRunner,
        fetcher: UrlFetcher,
        settings: Settings,
        connected: ConnectedAccounts,
        quota: Quota,
        async_runner: Runner,
        offload: Offload,
        limits: TenantLimits,
    ) -> None:
        """`runner` for callers that are threads (the CLI, registry publishing), `async_runner` for
        coroutines (the API's): those wait for a turn of the namespace's share (`limits`) and do
        their blocking store work and bundling on `offload`."""
        self.uow = uow
        self.async_runner = async_runner
        self.offload = offload
        self.limits = limits
        self.connected = connected
        self.quota = quota
        self.accounts = accounts
        self.bundler = bundler
        self.runner = runner
        self.fetcher = fetcher
        self.settings = settings

    async def resolve_code(self, namespace: str, code: str | None, url: str | None) -> str:
        """SPEC precedence: `component_code` wins; `component_url` is fetched only without it, in a
        turn of the namespace's share of URL fetches (TenantBusy when none comes in time), awaited
        holding no thread (the fetcher bounds the whole exchange)."""
        if code is None:
            if not url:
                raise BadRequest(
                    "Give `component_code` or `component_url`.",
                    {"component_code": ["one of component_code, component_url is required"]},
                )
            async with self.limits.url_fetches.hold(namespace):
                code = await self.fetcher.fetch_text(url)
        given = code
        return await self.offload.call(lambda: self.checked_code(given))

    def checked_code(self, code: str) -> str:
        """The code, refused when it is over the size limit or empty."""
        if len(code.encode()) > self.settings.max_code_bytes:
            raise PayloadTooLarge(f"Component code is over {self.settings.max_code_bytes} bytes.")
        if not code.strip():
            raise Invalid("The component code is empty.", {"component_code": ["empty"]})
        return code

    def describe(self, code: str, account: str, bill_to: str) -> tuple[Bundle, ComponentDefinition]:
        """Bundles and loads the code in `account`'s own runner process (never one that serves
        another account: module code runs while it is described), as compute of `bill_to` (none:
        the operator's registry publishing); QuotaExceeded, before even the bundling, when theirs is spent."""

        def load() -> Timed[tuple[Bundle, ComponentDefinition]]:
            bundle = self.bundler.bundle(code)
            described = self.runner.describe(bundle, self.settings.describe_timeout_ms, account, bill_to)
            return Timed((bundle, described.value), described.duration_ms)

        with _describe_failures():
            return self.quota.metered(bill_to, load).value

    async def describe_async(self, code: str, account: str, bill_to: str) -> tuple[Bundle, ComponentDefinition]:
        """`describe` for a coroutine: waits for a turn of `account`'s share of runner calls
        (TenantBusy when none comes in time), then awaits the runner holding no thread."""
        async with self.limits.runner_calls.hold(account):
            return await self.describe_in_turn(code, account, bill_to)

    async def describe_in_turn(self, code: str, account: str, bill_to: str) -> tuple[Bundle, ComponentDefinition]:
        """`describe_async` for a caller that holds a turn of `account`'s share already (a trial)."""

        async def load() -> Timed[tuple[Bundle, ComponentDefinition]]:
            bundle = await self.offload.call(lambda: self.bundler.bundle(code))
            described = await self.async_runner.describe(bundle, self.settings.describe_timeout_ms, account, bill_to)
            return Timed((bundle, described.value), described.duration_ms)

        with _describe_failures():
            return (await self.quota.metered_async(bill_to, load, self.offload)).value

    def save(self, namespace: str, created_by: str | None, code: str, url: str | None,
             file_name: str | None = None) -> Component:
        check_file_name(file_name)
        bundle, definition = self.describe(code, namespace, created_by or "")
        return self.store(namespace, created_by, code, url, bundle, definition, file_name)

    async def save_async(self, namespace: str, created_by: str | None, code: str, url: str | None,
                         file_name: str | None = None) -> Component:
        check_file_name(file_name)
        bundle, definition = await self.describe_async(code, namespace, created_by or "")
        return await self.offload.call(lambda: self.store(namespace, created_by, code, url, bundle, definition,
                                                          file_name))

    def store(
        self,
        namespace: str,
        created_by: str | None,
        code: str,
        url: str | None,
        bundle: Bundle,
        definition: ComponentDefinition,
        file_name: str | None = None,
    ) -> Component:
        ts = now_s()
        component = Component(
            id=ids.new_id("component"),
            namespace=namespace,
            created_by=created_by,
            code=code,
            code_hash=bundle.hash,
            definition=definition,
            packages=dict(bundle.packages),
            component_url=url,
            file_name=file_name,
            created_at=ts,
            updated_at=ts,
        )
        with self.uow() as uow:
            uow.components.add(component)
            if namespace == REGISTRY_NAMESPACE:
                uow.components.publish(component)
            uow.commit()
        return component

    async def create(self, principal: Principal, code: str | None, url: str | None, org_id: str | None,
                     file_name: str | None = None) -> Component:
        """The component's URL is fetched (bounded as a whole) in a turn of the namespace's share of
        URL fetches, and its code described in a turn of its share of runner calls."""
        namespace = await self.offload.call(lambda: self.accounts.namespace(principal, org_id))
        check_file_name(file_name)
        resolved = await self.resolve_code(namespace, code, url)
        return await self.save_async(namespace, principal.user.id, resolved, url, file_name)

    def get(self, principal: Principal, key_or_id: str, org_id: str | None = None) -> Component:
        with self.uow(readonly=True) as uow:
            if ids.has_prefix(key_or_id, "component"):
                found = uow.components.get(key_or_id)
                # Published components are everyone's to read and deploy, by id as by key.
                if found and (principal.can_see(found.namespace) or found.namespace == REGISTRY_NAMESPACE):
                    return found
            else:
                namespace = self.accounts.namespace(principal, org_id)
                found = uow.components.latest_by_key(namespace, key_or_id)
                if found:
                    return found
        raise NotFound(f"No component {key_or_id!r} in your namespace.")

    async def options(self, principal: Principal, key_or_id: str, prop: str, configured: dict[str, Any],
                      page: int, prev_context: Any, query: str | None, org_id: str | None = None) -> dict[str, Any]:
        """A prop's async `options()` (one page of them), run in the runner for a deploy form: in
        the runner of the namespace the form deploys into (`org_id`, else an org's component's own
        org, else the caller's), with the accounts the caller may use there; compute of the caller
        (QuotaExceeded, and no code runs, when theirs is spent). Within a turn of the namespace's
        share of runner calls (TenantBusy when none comes in time), the runner awaited holding no
        thread; so is the refresh of an account's token the props may need."""
        component, namespace = await self.offload.call(lambda: self._options_target(principal, key_or_id, prop,
                                                                                    org_id))
        async with self.limits.runner_calls.hold(namespace):
            call = await self.offload.call(lambda: self._options_call(principal, component, namespace, prop,
                                                                      configured, page, prev_context, query))
            with _options_failures(prop):
                return (await self.quota.metered_async(call.caller, lambda: self.async_runner.options(
                    call.bundle, f"options:{call.caller}", prop, call.configured, page, prev_context, query,
                    self.settings.describe_timeout_ms, call.namespace, call.caller), self.offload)).value

    def _options_target(self, principal: Principal, key_or_id: str, prop: str,
                        org_id: str | None) -> tuple[Component, str]:
        """The component whose prop's options() are asked for, and the namespace they run in."""
        component = self.get(principal, key_or_id) if not key_or_id.startswith("registry:") else \
            self.get_registry(key_or_id.removeprefix("registry:"))
        if not any(p.get("name") == prop for p in component.definition.configurable_props):
            raise NotFound(f"Component {component.id} has no prop {prop!r}.")
        return component, self.target_namespace(principal, component, org_id)

    def _options_call(self, principal: Principal, component: Component, namespace: str, prop: str,
                      configured: dict[str, Any], page: int, prev_context: Any, query: str | None) -> _OptionsCall:
        prop_defs = component.definition.configurable_props
        self.connected.check(principal, configured, prop_defs, namespace)
        configured = self.connected.resolve(configured, app_prop_names(prop_defs),
                                            AccountUses(namespace, principal.user.id))
        bundle = self.bundler.bundle(component.code, component.packages)
        return _OptionsCall(bundle, principal.user.id, prop, configured, page, prev_context, query, namespace)

    def target_namespace(self, principal: Principal, component: Component, org_id: str | None) -> str:
        """Where a component's code runs for the caller: `org_id` when given, else the org whose
        component it is, else the caller's own namespace; checked by `check_usable_in`."""
        if org_id is None and component.namespace != principal.user.id and principal.can_see(component.namespace):
            return component.namespace
        namespace = self.accounts.namespace(principal, org_id)
        self.check_usable_in(principal, component, namespace)
        return namespace

    def check_usable_in(self, principal: Principal, component: Component, namespace: str) -> None:
        """A component's code runs only in its own namespace's runner, or a published one anywhere,
        or the caller's own in an org of theirs: never an org's code in a member's personal runner,
        where it would read and leave the member's files (nothing in a runner serves two namespaces)."""
        if component.namespace in (namespace, REGISTRY_NAMESPACE, principal.user.id):
            return
        raise Invalid(f"Component {component.id} belongs to {component.namespace}: deploy it there "
                      f"(org_id={component.namespace}), or save its code as a component of your own.",
                      {"component_id": [f"a component of {component.namespace}"]})

    def by_id(self, component_id: str) -> Component:
        """For services that already checked access to what refers to the component."""
        with self.uow(readonly=True) as uow:
            found = uow.components.get(component_id)
        if found is None:
            raise NotFound(f"No component {component_id}.")
        return found

    def get_registry(self, key: str) -> Component:
        with self.uow(readonly=True) as uow:
            found = uow.components.latest_by_key(REGISTRY_NAMESPACE, key)
        if found is None:
            raise NotFound(f"No published component with key {key!r}.")
        return found

    def list(self, principal: Principal, org_id: str | None, page: PageRequest) -> Page[Component]:
        namespace = self.accounts.namespace(principal, org_id)
        with self.uow(readonly=True) as uow:
            return uow.components.list(namespace, page)


def check_file_name(file_name: str | None) -> None:
    """`component_file`, when given, is a base name with a code file's ending (else 422)."""
    if file_name is not None and (why := file_names.problem(file_name)):
        raise Invalid(f"`{file_names.FIELD}` is not a file name to show: {why}.", {file_names.FIELD: [why]})


@contextmanager
def _describe_failures() -> Iterator[None]:
    """A describe's RunnerError as the API's answer: the component's fault 422, the runner's 503."""
    try:
        yield
    except RunnerError as e:
        if e.code in _USER_FAULTS:
            prefix = "The component did not finish loading in time" if e.code == "TIMEOUT" else None
            raise Invalid(f"{prefix}: {e.message}" if prefix else e.message) from None
        raise Unavailable(f"The runner failed: {e.message}") from None


@contextmanager
def _options_failures(prop: str) -> Iterator[None]:
    try:
        yield
    except RunnerError as e:
        if e.code in _OPTIONS_FAULTS:
            raise Invalid(f"options() of {prop} failed: {e.message}", {prop: [e.message]}) from None
        raise Unavailable(f"The runner failed: {e.message}") from None
