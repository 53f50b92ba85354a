"""Who may use a connected account (issue 31), on the fakes: the rule itself, and the check made
where credentials are handed to code, whatever put the reference there. A reference planted in
a source's stored props (by a path no check saw: any such path, present or future) gives the
code nothing; a grant counts only for the account it was given for; an org member's personal
account in an org source works only while its owner is a member; the code of an org's
component runs only in the org's runner."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import pytest

from headwater.domain.connected_accounts import AccountUse, ConnectedAccount, may_use
from headwater.domain.errors import Forbidden, Invalid, NotFound
from headwater.domain.models import Principal
from headwater.domain.runs import RunResult
from headwater.domain.workflows import Step, Workflow
from headwater.ports import Instance, Timed
from headwater.services.sources import SourceRequest
from headwater.services.trials import TrialRequest
from headwater.services.workflows import step_uses
from tests.fakes import World, to_end, world
from tests.services.test_services import HTTP, component_code, run_task

KEY = "sk-" + uuid.uuid4().hex
SLACK = {"name": "slack", "type": "app", "app": "slack"}


def person(w: World, name: str) -> Principal:
    user, _ = w.services.accounts.create_user(name, f"{name}@example.com", "paid")
    return Principal(user)


def with_org(w: World, owner: Principal, *members: Principal) -> tuple[str, list[Principal]]:
    org = w.services.accounts.create_org("Acme" + uuid.uuid4().hex[:6], owner.user.id)
    for m in members:
        w.services.accounts.add_member(org.id, m.user.id)
    return org.id, [Principal(p.user, frozenset({org.id})) for p in (owner, *members)]


def connect(w: World, who: Principal, org_id: str | None = None) -> ConnectedAccount:
    return w.services.connected_accounts.create(who, "slack", None, {"api_key": KEY}, org_id)


def handed(w: World) -> list[dict[str, Any]]:
    """The props every run and hook was given."""
    seen: list[dict[str, Any]] = []
    w.runner.script = lambda instance, event: seen.append(instance.props) or RunResult()
    w.runner.hooks = lambda instance, hook: seen.append(instance.props) or RunResult()
    return seen


def errors(w: World, source_id: str) -> list[dict[str, Any]]:
    with w.store.uow(readonly=True) as uow:
        return [e.event["error"] for e in uow.events.newest(source_id, "$errors", 10)]


def plant(w: World, source_id: str, **change: Any) -> None:
    """Writes the source as no service would: a reference nobody checked, a grant of another's."""
    with w.store.uow() as uow:
        old = uow.sources.get(source_id)
        assert old is not None
        uow.sources.update(dataclasses.replace(old, **change), old)
        uow.commit()
    w.services.runs.forget(source_id)


def account(owner: str) -> ConnectedAccount:
    return ConnectedAccount(id="apn_x", owner=owner, app="slack", name="s", kind="keys", credentials={},
                            fields=(), expires_at=None, status="active", version=1, created_at=0, updated_at=0)


def test_the_rule_an_orgs_account_for_what_runs_in_it_a_personal_one_for_what_its_owner_configured() -> None:
    org, personal = account("o_acme"), account("u_ada")
    in_acme = frozenset({"o_acme"})
    assert may_use(org, AccountUse("o_acme", None), frozenset())  # even a reference nobody configured
    assert not may_use(org, AccountUse("u_ada", "u_ada"), in_acme)  # a member's personal source
    assert not may_use(org, AccountUse("o_other", "u_ada"), in_acme)
    assert may_use(personal, AccountUse("u_ada", None), frozenset())
    assert may_use(personal, AccountUse("o_acme", "u_ada"), in_acme)
    assert not may_use(personal, AccountUse("o_acme", "u_ada"), frozenset())  # ada left the org
    assert not may_use(personal, AccountUse("o_acme", "u_bob"), in_acme)  # configured by another member
    assert not may_use(personal, AccountUse("o_acme", None), in_acme)  # by an expression's value
    assert not may_use(personal, AccountUse("u_eve", "u_ada"), in_acme)


