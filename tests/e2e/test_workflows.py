"""Workflows end to end: deployed with the CLI from YAML, triggered by a source, steps passing
data forward, an early exit, a failure's `$errors` summary, emits routed to a webhook."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import COMPONENTS, Server, User, client_for, new_user
from tests.e2e.test_routing import EMITTER, Receiver, subscribe, webhook
from tests.e2e.test_runs import deploy, wait_until

pytestmark = pytest.mark.both_modes

STEPS = str(COMPONENTS / "workflow")


@pytest.fixture(scope="module")
def owner(server: Server) -> User:
    return new_user(server, tier="paid")


@pytest.fixture
def client(server: Server, owner: User) -> Iterator[httpx.Client]:
    with client_for(server, owner.api_key) as c:
        yield c


def write(tmp_path: Path, name: str, trigger: str, steps: list[dict[str, Any]]) -> Path:
    """A workflow file; YAML is a superset of JSON, so JSON text is a valid workflow file."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps({"name": name, "trigger": trigger, "steps": steps}))
    return path


def summaries(client: httpx.Client, workflow_id: str, errors: bool = False) -> list[dict[str, Any]]:
    path = f"/workflows/{workflow_id}/{'$errors/' if errors else ''}event_summaries"
    r = client.get(path, params={"expand": "event"})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def wait_for(client: httpx.Client, workflow_id: str, errors: bool = False) -> list[dict[str, Any]]:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        items = summaries(client, workflow_id, errors)
        if items:
            return items
        time.sleep(0.05)
    raise AssertionError(f"no {'errors' if errors else 'events'} from {workflow_id}")


def test_three_steps_pass_data_forward_and_emit(server: Server, owner: User, client: httpx.Client,
                                                tmp_path: Path) -> None:
    source_id, url = deploy(client, EMITTER)
    receiver = Receiver()
    try:
        path = write(tmp_path, "enrich", source_id, [
            {"name": "double", "component": f"{STEPS}/double.mjs", "props": {"n": "{{steps.trigger.event.n}}"}},
            {"name": "add", "component": f"{STEPS}/add.mjs",
             "props": {"a": "{{ steps.double.$return_value.n }}", "b": 1}},
            {"name": "emit", "component": f"{STEPS}/emit.mjs", "props": {"value": "{{steps.add.$return_value}}"}},
        ])
        deployed = server.cli("workflows", "deploy", str(path), "--user", owner.id)
        assert deployed["id"].startswith("p_") and deployed["deployment_id"].startswith("d_")
        hook = webhook(client, receiver.url)
        subscribe(client, deployed["id"], hook["id"])
        assert httpx.post(url, json={"n": 20}).status_code == 200
        [item] = wait_for(client, deployed["id"])
        assert item["event"] == {"raw_event": {"total": 41}}
        assert item["metadata"]["emitter_id"] == deployed["id"]
        [(_, body)] = receiver.wait(1)
        assert json.loads(body)["event"] == {"raw_event": {"total": 41}}
        live = client.get(f"/workflows/{deployed['id']}/event_summaries", params={"event_name": "live"}).json()
        assert [i["event"] for i in live["data"]] == [{"total": 41}]
        logs = client.get(f"/workflows/{deployed['id']}/event_summaries", params={"event_name": "$logs"}).json()
        assert [i["event"]["message"] for i in logs["data"]] == ["adding 40 and 1"]
        again = server.cli("workflows", "deploy", str(path), "--user", owner.id)
        assert again["id"] == deployed["id"] and again["deployment_id"] != deployed["deployment_id"]
        listed = server.cli("workflows", "list", "--user", owner.id)["data"]
        assert [w["id"] for w in listed if w["name"] == "enrich"] == [deployed["id"]]
    finally:
        receiver.close()


def test_an_early_exit_ends_the_run(server: Server, owner: User, client: httpx.Client, tmp_path: Path) -> None:
    source_id, url = deploy(client, EMITTER)
    path = write(tmp_path, "stops", source_id, [
        {"name": "stop", "component": f"{STEPS}/stop.mjs"},
        {"name": "emit", "component": f"{STEPS}/emit.mjs", "props": {"value": 1}},
        {"name": "fail", "component": f"{STEPS}/fail.mjs"},
    ])
    workflow_id = server.cli("workflows", "deploy", str(path), "--user", owner.id)["id"]
    marker = tmp_path / "after.yaml"
    after = write(marker.parent, "marker", source_id, [{"name": "emit", "component": f"{STEPS}/emit.mjs",
                                                         "props": {"value": "done"}}])
    marker_id = server.cli("workflows", "deploy", str(after), "--user", owner.id)["id"]
    httpx.post(url, json={"n": 1})
    wait_for(client, marker_id)  # the same event reached both workflows; this one has run
    wait_until(client, source_id, lambda items: bool(items), "the source's event")
    assert summaries(client, workflow_id) == [] and summaries(client, workflow_id, errors=True) == []


