"""The rule of issue 31's "Billing wherever code runs", on the fakes: every runner call names the user
who pays (`bill_to`), is admitted against that user's daily quota before any code runs (a free
user's spent compute or invocations: QUOTA_EXCEEDED, 429, and no runner call), and its measured
time is recorded as that user's compute, whether the call succeeded or failed. Loading code,
`options()`, `additionalProps()` and hooks count compute only; runs and trial runs one invocation
too. Paid users are never refused and still recorded.

Before the fix, describe, options and additionalProps named nobody to pay, their time and the
hooks' were recorded nowhere, and none of them was refused past the quota."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater.domain.commands import RunWorkflow
from headwater.domain.errors import Invalid, QuotaExceeded
from headwater.domain.models import Principal
from headwater.domain.runs import RunResult
from headwater.ports import Instance, RunnerError, Task
from headwater.services.clock import utc_day
from headwater.services.sources import SourceRequest
from headwater.services.trials import TrialRequest
from tests.fakes import World, to_end, world
from tests.services.test_services import component_code, principal

PICK = [{"name": "pick", "type": "string", "optional": True}]


def usage(w: World, who: Principal) -> tuple[int, int]:
    """(invocations, compute ms) of the user today."""
    return w.usage.totals(who.user.id, utc_day(), utc_day())


def spend(w: World, who: Principal, invocations: int = 0, compute_ms: int = 0) -> None:
    w.usage.record(who.user.id, utc_day(), invocations, compute_ms)


def free(w: World, name: str = "bob") -> Principal:
    user, _ = w.services.accounts.create_user(name, f"{name}@example.com", "free")
    return Principal(user)


def code_ran(w: World) -> list[str]:
    """The runner calls made, by op (with or without an instance)."""
    return [op for op, _ in w.runner.accounts] + [op for op, _ in w.runner.calls]


def test_loading_a_component_is_compute_of_the_caller_and_names_them() -> None:
    w = world(free_daily_compute_ms=10_000)
    bob = free(w)
    w.runner.duration_ms = 700.2
    asyncio.run(w.services.components.create(bob, component_code(), None, None))
    assert usage(w, bob) == (0, 701)
    assert w.runner.bills == [("describe", bob.user.id)]


@pytest.mark.parametrize("spent", [{"compute_ms": 10_000}, {"invocations": 3}], ids=["compute", "invocations"])
def test_a_free_user_whose_quota_is_spent_loads_nothing(spent: dict[str, int]) -> None:
    w = world(free_daily_compute_ms=10_000, free_daily_invocations=3)
    bob = free(w)
    spend(w, bob, **spent)
    with pytest.raises(QuotaExceeded) as refused:
        asyncio.run(w.services.components.create(bob, component_code(), None, None))
    assert refused.value.retry_after > 0
    with pytest.raises(QuotaExceeded):
        to_end(w.services.sources.create(bob, SourceRequest(component_code=component_code()), None))
    with pytest.raises(QuotaExceeded):
        asyncio.run(w.services.trials.run(bob, TrialRequest(component_code()), None))
    with pytest.raises(QuotaExceeded):
        asyncio.run(w.services.workflows.deploy_data(bob, None, {"name": "f", "steps": [
            {"name": "a", "component_code": component_code(type="action")}]}))
    assert code_ran(w) == []
    assert w.store.data.components == {}


def test_a_paid_user_is_never_refused_and_still_recorded() -> None:
    w = world(free_daily_compute_ms=10_000, free_daily_invocations=3)
    ada = principal(w)
    spend(w, ada, invocations=50, compute_ms=50_000)
    w.runner.duration_ms = 5
    asyncio.run(w.services.components.create(ada, component_code(), None, None))
    assert usage(w, ada) == (50, 50_005)


def test_a_load_that_fails_is_billed_what_it_took() -> None:
    w = world(free_daily_compute_ms=10_000)
    bob = free(w)
    w.runner.duration_ms = 3000
    w.runner.describe_error = RunnerError("TIMEOUT", "did not load in time")
    with pytest.raises(Invalid):
        asyncio.run(w.services.components.create(bob, component_code(), None, None))
    assert usage(w, bob) == (0, 3000)


def test_options_are_compute_of_the_caller_and_refused_past_the_quota() -> None:
    w = world(free_daily_compute_ms=10_000)
    bob = free(w)
    component = asyncio.run(w.services.components.create(bob, component_code(configurable_props=PICK), None, None))
    w.runner.duration_ms = 400
    to_end(w.services.components.options(bob, component.id, "pick", {}, 0, None, None))
    assert usage(w, bob) == (0, 400)
    assert w.runner.bills[-1] == ("options", bob.user.id)
    spend(w, bob, compute_ms=10_000)
    with pytest.raises(QuotaExceeded):
        to_end(w.services.components.options(bob, component.id, "pick", {}, 0, None, None))
    assert [op for op, _ in w.runner.accounts].count("options") == 1


def test_additional_props_are_compute_of_the_deployer_and_refused_past_the_quota() -> None:
    w = world(free_daily_compute_ms=10_000)
    bob = free(w)
    component = asyncio.run(w.services.components.create(bob, component_code(has_additional_props=True), None, None))
    w.runner.duration_ms = 300
    to_end(w.services.sources.create(bob, SourceRequest(component_id=component.id), None))
    asyncio.run(w.services.trials.run(bob, TrialRequest(component_code(has_additional_props=True)), None))
    # the deploy's additionalProps; the trial's load and additionalProps, and its run (no time)
    assert usage(w, bob) == (1, 3 * 300)
    assert ("additional_props", bob.user.id) in w.runner.bills
    spend(w, bob, compute_ms=10_000)
    calls = len(code_ran(w))
    with pytest.raises(QuotaExceeded):
        to_end(w.services.sources.create(bob, SourceRequest(component_id=component.id), None))
    assert len(code_ran(w)) == calls


def hooked(w: World) -> tuple[Principal, Principal, Any]:
    """An org's source with every hook, deployed by its owner (free); and a member (free)."""
    owner, member = free(w, "olga"), free(w, "max")
    org = w.services.accounts.create_org("Acme", owner.user.id)
    w.services.accounts.add_member(org.id, member.user.id)
    owner = Principal(owner.user, frozenset({org.id}))
    member = Principal(member.user, frozenset({org.id}))
    code = component_code(hooks=["deploy", "activate", "deactivate"], configurable_props=PICK)
    source = to_end(w.services.sources.create(owner, SourceRequest(component_code=code), org.id))
    return owner, member, source