def with_own_credentials(w: World, who: Principal, hooks: list[str]) -> Any:
    """A source of `who`'s whose app prop holds credentials given inline."""
    return to_end(w.services.sources.create(who, SourceRequest(
        component_code=component_code(configurable_props=[*HTTP, SLACK], hooks=hooks),
        configured_props={"slack": {"$auth": {"api_key": "their own"}}}), None))


def test_a_reference_planted_in_a_sources_props_gives_its_runs_and_hooks_nothing() -> None:
    w = world()
    seen = handed(w)
    ada, eve = person(w, "ada"), person(w, "eve")
    adas = connect(w, ada)
    source = with_own_credentials(w, eve, ["activate", "deactivate"])
    seen.clear()
    plant(w, source.id, configured_props={**source.configured_props, "slack": {"authProvisionId": adas.id}})

    [result] = to_end(w.services.runs.run_batch([run_task(source.id, {})]))
    assert result is not None and result.error_code == "ACCOUNT_NOT_FOUND"
    assert seen == []
    [error] = errors(w, source.id)
    assert error["code"] == "ACCOUNT_NOT_FOUND" and KEY not in str(error)
    # the same words as for a deleted account: nothing says it exists
    w.services.connected_accounts.delete(ada, adas.id)
    assert error["message"] == (f"The connected account {adas.id} cannot be used here: it was deleted, or it is not an "
                                "account this may use. Connect an account and give it to the app prop.")


def test_an_update_that_keeps_a_planted_reference_does_not_hand_it_over() -> None:
    w = world()
    seen = handed(w)
    ada, eve = person(w, "ada"), person(w, "eve")
    adas = connect(w, ada)
    source = with_own_credentials(w, eve, ["activate"])
    plant(w, source.id, configured_props={**source.configured_props, "slack": {"authProvisionId": adas.id}},
          account_grants={"slack": {"account": adas.id, "by": eve.user.id}})
    seen.clear()
    with pytest.raises(Invalid):  # the activate hook gets no credentials: it fails, nothing changes
        to_end(w.services.sources.update(eve, source.id, SourceRequest(name="again")))
    assert seen == []


def test_a_grant_counts_only_for_the_account_it_was_given_for() -> None:
    w = world()
    seen = handed(w)
    ada, bob = person(w, "ada"), person(w, "bob")
    org, (ada, bob) = with_org(w, ada, bob)
    adas, bobs = connect(w, ada), connect(w, bob)
    source = to_end(w.services.sources.create(ada, SourceRequest(
        component_code=component_code(configurable_props=[*HTTP, SLACK]),
        configured_props={"slack": {"authProvisionId": adas.id}}), org))
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "t1")]))
    assert seen == [{"slack": {"$auth": {"api_key": KEY}}}]
    # bob's account put in its place by no service, under ada's grant: refused
    plant(w, source.id, configured_props={**source.configured_props, "slack": {"authProvisionId": bobs.id}})
    [result] = to_end(w.services.runs.run_batch([run_task(source.id, {}, "t2")]))
    assert result is not None and result.error_code == "ACCOUNT_NOT_FOUND" and len(seen) == 1


def test_a_members_personal_account_serves_an_org_source_only_while_its_owner_is_a_member() -> None:
    w = world()
    seen = handed(w)
    ada, bob = person(w, "ada"), person(w, "bob")
    org, (ada, bob) = with_org(w, ada, bob)
    adas = connect(w, ada)
    source = to_end(w.services.sources.create(ada, SourceRequest(
        component_code=component_code(configurable_props=[*HTTP, SLACK]),
        configured_props={"slack": {"authProvisionId": adas.id}}), org))
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "t1")]))
    assert len(seen) == 1
    w.store.data.members.discard((org, ada.user.id))  # ada leaves the org (no service does it yet)
    [result] = to_end(w.services.runs.run_batch([run_task(source.id, {}, "t2")]))
    assert result is not None and result.error_code == "ACCOUNT_NOT_FOUND" and len(seen) == 1


