"""Running component code once without deploying it (`POST /v1/components/run`, `headwater run`).

The code is bundled and described in the caller's own runner process like any saved component,
its props validated like a deploy's, and the run admitted against the caller's daily quota like
any other run (its loading and `additionalProps()` count as the caller's compute, the run as an
invocation too: services/quota.py); then it runs once, sandboxed like every run, and what it did
(emits, logs, `this.db` writes, the HTTP response, an action's return value and exports) is
answered, not kept: no component, source, event or state is stored, only the usage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headwater.domain.connected_accounts import AccountUses
from headwater.domain.errors import HeadwaterError, Invalid
from headwater.domain.models import ComponentDefinition, Principal
from headwater.domain.props import validate
from headwater.domain.run_records import secret_values
from headwater.domain.runs import RunResult, apply_db
from headwater.domain.trial_answer import MAX_EMITS, MAX_LOGS, bounded
from headwater.ports import Bundle, Finished, Instance, Offload, Runner, RunnerError
from headwater.services.clock import now_s
from headwater.services.components import Components, check_file_name
from headwater.services.connected_accounts import app_prop_names
from headwater.services.quota import Quota
from headwater.services.tenant_slots import TenantLimits
from headwater.settings import Settings

# An HTTP source run without an event gets a request with nothing in it (DECISIONS: the event's fields).
EMPTY_REQUEST = {"method": "GET", "path": "/", "query": {}, "headers": {}, "bodyRaw": "", "body": ""}


@dataclass(frozen=True)
class TrialRequest:
    code: str
    event: Any = None  # None: a timer source's timer event, an HTTP source's EMPTY_REQUEST, else {}
    configured_props: dict[str, Any] = field(default_factory=dict)
    db: dict[str, Any] = field(default_factory=dict)  # `this.db` as the run starts
    file_name: str | None = None  # shown in the error's stack in place of `component.js`


@dataclass(frozen=True)
class Prepared:
    """Code described in its namespace with its props resolved: what each of its runs needs."""

    namespace: str
    user_id: str
    bundle: Bundle
    definition: ComponentDefinition
    instance_id: str
    props: dict[str, Any]
    event: Any  # the default event (TrialRequest.event)
    timeout_ms: int
    http: dict[str, Any] | None
    file_name: str | None
    secrets: frozenset[str]  # values of its secret props and accounts' credentials


class Trials:
    def __init__(self, components: Components, quota: Quota, runner: Runner, offload: Offload, limits: TenantLimits,
                 settings: Settings) -> None:
        """A trial is a coroutine: in one turn of its namespace's share of runner calls (`limits`:
        TenantBusy when none comes in time) it describes the code, runs its `additionalProps()`
        and the run itself, awaiting `runner` holding no thread; its store work, bundling, the
        props' credentials (a refresh is bounded by the token deadline) and the answer's bounding
        on `offload`."""
        self.components = components
        self.quota = quota
        self.runner = runner
        self.offload = offload
        self.limits = limits
        self.settings = settings

    async def run(self, principal: Principal, req: TrialRequest, org_id: str | None) -> dict[str, Any]:
        namespace, code = await self.offload.call(lambda: self._checked(principal, req, org_id))
        async with self.limits.runner_calls.hold(namespace):
            ready = await self._ready(principal, req, code, namespace)
            result = await self._run_one(ready, ready.event, ready.timeout_ms, req.db)
        return await self.offload.call(lambda: self.answer(ready.definition, ready.event, req.db, result))

    async def prepare(self, principal: Principal, req: TrialRequest, namespace: str) -> Prepared:
        """The code described and its props validated and resolved in `namespace` (the caller a
        member of it), in a turn of its share of runner calls: ready for `run_prepared`."""
        code = await self.offload.call(lambda: self._checked_in(req, namespace))
        async with self.limits.runner_calls.hold(namespace):
            return await self._ready(principal, req, code, namespace)

    async def run_prepared(self, ready: Prepared, event: Any, timer: bool, db: dict[str, Any]) -> RunResult:
        """One run of prepared code on `event` from `db`, in its own turn, metered like any run."""
        timeout_ms = self.settings.timer_timeout_ms if timer else self.settings.http_timeout_ms
        async with self.limits.runner_calls.hold(ready.namespace):
            return await self._run_one(ready, event, timeout_ms, db)

    async def _ready(self, principal: Principal, req: TrialRequest, code: str, namespace: str) -> Prepared:
        user_id = principal.user.id
        bundle, definition = await self.components.describe_in_turn(code, namespace, user_id)
        instance_id = f"run:{user_id}"  # one warm worker per user for these, not one per run
        props, event, timeout_ms, http, secrets = await self._prepare(principal, bundle, definition, req,
                                                                      instance_id, namespace)
        return Prepared(namespace, user_id, bundle, definition, instance_id, props, event, timeout_ms, http,
                        req.file_name, secrets)

    async def _run_one(self, ready: Prepared, event: Any, timeout_ms: int, db: dict[str, Any]) -> RunResult:
        instance = Instance(id=ready.instance_id, props=ready.props, account=ready.namespace, bill_to=ready.user_id,
                            db=dict(db), env={"PD_COMPONENT": ready.instance_id}, http=ready.http,
                            memory_mb=self.settings.run_memory_mb, file_name=ready.file_name)

        async def run() -> RunResult:
            try:
                if ready.definition.type == "action":
                    return await self.runner.run_step(ready.bundle, instance, {"trigger": {"event": event}},
                                                      timeout_ms)
                async for message in self.runner.run(ready.bundle, instance, [event], timeout_ms):
                    if isinstance(message, Finished):
                        return message.results[0]
                return RunResult.failed("RUNTIME_ERROR", "The runner ended without an outcome.")
            except RunnerError as e:
                return e.as_result()
            except HeadwaterError as e:
                return RunResult.failed("RUNTIME_ERROR", e.message)

        return await self.quota.metered_async(ready.user_id, run, self.offload, invocation=True)

    def _checked(self, principal: Principal, req: TrialRequest, org_id: str | None) -> tuple[str, str]:
        """The namespace the code runs in, and the code once checked."""
        namespace = self.components.accounts.namespace(principal, org_id)
        return namespace, self._checked_in(req, namespace)

    def _checked_in(self, req: TrialRequest, namespace: str) -> str:
        check_file_name(req.file_name)
        return self.components.checked_code(req.code)

    async def _prepare(self, principal: Principal, bundle: Bundle, definition: ComponentDefinition,
                       req: TrialRequest, instance_id: str,
                       namespace: str) -> tuple[dict[str, Any], Any, int, dict[str, Any] | None, frozenset[str]]:
        """The props as the runner takes them, the event, the time limit, the HTTP interface and the
        secrets among the props (their values, to mask)."""
        prop_list = definition.configurable_props
        if definition.has_additional_props:
            try:
                prop_list = (await self.quota.metered_async(principal.user.id, lambda: self.runner.additional_props(
                    bundle, f"props:{instance_id}", req.configured_props, self.settings.hook_timeout_ms, namespace,
                    principal.user.id), self.offload)).value
            except RunnerError as e:
                raise Invalid(f"additionalProps failed: {e.message}", {"configured_props": [e.message]}) from None
        return await self.offload.call(lambda: self._props(principal, definition, req, prop_list, namespace))

    def _props(self, principal: Principal, definition: ComponentDefinition, req: TrialRequest,
               prop_list: list[dict[str, Any]],
               namespace: str) -> tuple[dict[str, Any], Any, int, dict[str, Any] | None, frozenset[str]]:
        validated = validate(prop_list, req.configured_props)
        if validated.errors:
            raise Invalid(f"Some props are not valid: {', '.join(validated.errors)}.", validated.errors)
        connected = self.components.connected
        connected.check(principal, validated.values, prop_list, namespace)
        values = connected.resolve(validated.values, app_prop_names(prop_list),
                                   AccountUses(namespace, principal.user.id))
        event, timeout_ms = req.event, self.settings.http_timeout_ms
        if event is None and validated.timers and definition.type != "action":
            event = next(iter(validated.timers.values())).event(now_s())
            timeout_ms = self.settings.timer_timeout_ms
        http = None
        for prop in prop_list:
            if prop["type"] == "$.interface.http":
                # Not deployed: no endpoint answers here, but the component sees the URL's form.
                http = {"endpoint": f"{self.settings.base_url}/http/not-deployed",
                        "customResponse": bool(prop.get("customResponse"))}
        if event is None:
            event = dict(EMPTY_REQUEST) if http is not None and definition.type != "action" else {}
        secrets = secret_values(values.get(p["name"]) for p in prop_list if p.get("secret") or p.get("type") == "app")
        return values, event, timeout_ms, http, secrets

    def answer(self, definition: ComponentDefinition, event: Any, db: dict[str, Any],
               result: RunResult) -> dict[str, Any]:
        """What the run did, within the answer's bounds (domain/trial_answer.py)."""
        after, too_large = apply_db(db, result.db_writes, self.settings.db_max_bytes)
        data: dict[str, Any] = {
            "type": definition.type,
            "name": definition.name,
            "event": event,
            "emits": [{"event": e.event, "metadata": e.meta} for e in result.emits[:MAX_EMITS]],
            "logs": result.logs[:MAX_LOGS],
            "db_writes": result.db_writes,
            "db": after,
            "response": result.response,
            "error": result.error,
            "duration_ms": round(result.duration_ms, 3),
        }
        if too_large:
            data["db_error"] = too_large
        if definition.type == "action":
            data.update({"return_value": result.return_value, "exports": result.exports, "sends": result.sends,
                         "flow_exit": result.flow_exit})
        return bounded(data, len(result.emits), len(result.logs))
