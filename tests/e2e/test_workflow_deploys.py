"""`POST /v1/workflows` and `DELETE /v1/workflows/{id}` with a user's key in both deployments
(DECISIONS Workflows: the CLI's extension): a step given as code runs when the trigger emits, a
same-name deploy replaces the steps under the same id, a delete ends it."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import COMPONENTS
from tests.e2e.test_routing import EMITTER
from tests.e2e.test_runs import deploy
from tests.e2e.test_workflows import wait_for

pytestmark = pytest.mark.both_modes

DOUBLE = (COMPONENTS / "workflow" / "double.mjs").read_text()


def test_a_workflow_deployed_with_a_key_runs_is_replaced_and_deleted(paid_api: httpx.Client) -> None:
    source_id, url = deploy(paid_api, EMITTER)
    body = {"name": "keyed", "trigger": source_id, "steps": [
        {"name": "double", "component_code": DOUBLE, "props": {"n": "{{steps.trigger.event.n}}"}},
        {"name": "emit", "component": "headwater-emit", "props": {"event": "{{steps.double.$return_value}}"}}]}
    first = paid_api.post("/workflows", json=body)
    assert first.status_code == 200, first.text
    workflow = first.json()["data"]
    assert [s["name"] for s in workflow["steps"]] == ["double", "emit"]
    assert httpx.post(url, json={"n": 21}).status_code == 200
    [emitted] = wait_for(paid_api, workflow["id"])
    assert emitted["event"]["raw_event"] == {"n": 42}

    again = paid_api.post("/workflows", json={**body, "steps": body["steps"][:1]}).json()["data"]
    assert (again["id"], len(again["steps"])) == (workflow["id"], 1)
    assert again["deployment_id"] != workflow["deployment_id"]
    assert [w["id"] for w in paid_api.get("/users/me/workflows").json()["data"]].count(workflow["id"]) == 1

    assert paid_api.delete(f"/workflows/{workflow['id']}").status_code == 204
    assert paid_api.delete(f"/workflows/{workflow['id']}").status_code == 404
    assert workflow["id"] not in [w["id"] for w in paid_api.get("/users/me/workflows").json()["data"]]
