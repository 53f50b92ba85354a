"""Workflows (DECISIONS Workflows): deployed from a YAML file by the CLI, run step by step.

A run executes the steps in order in the runner with SPEC's action context: each step sees
`steps.trigger.event` and the earlier steps' `$return_value` and exports; `{{ }}` props are
evaluated first, in the runner; `$.flow.exit` ends the run; a throw ends it with a `$errors`
event of SPEC's workflow shape. Its `$.send.emit`s become the workflow's events (routed to its
subscribers like a source's), `$.send.sse` events on the named channel, `$.send.http`, `.email`
and `.s3` queued sends retried like a webhook delivery (services/destinations.py). Everything a
run did commits together, once.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from headwater import __version__
from headwater.domain import ids
from headwater.domain.commands import Command, PurgeSource, RunWorkflow, Send
from headwater.domain.connected_accounts import AccountUses, reference
from headwater.domain.errors import Invalid, NotFound
from headwater.domain.events import Emit
from headwater.domain.models import Component, Principal
from headwater.domain.props import step_problems
from headwater.domain.run_records import RunInfo, secret_values
from headwater.domain.runs import Limits, RunContext, RunResult
from headwater.domain.workflows import (
    Step,
    Workflow,
    error_event,
    evaluated_props,
    evaluator_code,
    expression_of,
    parse_workflow,
)
from headwater.ports import (
    BlockingRunner,
    Bundler,
    Instance,
    Offload,
    RunnerError,
    Task,
    UnitOfWork,
    UnitOfWorkFactory,
)
from headwater.services.accounts import Accounts
from headwater.services.clock import now_ms, now_s, utc_day
from headwater.services.components import Components
from headwater.services.connected_accounts import AccountUnusable, app_prop_names
from headwater.services.destinations import Destinations
from headwater.services.recording import Outcome, commit_outcomes
from headwater.services.runs import Runs
from headwater.services.subscriptions import Subscriptions
from headwater.settings import Settings

log = logging.getLogger("headwater.workflows")

COMPONENT_FILES = (".mjs", ".js", ".cjs", ".ts", ".mts")


class Workflows:
    def __init__(self, uow: UnitOfWorkFactory, accounts: Accounts, components: Components,
                 subscriptions: Subscriptions, runs: Runs, bundler: Bundler, runner: BlockingRunner,
                 destinations: Destinations, settings: Settings, offload: Offload) -> None:
        """`runner` for the CLI's deploys and the task workers' runs; `offload` for the store work
        of a deploy over HTTP (a coroutine)."""
        self.uow = uow
        self.accounts = accounts
        self.components = components
        self.subscriptions = subscriptions
        self.runs = runs
        self.bundler = bundler
        self.runner = runner
        self.destinations = destinations
        self.settings = settings
        self.offload = offload

    # managing (the CLI)

    def principal(self, user_id: str) -> Principal:
        with self.uow(readonly=True) as uow:
            user = uow.users.get(user_id)
            if user is None:
                raise NotFound(f"No user {user_id}.")
            return Principal(user, uow.users.org_ids(user_id))

    def deploy(self, user_id: str, org_id: str | None, file: Path) -> Workflow:
        """Deploys a workflow file (the operator's `headwater workflows deploy --user`); a name the
        namespace already has gets its steps replaced under the same p_ id with a new d_ id."""
        try:
            data = yaml.safe_load(file.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise Invalid(f"Cannot read the workflow file {file}: {e}", {"file": [str(e)]}) from None
        return self._deploy(self.principal(user_id), org_id, data, file.parent)

    async def deploy_data(self, principal: Principal, org_id: str | None, data: dict[str, Any]) -> Workflow:
        """`POST /v1/workflows`: the file's content as JSON, a step's code given as `component_code`
        (the server cannot read the caller's files), else a registry key or an sc_ id. Each step's
        code is described as a component's save is (in a turn of the namespace's share of runner
        calls, the runner awaited holding no thread); the store work on `offload`."""
        namespace = await self.offload.call(lambda: self.accounts.namespace(principal, org_id))
        steps = data.get("steps")
        if isinstance(steps, list):
            data = {**data, "steps": [await self._inline(principal, namespace, i, step)
                                      for i, step in enumerate(steps)]}
        return await self.offload.call(lambda: self._deploy(principal, org_id, data, None))

    async def _inline(self, principal: Principal, namespace: str, index: int, step: Any) -> Any:
        """A step whose code came inline, with the component saved from it named by its sc_ id."""
        if not isinstance(step, dict) or "component_code" not in step:
            return step
        where = f"steps[{index}]"
        if step.get("component") is not None:
            raise Invalid(f"Step {index + 1} gives both `component` and `component_code`.",
                          {f"{where}.component_code": ["give either component or component_code"]})
        code = step["component_code"]
        if not isinstance(code, str):
            raise Invalid(f"Step {index + 1}: `component_code` must be a string.",
                          {f"{where}.component_code": ["must be a string"]})
        checked = await self.offload.call(lambda: self.components.checked_code(code))
        saved = await self.components.save_async(namespace, principal.user.id, checked, None)
        return {k: v for k, v in step.items() if k != "component_code"} | {"component": saved.id}

    def _deploy(self, principal: Principal, org_id: str | None, data: Any, base: Path | None) -> Workflow:
        user_id = principal.user.id
        namespace = self.accounts.namespace(principal, org_id)
        name, trigger, steps = parse_workflow(data)
        for step in steps:
            step.component_id = self._component_for(principal, namespace, base, step).id
        ts = now_s()
        with self.uow() as uow:
            existing = uow.workflows.by_name(namespace, name)
        workflow = Workflow(existing.id if existing else ids.new_id("workflow"), namespace, user_id, name,
                            ids.new_id("deployment"), steps, trigger, existing.created_at if existing else ts, ts)
        with self.uow() as uow:
            if existing:
                workflow.seq = existing.seq
                uow.workflows.update(workflow)
            else:
                uow.workflows.add(workflow)
            uow.commit()
        if existing and existing.trigger and existing.trigger != trigger:
            with contextlib.suppress(NotFound):
                self.subscriptions.unsubscribe(principal, existing.trigger, workflow.id, None, org_id)
        if trigger is not None:
            # DECISIONS: `trigger` is the same as a subscription of the workflow to this emitter.
            self.subscriptions.subscribe(principal, trigger, workflow.id, None, org_id)
        return workflow

    def _component_for(self, principal: Principal, namespace: str, base: Path | None, step: Step) -> Component:
        ref = step.component
        if ref.startswith("sc_"):
            component = self.components.get(principal, ref)
            self.components.check_usable_in(principal, component, namespace)
        elif ref.endswith(COMPONENT_FILES):
            if base is None:  # over HTTP: the file is on the caller's machine
                raise Invalid(f"Step {step.name}: the server cannot read the file {ref}: send its code as "
                              "`component_code`.",
                              {f"steps.{step.name}.component": ["a file path: give component_code"]})
            path = (base / ref).resolve()
            if not path.is_file():
                raise Invalid(f"Step {step.name}: no component file {ref} next to the workflow file.",
                              {f"steps.{step.name}.component": ["no such file"]})
            code = self.bundler.source_of(str(path))
            component = self.components.save(namespace, principal.user.id, code, None)
        else:
            component = self.components.get_registry(ref)
        if component.definition.type != "action":
            raise Invalid(f"Step {step.name}: {ref} is a {component.definition.type}, not an action.",
                          {f"steps.{step.name}.component": ["is not an action"]})
        problems = step_problems(component.definition.configurable_props, step.props)
        if problems:
            raise Invalid(f"Step {step.name}: props that do not fit the action: {', '.join(problems)}.",
                          {f"steps.{step.name}.props.{name}": p for name, p in problems.items()})
        self.runs.connected.check(principal, step.props, component.definition.configurable_props, namespace)
        return component

    def get(self, principal: Principal, workflow_id: str) -> Workflow:
        with self.uow(readonly=True) as uow:
            workflow = uow.workflows.get(workflow_id)
        if workflow is None or not principal.can_see(workflow.namespace):
            raise NotFound(f"No workflow {workflow_id}.")
        return workflow

    def listing(self, user_id: str, org_id: str | None) -> list[Workflow]:
        namespace = self.accounts.namespace(self.principal(user_id), org_id)
        with self.uow(readonly=True) as uow:
            return uow.workflows.list(namespace)

    def delete(self, user_id: str, workflow_id: str) -> None:
        self.remove(self.principal(user_id), workflow_id)

    def remove(self, principal: Principal, workflow_id: str) -> None:
        workflow = self.get(principal, workflow_id)
        with self.uow() as uow:
            uow.workflows.remove(workflow)
            uow.subscriptions.remove_naming(workflow_id)
            uow.outbox.add(PurgeSource(workflow_id, workflow.namespace))
            uow.commit()

    # running

    def run(self, tasks: list[Task], _: object = None) -> list[str | None]:
        """RunWorkflow handler: how each run ended (done, exited, failed), None when skipped."""
        return [self._run(task) for task in tasks]

    def _run(self, task: Task) -> str | None:
        command = task.command
        assert isinstance(command, RunWorkflow)
        with self.uow(readonly=True) as uow:
            workflow = uow.workflows.get(command.workflow_id)
            state = uow.state.get(command.workflow_id)
        key = command.route_key or task.id
        if workflow is None or state.took(key):
            return None
        admission = self.runs.quota.admit(workflow.user_id)
        if not admission.admitted:
            refusal = admission.refusal.message if admission.refusal else "quota"
            return self._commit(workflow, command, key, [], [], {"code": "QUOTA_EXCEEDED", "message": refusal},
                                None, [], 0.0, "failed", frozenset())
        steps: dict[str, Any] = {"trigger": {"event": command.event}}
        emits: list[Emit] = []
        logs: list[dict[str, Any]] = []
        sends: list[Command] = []
        duration = 0.0
        secrets: set[str] = set()
        for step in workflow.steps:
            result = self._step(workflow, step, steps, secrets)
            duration += result.duration_ms
            logs += result.logs
            if result.error:
                return self._commit(workflow, command, key, emits, logs, result.error, step.name, sends, duration,
                                    "failed", frozenset(secrets))
            steps[step.name] = {"$return_value": result.return_value, **result.exports}
            problem = self._sends(workflow, step, result, emits, sends)
            if problem:
                return self._commit(workflow, command, key, emits, logs, problem, step.name, sends, duration,
                                    "failed", frozenset(secrets))
            if result.flow_exit is not None:
                return self._commit(workflow, command, key, emits, logs, None, None, sends, duration, "exited",
                                    frozenset(secrets))
        return self._commit(workflow, command, key, emits, logs, None, None, sends, duration, "done",
                            frozenset(secrets))

    def _instance(self, workflow: Workflow, step: Step, props: dict[str, Any]) -> Instance:
        return Instance(id=f"{workflow.id}:{step.name}", props=props, account=workflow.namespace,
                        bill_to=workflow.user_id, env={"PIPEDREAM_WORKFLOW_ID": workflow.id},
                        memory_mb=self.settings.run_memory_mb)

    def _step(self, workflow: Workflow, step: Step, steps: dict[str, Any], secrets: set[str]) -> RunResult:
        """Evaluates the step's `{{ }}` props, then runs it; a failure of either is the step's error,
        and the time of both is the step's (the workflow's user's compute). `secrets` gains the
        values its run record masks (its accounts' credentials, its secret props)."""
        timeout = self.settings.http_timeout_ms
        evaluated = RunResult()
        try:
            component = self.runs.component(step.component_id)
            if component is None:
                return RunResult.failed("CONFIGURATION_ERROR", f"the component {step.component_id} is gone")
            props, undefined = dict(step.props), list[str]()
            code = evaluator_code(props)
            if code is not None:
                evaluated = self.runner.run_step(self.bundler.bundle(code), self._instance(workflow, step, {}),
                                                 steps, timeout)
                if evaluated.error:
                    return replace(evaluated, error={**evaluated.error, "message": "evaluating the props: "
                                                     + str(evaluated.error.get("message"))})
                props, undefined = evaluated_props(props, evaluated.return_value)
            problems = step_problems(component.definition.configurable_props, props, undefined)
            if problems:
                return _after(evaluated, RunResult.failed("CONFIGURATION_ERROR", props_message(step, problems)))
            props = self.runs.connected.resolve(props, app_prop_names(component.definition.configurable_props),
                                                step_uses(workflow, step))
            secrets |= secret_values(props.get(p["name"]) for p in component.definition.configurable_props
                                     if p.get("secret") or p.get("type") == "app")
            bundle = self.bundler.bundle(component.code, component.packages)
            return _after(evaluated, self.runner.run_step(bundle, self._instance(workflow, step, props), steps,
                                                          timeout))
        except RunnerError as e:
            return _after(evaluated, e.as_result())
        except AccountUnusable as e:
            return _after(evaluated, RunResult.failed(e.code, e.message))
        except Invalid as e:
            return _after(evaluated, RunResult.failed("RUNTIME_ERROR", e.message))

    def _sends(self, workflow: Workflow, step: Step, result: RunResult, emits: list[Emit],
               commands: list[Command]) -> dict[str, Any] | None:
        """The step's `$.send`s, in order; an error (a send that cannot go) ends the run."""
        for i, send in enumerate(result.sends):
            kind, config = send.get("type"), send.get("config")
            if not isinstance(config, dict):
                return {"code": "CONFIGURATION_ERROR", "message": f"$.send.{kind} needs a config object"}
            if kind == "emit":
                emits.append(Emit({"raw_event": config.get("raw_event")}, {}))
            elif kind == "sse":
                channel = config.get("channel")
                if not isinstance(channel, str) or not channel:
                    return {"code": "CONFIGURATION_ERROR", "message": "$.send.sse needs a `channel` string"}
                emits.append(Emit(config.get("payload"), {"name": channel}))
            else:
                problem = self.destinations.problem(str(kind), config)
                if problem:
                    return {"code": "CONFIGURATION_ERROR", "message": problem}
                commands.append(Send(workflow.id, str(kind), config, f"{workflow.id}:{step.name}:{now_ms()}:{i}",
                                     namespace=workflow.namespace))
        return None

    def _commit(self, workflow: Workflow, command: RunWorkflow, key: str, emits: list[Emit],
                logs: list[dict[str, Any]], error: dict[str, Any] | None, cell: str | None,
                sends: list[Command], duration_ms: float, ending: str, secrets: frozenset[str]) -> str:
        ms = now_ms()
        if error is not None:
            emits = [*emits, Emit(error_event(workflow, command.event, error, cell, ms, __version__),
                                  {"name": "$errors"})]
        s = self.settings
        ctx = RunContext(workflow.id, workflow.user_id, __version__, None,
                         Limits(s.max_event_bytes, s.max_log_bytes, s.max_channels))
        info = RunInfo("rerun" if command.rerun_of else "subscription", rerun_of=command.rerun_of,
                       secrets=secrets, error=None if error is None else {**error, "step": cell},
                       not_run=error is not None and error.get("code") == "QUOTA_EXCEEDED")
        outcome = Outcome(ctx, RunResult(emits=emits, logs=logs, duration_ms=duration_ms), command.event, key, info)
        counted = error is None or error.get("code") != "QUOTA_EXCEEDED"

        def usage(uow: UnitOfWork, _: object) -> None:
            if counted:
                uow.usage.record(workflow.user_id, utc_day(), 1, outcome.result.compute_ms)

        _, channels = commit_outcomes(
            self.uow, workflow.id, [outcome], now_ms, extra=usage, commands=sends,
            route=lambda uow, events: self.runs.routes(uow, workflow.id, workflow.namespace, workflow.created_at,
                                                       events, command.hops),
        )
        self.runs.announce(workflow.id, channels)
        return ending


def _after(evaluation: RunResult, result: RunResult) -> RunResult:
    """A step's result, its time counting the evaluation of its props that came first."""
    return replace(result, duration_ms=evaluation.duration_ms + result.duration_ms)


def props_message(step: Step, problems: dict[str, list[str]]) -> str:
    """Each prop at fault, with its expression when it has one (a value is not quoted: it may be a secret)."""
    parts = []
    for name, found in problems.items():
        expression = f" ({step.props[name]})" if expression_of(step.props.get(name)) is not None else ""
        parts.append(f"prop {name} {' and '.join(found)}{expression}")
    return "; ".join(parts)


def step_uses(workflow: Workflow, step: Step) -> AccountUses:
    """A step's references written in the workflow file were checked for its deployer, who answers
    for them; a reference an expression gave at run time (from the triggering event, say) nobody
    configured: it may name only an account of the workflow's own namespace."""
    granted = {name: (account_id, workflow.user_id) for name, value in step.props.items()
               if (account_id := reference(value)) is not None}
    return AccountUses(workflow.namespace, None, granted)