def test_changing_the_code_or_props_of_a_source_needs_the_right_to_use_its_accounts() -> None:
    w = world()
    handed(w)
    ada, bob = person(w, "ada"), person(w, "bob")
    org, (ada, bob) = with_org(w, ada, bob)
    adas = connect(w, ada)
    props = [*HTTP, SLACK, {"name": "url", "type": "string"}]
    source = to_end(w.services.sources.create(ada, SourceRequest(
        component_code=component_code(configurable_props=props),
        configured_props={"slack": {"authProvisionId": adas.id}, "url": "https://api.example.com"}), org))
    new_code = component_code(configurable_props=props, name="Orders v2")
    for change in (SourceRequest(component_code=new_code),
                   SourceRequest(configured_props={"slack": {"authProvisionId": adas.id},
                                                   "url": "https://attacker.example"})):
        with pytest.raises(Forbidden) as refused:
            to_end(w.services.sources.update(bob, source.id, change))
        assert refused.value.details == {"slack": [f"uses the connected account {adas.id}, which you may not use"]}
    # the same props sent back, a pause, a rename: fine
    same = {"slack": {"authProvisionId": adas.id}, "url": "https://api.example.com"}
    to_end(w.services.sources.update(bob, source.id, SourceRequest(configured_props=same)))
    to_end(w.services.sources.update(bob, source.id, SourceRequest(active=False, name="paused")))
    updated = to_end(w.services.sources.update(ada, source.id, SourceRequest(component_code=new_code, active=True)))
    assert updated.account_grants == {"slack": {"account": adas.id, "by": ada.user.id}}
    # an org account bob may use: his change goes through, and the grant is his
    shared = connect(w, ada, org)
    mine = to_end(w.services.sources.update(bob, source.id, SourceRequest(component_code=new_code, configured_props={
        "slack": {"authProvisionId": shared.id}, "url": "https://attacker.example"})))
    assert mine.account_grants == {"slack": {"account": shared.id, "by": bob.user.id}}


def test_a_default_reference_is_checked_in_a_deploy_and_a_one_off_run() -> None:
    w = world()
    handed(w)
    ada, eve = person(w, "ada"), person(w, "eve")
    adas = connect(w, ada)
    defaulted = [*HTTP, {"name": "data", "type": "object", "optional": True,
                         "default": {"authProvisionId": adas.id}}]
    with pytest.raises(NotFound):
        to_end(w.services.sources.create(
            eve, SourceRequest(component_code=component_code(configurable_props=defaulted)), None))
    with pytest.raises(NotFound):
        asyncio.run(w.services.trials.run(eve, TrialRequest(component_code(configurable_props=defaulted)), None))


def test_an_orgs_component_runs_in_the_orgs_runner_and_is_deployed_only_there() -> None:
    w = world()
    ada, bob = person(w, "ada"), person(w, "bob")
    org, (ada, bob) = with_org(w, ada, bob)
    code = component_code(configurable_props=[*HTTP, {"name": "channel", "type": "string"}])
    component = asyncio.run(w.services.components.create(ada, code, None, org))
    own = asyncio.run(w.services.components.create(bob, code, None, None))
    w.runner.accounts.clear()
    to_end(w.services.components.options(bob, component.id, "channel", {}, 0, None, None))
    to_end(w.services.components.options(bob, own.id, "channel", {}, 0, None, None))
    to_end(w.services.components.options(bob, own.id, "channel", {}, 0, None, None, org))
    assert w.runner.accounts == [("options", org), ("options", bob.user.id), ("options", org)]
    other = w.services.accounts.create_org("Other", bob.user.id).id
    bob = Principal(bob.user, frozenset({org, other}))
    with pytest.raises(Invalid):  # the org's code in another org's runner
        to_end(w.services.components.options(bob, component.id, "channel", {}, 0, None, None, other))
    with pytest.raises(Invalid) as refused:
        to_end(w.services.sources.create(
            bob, SourceRequest(component_id=component.id, configured_props={"channel": "x"}), None))
    assert org in refused.value.message
    deployed = to_end(w.services.sources.create(bob, SourceRequest(component_id=component.id,
                                                            configured_props={"channel": "x"}), org))
    assert deployed.namespace == org