def test_a_failing_step_leaves_an_errors_summary(server: Server, owner: User, client: httpx.Client,
                                                 tmp_path: Path) -> None:
    source_id, url = deploy(client, EMITTER)
    path = write(tmp_path, "fails", source_id, [
        {"name": "double", "component": f"{STEPS}/double.mjs", "props": {"n": 2}},
        {"name": "fail", "component": f"{STEPS}/fail.mjs"},
    ])
    deployed = server.cli("workflows", "deploy", str(path), "--user", owner.id)
    httpx.post(url, json={"n": 9})
    [item] = wait_for(client, deployed["id"], errors=True)
    assert item["metadata"]["name"] == "$errors"
    event = item["event"]
    assert event["original_event"] == {"n": 9}
    context = event["original_context"]
    assert set(context) == {"id", "ts", "workflow_id", "deployment_id", "source_type", "verified", "owner_id",
                            "platform_version"}
    assert context["workflow_id"] == deployed["id"] and context["deployment_id"] == deployed["deployment_id"]
    assert context["owner_id"] == owner.id and context["verified"] is False
    assert isinstance(context["ts"], int) and isinstance(context["platform_version"], str)
    error = event["error"]
    assert error["code"] == "RUNTIME_ERROR" and error["cellId"] == "fail"
    assert "cannot handle 9" in error["message"] and "cannot handle 9" in error["stack"]
    assert isinstance(error["ts"], int)
    assert summaries(client, deployed["id"]) == []

    # the run is on record with the step that failed, and runs again on the same event
    runs_path = f"/workflows/{deployed['id']}/runs"
    [run] = client.get(runs_path).json()["data"]
    assert (run["kind"], run["outcome"], run["error"]["step"]) == ("subscription", "error", "fail")
    detail = client.get(f"{runs_path}/{run['id']}").json()["data"]
    assert detail["trigger"] == {"n": 9} and "cannot handle 9" in detail["error"]["message"]
    assert client.post(f"{runs_path}/{run['id']}/rerun").status_code == 202
    end = time.monotonic() + 60
    while len(listed := client.get(runs_path).json()["data"]) < 2 and time.monotonic() < end:
        time.sleep(0.05)
    assert (listed[0]["kind"], listed[0]["rerun_of"], listed[0]["error"]["step"]) == ("rerun", run["id"], "fail")


def test_a_prop_whose_expression_gives_undefined_is_not_passed_on_as_text(
        server: Server, owner: User, client: httpx.Client, tmp_path: Path) -> None:
    source_id, url = deploy(client, EMITTER)
    path = write(tmp_path, "undefined-prop", source_id, [
        {"name": "double", "component": f"{STEPS}/double.mjs", "props": {"n": "{{steps.trigger.event.count}}"}}])
    deployed = server.cli("workflows", "deploy", str(path), "--user", owner.id)
    httpx.post(url, json={"n": 9})
    [item] = wait_for(client, deployed["id"], errors=True)
    error = item["event"]["error"]
    assert error["code"] == "CONFIGURATION_ERROR" and error["cellId"] == "double"
    assert error["message"] == ("prop n is required, but its {{ }} expression gave undefined "
                                "({{steps.trigger.event.count}})")


def test_bad_workflow_files_are_refused(server: Server, owner: User, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps: []\n")
    out = server.cli("workflows", "deploy", str(bad), "--user", owner.id, check=False)
    assert out["details"] == {"steps": ["required: a non-empty list"]}
    source = tmp_path / "not-action.yaml"
    source.write_text(json.dumps({"name": "y", "steps": [{"name": "s", "component": "headwater-http"}]}))
    out = server.cli("workflows", "deploy", str(source), "--user", owner.id, check=False)
    assert "not an action" in out["error"]
    mistyped = write(tmp_path, "mistyped", "dc_x", [{"name": "double", "component": f"{STEPS}/double.mjs",
                                                     "props": {"n": "twenty"}}])
    out = server.cli("workflows", "deploy", str(mistyped), "--user", owner.id, check=False)
    assert out["details"] == {"steps.double.props.n": ["must be an integer"]}
    with client_for(server, new_user(server).api_key) as stranger:
        assert stranger.get("/workflows/p_nope/event_summaries").status_code == 404

