"""Connected accounts on the fakes (issue 22): kept sealed, never answered, usable only by their
owner (or the owner org's members) through `{"authProvisionId"}`, read afresh by every run, hook,
`options` and `additionalProps` call; a deleted one fails the next run with an error event."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater.domain.commands import RunWorkflow
from headwater.domain.connected_accounts import NEEDS_RECONNECT
from headwater.domain.errors import Forbidden, Invalid, NotFound
from headwater.domain.models import Principal
from headwater.domain.pagination import PageRequest
from headwater.domain.runs import RunResult
from headwater.ports import Instance, Task, Timed
from headwater.services.connected_accounts import AccountChange
from headwater.services.sources import SourceRequest
from tests.fakes import World, to_end, world
from tests.services.test_services import HTTP, component_code, deploy, principal, run_task

KEY = "sk-" + uuid.uuid4().hex
NEW_KEY = "sk-" + uuid.uuid4().hex
SLACK = {"name": "slack", "type": "app", "app": "slack"}


def person(w: World, name: str) -> Principal:
    user, _ = w.services.accounts.create_user(name, f"{name}@example.com", "paid")
    return Principal(user)


def connect(w: World, who: Principal, org_id: str | None = None, app: str = "slack", **credentials: Any) -> Any:
    return w.services.connected_accounts.create(who, app, None, credentials or {"api_key": KEY}, org_id)


def runs_seeing(w: World) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def script(instance: Instance, event: Any) -> RunResult:
        seen.append(instance.props)
        return RunResult()
    w.runner.script = script
    return seen


def errors(w: World, source_id: str) -> list[dict[str, Any]]:
    with w.store.uow(readonly=True) as uow:
        return [e.event["error"] for e in uow.events.newest(source_id, "$errors", 10)]


def test_an_account_is_kept_sealed_and_answered_without_its_values() -> None:
    w = world()
    ada = principal(w)
    account = connect(w, ada, api_key=KEY, region="eu")
    answer = json.dumps(account.to_api())
    assert KEY not in answer
    assert account.to_api() | {"created_at": 0, "updated_at": 0} == {
        "id": account.id, "app": "slack", "name": "slack", "kind": "keys", "status": "active",
        "fields": ["api_key", "region"], "expires_at": None, "owner_id": ada.user.id, "created_at": 0, "updated_at": 0}
    assert account.id.startswith("apn_") and account.version == 1
    stored = w.store.data.connected_accounts[account.id][1]
    assert set(stored.credentials) == {"$secret"}  # the Secrets port's token (the fake's is readable)
    assert w.services.connected_accounts.open(stored) == {"api_key": KEY, "region": "eu"}


def test_bad_input_is_refused_per_field_without_quoting_a_value() -> None:
    w = world()
    ada = principal(w)
    with pytest.raises(Invalid) as refused:
        w.services.connected_accounts.create(ada, "not a slug!", "", {"api_key": {"nested": KEY}}, None)
    assert set(refused.value.details or {}) == {"app", "name", "credentials"}
    assert KEY not in json.dumps([refused.value.message, refused.value.details])
    with pytest.raises(Forbidden):
        connect(w, ada, org_id="o_not_mine")


def test_owners_and_their_org_members_see_an_account_nobody_else_does() -> None:
    w = world()
    ada, bob, eve = person(w, "ada"), person(w, "bob"), person(w, "eve")
    org = w.services.accounts.create_org("Acme", ada.user.id)
    w.services.accounts.add_member(org.id, bob.user.id)
    ada, bob = Principal(ada.user, frozenset({org.id})), Principal(bob.user, frozenset({org.id}))
    mine, shared = connect(w, ada), connect(w, ada, org.id)
    svc = w.services.connected_accounts
    assert svc.get(bob, shared.id) == shared
    for who, account in ((bob, mine), (eve, mine), (eve, shared)):
        with pytest.raises(NotFound):
            svc.get(who, account.id)
    assert [a.id for a in svc.list(ada, None, PageRequest()).items] == [mine.id]
    assert [a.id for a in svc.list(bob, org.id, PageRequest()).items] == [shared.id]
    assert [a.id for a in svc.usable(ada, PageRequest()).items] == [shared.id, mine.id]
    assert [a.id for a in svc.usable(bob, PageRequest()).items] == [shared.id]
    with pytest.raises(NotFound):
        svc.delete(eve, shared.id)
    svc.delete(bob, shared.id)
    with pytest.raises(NotFound):
        svc.get(ada, shared.id)


def test_an_update_merges_credentials_and_moves_the_version() -> None:
    w = world()
    ada = principal(w)
    account = connect(w, ada, api_key=KEY, region="eu")
    svc = w.services.connected_accounts
    updated = svc.update(ada, account.id, AccountChange(name="Work", credentials={"api_key": NEW_KEY, "region": None}))
    assert updated.name == "Work" and updated.fields == ("api_key",) and updated.version == 2
    assert svc.get(ada, account.id) == updated
    assert svc.open(updated) == {"api_key": NEW_KEY}
    with pytest.raises(Invalid):
        svc.update(ada, account.id, AccountChange(credentials={"api_key": [NEW_KEY]}))
    with pytest.raises(Invalid):  # each patch fits, their sum does not
        for i in range(3):
            svc.update(ada, account.id, AccountChange(credentials={f"f{i}_{j}": "x" for j in range(20)}))
    assert len(svc.get(ada, account.id).fields) == 41


def test_a_source_may_use_its_callers_account_only_and_of_its_app() -> None:
    w = world()
    ada, eve = person(w, "ada"), person(w, "eve")
    adas, slack_of_eve, github = connect(w, ada), connect(w, eve), connect(w, ada, app="github")
    with pytest.raises(NotFound):
        deploy(w, ada, configurable_props=[*HTTP, SLACK], props={"slack": {"authProvisionId": slack_of_eve.id}})
    with pytest.raises(NotFound):
        deploy(w, ada, configurable_props=[*HTTP, SLACK], props={"slack": {"authProvisionId": "apn_nonesuch"}})
    with pytest.raises(Invalid) as other_app:
        deploy(w, ada, configurable_props=[*HTTP, SLACK], props={"slack": {"authProvisionId": github.id}})
    assert "github" in (other_app.value.details or {})["slack"][0]
    source = deploy(w, ada, configurable_props=[*HTTP, SLACK], props={"slack": {"authProvisionId": adas.id}})
    assert w.store.data.sources[source.id].configured_props["slack"] == {"authProvisionId": adas.id}
    assert w.services.sources.to_api(source)["configured_props"]["slack"] == {"authProvisionId": adas.id}


def test_runs_and_hooks_read_the_current_credentials_and_a_deleted_account_fails_the_next_run() -> None:
    w = world()
    hooked: list[dict[str, Any]] = []
    w.runner.hooks = lambda instance, hook: hooked.append(instance.props) or RunResult()
    seen = runs_seeing(w)
    ada = principal(w)
    account = connect(w, ada)
    source = deploy(w, ada, configurable_props=[*HTTP, SLACK], hooks=["activate"],
                    props={"slack": {"authProvisionId": account.id}})
    assert hooked == [{"slack": {"$auth": {"api_key": KEY}}}]
    runs = w.services.runs
    to_end(runs.run_batch([run_task(source.id, {}, "t1")]))
    w.services.connected_accounts.update(ada, account.id, AccountChange(credentials={"api_key": NEW_KEY}))
    to_end(runs.run_batch([run_task(source.id, {}, "t2")]))  # its source and state are in memory
    assert [p["slack"]["$auth"]["api_key"] for p in seen] == [KEY, NEW_KEY]

    w.services.connected_accounts.delete(ada, account.id)
    [result] = to_end(runs.run_batch([run_task(source.id, {"n": 3}, "t3")]))
    assert result is not None and result.error_code == "ACCOUNT_NOT_FOUND"
    assert len(seen) == 2  # the component never ran
    [error] = errors(w, source.id)
    assert error["code"] == "ACCOUNT_NOT_FOUND" and account.id in error["message"]
    assert w.usage.totals(ada.user.id, "0000-00-00", "9999-99-99")[0] == 2  # the refused run is not counted


def test_an_account_waiting_for_a_reconnect_fails_runs_with_its_code() -> None:
    w = world()
    seen = runs_seeing(w)
    ada = principal(w)
    account = connect(w, ada)
    source = deploy(w, ada, configurable_props=[*HTTP, SLACK], props={"slack": {"authProvisionId": account.id}})
    stored = w.store.data.connected_accounts[account.id][1]
    with w.store.uow() as uow:
        uow.connected_accounts.save(stored.__class__(**{**stored.__dict__, "status": NEEDS_RECONNECT}), 1)
        uow.commit()
    to_end(w.services.runs.run_batch([run_task(source.id, {})]))
    assert seen == [] and errors(w, source.id)[0]["code"] == "ACCOUNT_NEEDS_RECONNECT"


def test_a_source_with_an_account_has_its_credentials_read_off_the_event_loop() -> None:
    """Credentials are read from the store, which the event loop must not wait on."""
    w = world()
    ada = principal(w)
    account = connect(w, ada)
    source = deploy(w, ada, configurable_props=[*HTTP, SLACK], props={"slack": {"authProvisionId": account.id}})
    task = Task("t1", run_task(source.id, {}).command)
    to_end(w.services.runs.run_batch([task]))  # the source is in memory now
    read_on: list[int] = []
    real = w.services.runs.credentials
    w.services.runs.credentials = lambda *args, **kwargs: read_on.append(threading.get_ident()) or real(  # type: ignore[method-assign]
        *args, **kwargs)

    async def run_on_the_loop() -> int:
        await w.services.runs.run_batch([Task("t2", task.command)])
        return threading.get_ident()

    loop_thread = asyncio.run(run_on_the_loop())
    assert read_on and loop_thread not in read_on


def test_an_update_by_another_org_member_keeps_the_account_it_cannot_see() -> None:
    w = world()
    ada, bob = person(w, "ada"), person(w, "bob")
    org = w.services.accounts.create_org("Acme", ada.user.id)
    w.services.accounts.add_member(org.id, bob.user.id)
    ada, bob = Principal(ada.user, frozenset({org.id})), Principal(bob.user, frozenset({org.id}))
    personal = connect(w, ada)
    req = SourceRequest(component_code=component_code(configurable_props=[*HTTP, SLACK]),
                        configured_props={"slack": {"authProvisionId": personal.id}})
    source = to_end(w.services.sources.create(ada, req, org.id))
    renamed = to_end(w.services.sources.update(bob, source.id, SourceRequest(name="renamed")))
    assert renamed.configured_props["slack"] == {"authProvisionId": personal.id}
    with pytest.raises(NotFound):  # but bob cannot point a source at it
        to_end(w.services.sources.update(bob, source.id, SourceRequest(configured_props={"slack": {
            "authProvisionId": connect(w, ada).id}})))


def test_options_and_additional_props_get_the_credentials_of_the_callers_account_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = world()
    given: list[tuple[str, dict[str, Any]]] = []
    real_additional = w.runner.additional_props

    def additional_props(bundle: Any, instance_id: str, props: dict[str, Any], timeout_ms: int,
                         account: str, bill_to: str) -> Timed[list[dict[str, Any]]]:
        given.append(("additional_props", props))
        return real_additional(bundle, instance_id, props, timeout_ms, account, bill_to)

    def options(bundle: Any, instance_id: str, prop: str, props: dict[str, Any], *rest: Any) -> Timed[dict[str, Any]]:
        given.append(("options", props))
        return Timed({"options": [], "context": None}, 0.0)

    monkeypatch.setattr(w.runner, "additional_props", additional_props)
    monkeypatch.setattr(w.runner, "options", options)
    ada, eve = person(w, "ada"), person(w, "eve")
    account = connect(w, ada)
    code = component_code(configurable_props=[*HTTP, SLACK, {"name": "channel", "type": "string"}],
                          has_additional_props=True)
    props = {"slack": {"authProvisionId": account.id}, "channel": "general"}
    with pytest.raises(NotFound):
        to_end(w.services.sources.create(eve, SourceRequest(component_code=code, configured_props=props), None))
    assert given == []  # refused before any code saw anything
    to_end(w.services.sources.create(ada, SourceRequest(component_code=code, configured_props=props), None))
    component = asyncio.run(w.services.components.create(ada, code, None, None))
    to_end(w.services.components.options(ada, component.id, "channel", props, 0, None, None))
    of_eve = asyncio.run(w.services.components.create(eve, code, None, None))
    with pytest.raises(NotFound):  # her own component, ada's account
        to_end(w.services.components.options(eve, of_eve.id, "channel", props, 0, None, None))
    expected = {"slack": {"$auth": {"api_key": KEY}}, "channel": "general"}
    assert given == [("additional_props", expected), ("options", expected)]


def test_a_workflow_step_gets_the_accounts_current_credentials(tmp_path: Path) -> None:
    w = world()
    seen = runs_seeing(w)
    ada, eve = person(w, "ada"), person(w, "eve")
    account = connect(w, ada)
    action_code = component_code(type="action", configurable_props=[SLACK])
    action = asyncio.run(w.services.components.create(ada, action_code, None, None))

    def flow(name: str, component_id: str) -> Path:
        file = tmp_path / f"{name}.yaml"
        file.write_text(yaml.safe_dump({"name": name, "steps": [
            {"name": "post", "component": component_id, "props": {"slack": {"authProvisionId": account.id}}}]}))
        return file

    of_eve = asyncio.run(w.services.components.create(eve, action_code, None, None))
    with pytest.raises(NotFound) as refused:  # her own action, ada's account
        w.services.workflows.deploy(eve.user.id, None, flow("eves", of_eve.id))
    assert account.id in refused.value.message
    workflow = w.services.workflows.deploy(ada.user.id, None, flow("adas", action.id))
    assert w.services.workflows.run([Task("t1", RunWorkflow(workflow.id, {}))]) == ["done"]
    assert seen == [{"slack": {"$auth": {"api_key": KEY}}}]
    w.services.connected_accounts.delete(ada, account.id)
    assert w.services.workflows.run([Task("t2", RunWorkflow(workflow.id, {}))]) == ["failed"]
    assert len(seen) == 1 and errors(w, workflow.id)[0]["code"] == "ACCOUNT_NOT_FOUND"


def test_a_run_without_deploying_gets_the_callers_account_and_never_anothers() -> None:
    from headwater.services.trials import TrialRequest

    w = world()
    ada, eve = person(w, "ada"), person(w, "eve")
    account = connect(w, ada)
    seen = runs_seeing(w)
    code = component_code(configurable_props=[SLACK])
    asyncio.run(w.services.trials.run(ada, TrialRequest(code, {}, {"slack": {"authProvisionId": account.id}}), None))
    assert seen == [{"slack": {"$auth": {"api_key": KEY}}}]
    with pytest.raises(NotFound):
        asyncio.run(w.services.trials.run(eve, TrialRequest(code, {}, {"slack": {"authProvisionId": account.id}}),
                                          None))
    assert len(seen) == 1