def test_options_use_only_the_accounts_the_caller_may_use_where_the_code_runs() -> None:
    w = world()
    given: list[tuple[str, dict[str, Any]]] = []

    def options(bundle: Any, instance_id: str, prop: str, props: dict[str, Any], *rest: Any) -> Timed[dict[str, Any]]:
        given.append((rest[-2], props))  # (..., account, bill_to)
        return Timed({"options": [], "context": None}, 0.0)

    w.runner.options = options  # type: ignore[method-assign]
    ada, bob = person(w, "ada"), person(w, "bob")
    org, (ada, bob) = with_org(w, ada, bob)
    shared = connect(w, ada, org)
    code = component_code(configurable_props=[*HTTP, SLACK, {"name": "channel", "type": "string"}])
    own = asyncio.run(w.services.components.create(bob, code, None, None))
    with pytest.raises(Invalid):  # the org's account in bob's personal runner
        to_end(w.services.components.options(bob, own.id, "channel", {"slack": {"authProvisionId": shared.id}},
                                             0, None, None))
    to_end(w.services.components.options(bob, own.id, "channel", {"slack": {"authProvisionId": shared.id}},
                                         0, None, None, org))
    assert given == [(org, {"slack": {"$auth": {"api_key": KEY}}})]


def test_a_step_reference_from_an_expression_may_name_only_the_workflows_own_namespaces_accounts() -> None:
    w = world()
    ada, bob = person(w, "ada"), person(w, "bob")
    org, (ada, bob) = with_org(w, ada, bob)
    workflow = Workflow("p_1", org, ada.user.id, "w", "d_1", [], None, 0, 0)
    step = Step("s", "sc_x", {"slack": {"authProvisionId": "apn_static"}, "other": "{{steps.trigger.event.a}}"})
    uses = step_uses(workflow, step)
    assert uses.of("slack", "apn_static") == AccountUse(org, ada.user.id)
    assert uses.of("slack", "apn_else") == AccountUse(org, None)
    assert uses.of("other", "apn_static") == AccountUse(org, None)


def test_instances_never_carry_another_namespaces_credentials_to_a_hook() -> None:
    w = world()
    hooked: list[Instance] = []
    w.runner.hooks = lambda instance, hook: hooked.append(instance) or RunResult()
    ada, eve = person(w, "ada"), person(w, "eve")
    adas = connect(w, ada)
    source = to_end(w.services.sources.create(ada, SourceRequest(
        component_code=component_code(configurable_props=[*HTTP, SLACK], hooks=["deactivate"]),
        configured_props={"slack": {"authProvisionId": adas.id}}), None))
    plant(w, source.id, namespace=eve.user.id)  # the source moved to eve's namespace by no service
    to_end(w.services.sources.delete(eve, source.id))  # its deactivate hook runs
    assert hooked == []  # refused before the hook's code was called


def test_a_refused_change_runs_none_of_the_new_codes_additional_props_with_the_account(
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = world()
    given: list[dict[str, Any]] = []
    real = w.runner.additional_props

    def additional_props(bundle: Any, instance_id: str, props: dict[str, Any], timeout_ms: int,
                         account: str) -> list[dict[str, Any]]:
        given.append(props)
        return real(bundle, instance_id, props, timeout_ms, account)

    monkeypatch.setattr(w.runner, "additional_props", additional_props)
    ada, bob = person(w, "ada"), person(w, "bob")
    org, (ada, bob) = with_org(w, ada, bob)
    adas = connect(w, ada)
    source = to_end(w.services.sources.create(ada, SourceRequest(
        component_code=component_code(configurable_props=[*HTTP, SLACK]),
        configured_props={"slack": {"authProvisionId": adas.id}}), org))
    with pytest.raises(Forbidden):
        to_end(w.services.sources.update(bob, source.id, SourceRequest(component_code=component_code(
            configurable_props=[*HTTP, SLACK], has_additional_props=True, name="Mine"))))
    assert given == []
