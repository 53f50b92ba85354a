"""Runs on record over /v1, in-process over the fakes: what a run's record holds, re-runs, hooks,
retention and paging, and who may see them."""

from __future__ import annotations

from typing import Any

import httpx

from headwater.domain.events import Emit
from headwater.domain.runs import RunResult
from headwater.ports import Instance
from headwater.services.recording import RUNS_TRIMMED_EVERY
from tests.api.conftest import App
from tests.services.test_services import HTTP, component_code

SECRET = [{"name": "token", "type": "string", "secret": True}]


def deploy(api: httpx.Client, **fields: Any) -> str:
    props = fields.pop("props", None)
    r = api.post("/sources", json={"component_code": component_code(configurable_props=HTTP + fields.pop("extra", []),
                                                                    **fields), "configured_props": props})
    assert r.status_code == 200, r.text
    return r.json()["data"]["id"]


def runs(api: httpx.Client, sid: str, **params: Any) -> dict:
    r = api.get(f"/sources/{sid}/runs", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_manual_run_is_on_record_with_its_input_emits_keys_and_logs(app: App, api: httpx.Client) -> None:
    sid = deploy(api)
    app.world.runner.script = lambda instance, event: RunResult(
        emits=[Emit({"n": 1}, {}), Emit({"n": 2}, {"name": "other"})], db_writes={"cursor": 7},
        logs=[{"level": "log", "message": "hello", "ts": 1}], duration_ms=12.5)
    assert api.post(f"/sources/{sid}/run", json={"order": 42}).status_code == 202
    app.world.queue.drain()
    listed = runs(api, sid)
    assert listed["page_info"]["total_count"] == 1
    (item,) = listed["data"]
    assert item["kind"] == "manual" and item["outcome"] == "success" and item["rerunnable"] is True
    assert {k: v["count"] for k, v in item["emitted"].items()} == {"": 1, "other": 1}
    assert item["log_count"] == 1 and item["duration_ms"] == 12.5
    run = api.get(f"/sources/{sid}/runs/{item['id']}").json()["data"]
    assert run["trigger"] == {"order": 42} and run["trigger_kept"] is True
    assert run["db_keys_written"] == ["cursor"] and run["db_keys_count"] == 1
    assert [line["message"] for line in run["logs"]] == ["hello"]
    events = api.get(f"/sources/{sid}/event_summaries").json()["data"]
    assert run["emitted"][""]["ids"] == [e["id"] for e in events]


def test_an_error_is_on_record_with_the_secrets_masked(app: App, api: httpx.Client) -> None:
    sid = deploy(api, extra=SECRET, props={"token": "s3cr3t-value"})

    def script(instance: Instance, event: Any) -> RunResult:
        token = instance.props["token"]
        result = RunResult.failed("RUNTIME_ERROR", f"bad token {token}", f"Error: bad token {token}\n  at run")
        result.logs = [{"level": "log", "message": f"using {token}", "ts": 1}]
        return result

    app.world.runner.script = script
    assert api.post(f"/sources/{sid}/run", json={}).status_code == 202
    app.world.queue.drain()
    (item,) = runs(api, sid)["data"]
    assert item["outcome"] == "error" and item["error"]["code"] == "RUNTIME_ERROR"
    run = api.get(f"/sources/{sid}/runs/{item['id']}")
    assert "s3cr3t-value" not in run.text
    data = run.json()["data"]
    assert data["error"]["message"] == "bad token [secret]"
    assert data["logs"][0]["message"] == "using [secret]"
    assert item["emitted"]["$errors"]["count"] == 1


def test_a_rerun_runs_the_same_input_against_the_current_code(app: App, api: httpx.Client) -> None:
    sid = deploy(api)
    seen: list[Any] = []
    app.world.runner.script = lambda instance, event: seen.append(event) or RunResult()
    assert api.post(f"/sources/{sid}/run", json={"n": 1}).status_code == 202
    app.world.queue.drain()
    (first,) = runs(api, sid)["data"]
    r = api.post(f"/sources/{sid}/runs/{first['id']}/rerun")
    assert r.status_code == 202, r.text
    app.world.queue.drain()
    assert seen == [{"n": 1}, {"n": 1}]
    newest = runs(api, sid)["data"][0]
    assert newest["kind"] == "rerun" and newest["rerun_of"] == first["id"]


def test_hooks_are_on_record_and_not_rerun(app: App, api: httpx.Client) -> None:
    sid = deploy(api, hooks=["deploy", "activate"])
    listed = runs(api, sid)["data"]
    assert [(r["kind"], r["hook"]) for r in listed] == [("hook", "activate"), ("hook", "deploy")]
    assert listed[0]["rerunnable"] is False
    r = api.post(f"/sources/{sid}/runs/{listed[0]['id']}/rerun")
    assert r.status_code == 409 and "hook" in r.json()["error"]


def test_an_inactive_source_is_not_rerun(app: App, api: httpx.Client) -> None:
    sid = deploy(api)
    assert api.post(f"/sources/{sid}/run", json={}).status_code == 202
    app.world.queue.drain()
    (item,) = runs(api, sid)["data"]
    assert api.put(f"/sources/{sid}", json={"active": False}).status_code == 200
    assert api.post(f"/sources/{sid}/runs/{item['id']}/rerun").status_code == 409


def test_the_newest_100_are_kept_and_paged(app: App, api: httpx.Client) -> None:
    sid = deploy(api)
    for n in range(105):
        assert api.post(f"/sources/{sid}/run", json={"n": n}).status_code == 202
    app.world.queue.drain()
    first = runs(api, sid, limit=40)
    assert first["page_info"]["total_count"] == 100
    seen = [r["id"] for r in first["data"]]
    cursor = first["page_info"]["end_cursor"]
    while cursor:
        page = runs(api, sid, limit=40, after=cursor)
        seen += [r["id"] for r in page["data"]]
        cursor = page["page_info"]["end_cursor"] if page["data"] else None
    assert len(seen) == 100 == len(set(seen))
    inputs = [api.get(f"/sources/{sid}/runs/{run_id}").json()["data"]["trigger"]["n"] for run_id in (seen[0], seen[-1])]
    assert inputs == [104, 5]
    oldest_seq = int(seen[-1].split("-")[1])
    gone = f"{seen[-1].split('-')[0]}-{oldest_seq - 1}"
    assert api.get(f"/sources/{sid}/runs/{gone}").status_code == 404
    assert 100 <= len([k for k in app.world.store.data.runs if k[0] == sid]) < 100 + RUNS_TRIMMED_EVERY


def test_runs_of_unknown_or_others_sources_and_bad_ids_are_404(app: App, api: httpx.Client) -> None:
    sid = deploy(api)
    assert api.post(f"/sources/{sid}/run", json={}).status_code == 202
    app.world.queue.drain()
    (item,) = runs(api, sid)["data"]
    other = app.client()
    for path in (f"/sources/{sid}/runs", f"/sources/{sid}/runs/{item['id']}"):
        assert other.get(path).status_code == 404
    assert other.post(f"/sources/{sid}/runs/{item['id']}/rerun").status_code == 404
    for bad in ("x", "1-", "-1", "12-99", "99999999999999999999-1", item["id"] + "0"):
        assert api.get(f"/sources/{sid}/runs/{bad}").status_code == 404, bad
    assert api.get("/sources/dc_doesnotexist0000000000000/runs").status_code == 404
    assert api.get("/workflows/p_doesnotexist/runs").status_code == 404


def test_a_deleted_source_takes_its_runs_along(app: App, api: httpx.Client) -> None:
    sid = deploy(api)
    assert api.post(f"/sources/{sid}/run", json={}).status_code == 202
    app.world.queue.drain()
    assert api.delete(f"/sources/{sid}").status_code == 204
    app.world.queue.drain()
    assert not [k for k in app.world.store.data.runs if k[0] == sid]