def test_hooks_are_compute_of_the_sources_owner_whoever_calls_them() -> None:
    w = world(free_daily_compute_ms=10_000)
    w.runner.hooks = lambda instance, hook: RunResult(duration_ms=1000)
    owner, member, source = hooked(w)
    assert usage(w, owner) == (0, 2000)  # deploy, activate (the describe took no time)
    to_end(w.services.sources.update(member, source.id, SourceRequest(configured_props={"pick": "x"})))
    assert usage(w, owner) == (0, 4000)  # deactivate, activate
    assert usage(w, member) == (0, 0)
    assert {who for op, who in w.runner.bills if op in ("deploy", "activate", "deactivate")} == {owner.user.id}


def test_a_hook_that_fails_is_billed_what_it_took() -> None:
    w = world(free_daily_compute_ms=10_000)

    def timing_out(instance: Instance, hook: str) -> RunResult:
        raise RunnerError("TIMEOUT", "the hook ran out of time") if hook == "activate" else RunResult()

    w.runner.hooks = timing_out
    w.runner.duration_ms = 2500
    bob = free(w)
    with pytest.raises(Invalid):
        to_end(w.services.sources.create(bob, SourceRequest(component_code=component_code(hooks=["activate"])), None))
    assert usage(w, bob) == (0, 2500 + 2500)  # the load and the hook


def test_past_the_owners_quota_no_hook_runs_an_update_is_refused_and_a_delete_goes_without_its_hook() -> None:
    w = world(free_daily_compute_ms=10_000)
    owner, member, source = hooked(w)
    spend(w, owner, compute_ms=10_000)
    hooks_before = list(w.runner.calls)
    with pytest.raises(QuotaExceeded):
        to_end(w.services.sources.update(member, source.id, SourceRequest(configured_props={"pick": "x"})))
    assert w.services.sources.get(owner, source.id).configured_props == {}
    to_end(w.services.sources.delete(member, source.id))
    assert w.runner.calls == hooks_before
    assert w.store.data.sources.get(source.id) is None


def test_a_trial_run_counts_its_load_and_its_run_and_names_the_caller() -> None:
    w = world(free_daily_compute_ms=10_000)
    bob = free(w)
    w.runner.duration_ms = 250
    w.runner.script = lambda instance, event: RunResult(duration_ms=600)
    asyncio.run(w.services.trials.run(bob, TrialRequest(component_code()), None))
    assert usage(w, bob) == (1, 850)
    assert [op for op, _ in w.runner.bills] == ["describe", "run"]
    assert {who for _, who in w.runner.bills} == {bob.user.id}


def test_a_workflow_run_counts_the_evaluation_of_its_props(tmp_path: Path) -> None:
    w = world()
    ada = principal(w)
    action = asyncio.run(w.services.components.create(ada, component_code(type="action", configurable_props=[
        {"name": "n", "type": "integer"}]), None, None))
    file = tmp_path / "flow.yaml"
    file.write_text(yaml.safe_dump({"name": "flow", "steps": [
        {"name": "a", "component": action.id, "props": {"n": "{{steps.trigger.event.n}}"}}]}))
    workflow = w.services.workflows.deploy(ada.user.id, None, file)

    def step(instance: Instance, steps: Any) -> RunResult:
        if not instance.props:  # the props' evaluation
            return RunResult(return_value={"n": 2}, duration_ms=300)
        return RunResult(return_value=instance.props["n"], duration_ms=500)

    w.runner.script = step
    before = usage(w, ada)
    assert w.services.workflows.run([Task("t", RunWorkflow(workflow.id, {"n": 2}))]) == ["done"]
    after = usage(w, ada)
    assert (after[0] - before[0], after[1] - before[1]) == (1, 800)
    assert [who for op, who in w.runner.bills if op == "step"] == [ada.user.id, ada.user.id]


def test_every_runner_call_names_who_pays() -> None:
    w = world()
    ada = principal(w)
    code = component_code(configurable_props=PICK, has_additional_props=True, hooks=["deploy"])
    component = asyncio.run(w.services.components.create(ada, code, None, None))
    to_end(w.services.components.options(ada, component.id, "pick", {}, 0, None, None))
    to_end(w.services.sources.create(ada, SourceRequest(component_id=component.id), None))
    asyncio.run(w.services.trials.run(ada, TrialRequest(component_code()), None))
    assert {op for op, _ in w.runner.bills} == {"describe", "options", "additional_props", "deploy", "run"}
    assert {who for _, who in w.runner.bills} == {ada.user.id}
