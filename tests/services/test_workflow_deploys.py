"""Workflows deployed with a key (`POST /v1/workflows`, Workflows.deploy_data) on the fakes."""

from __future__ import annotations

import asyncio

import pytest

from headwater.domain.errors import Invalid, NotFound
from headwater.domain.models import Principal
from tests.fakes import world
from tests.services.test_services import component_code, principal

ACTION = component_code(type="action", configurable_props=[{"name": "n", "type": "integer"}])


def test_a_step_given_as_code_is_saved_and_a_same_name_deploy_replaces_the_steps() -> None:
    w = world()
    ada = principal(w)
    steps = [{"name": "double", "component_code": ACTION, "props": {"n": 1}}]
    first = asyncio.run(w.services.workflows.deploy_data(ada, None, {"name": "flow", "steps": steps}))
    [step] = first.steps
    assert w.store.data.components[step.component_id].code == ACTION
    again = asyncio.run(w.services.workflows.deploy_data(ada, None, {"name": "flow", "steps": steps}))
    assert again.id == first.id and again.deployment_id != first.deployment_id
    assert [wf.id for wf in w.services.workflows.listing(ada.user.id, None)] == [first.id]
    w.services.workflows.remove(ada, first.id)
    with pytest.raises(NotFound):
        w.services.workflows.remove(ada, first.id)


@pytest.mark.parametrize(("step", "field"), [
    ({"name": "a", "component": "steps/a.mjs"}, "steps.a.component"),
    ({"name": "a", "component": "k", "component_code": ACTION}, "steps[0].component_code"),
    ({"name": "a", "component_code": 7}, "steps[0].component_code"),
], ids=["a file path", "both", "not a string"])
def test_what_the_server_cannot_deploy_is_refused_naming_the_field(step: dict, field: str) -> None:
    w = world()
    with pytest.raises(Invalid) as refused:
        asyncio.run(w.services.workflows.deploy_data(principal(w), None, {"name": "flow", "steps": [step]}))
    assert field in (refused.value.details or {})


def test_another_users_workflow_is_not_found() -> None:
    w = world()
    ada, bob = principal(w), w.services.accounts.create_user("bob", "bob@example.com")[0]
    steps = [{"name": "a", "component_code": ACTION}]
    flow = asyncio.run(w.services.workflows.deploy_data(ada, None, {"name": "f", "steps": steps}))
    with pytest.raises(NotFound):
        w.services.workflows.remove(Principal(bob), flow.id)
