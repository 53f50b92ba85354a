"""Runs on record end to end, on both backends: a hook, an HTTP request, a manual run, a timer tick
and an event from a subscription each leave a record with what came in and what the code did, a
re-run runs the same input against the current code, and `headwater runs` / `rerun` show and do it.

Runs are asynchronous: every check polls the runs list until the expected record is there
(deadline, never a fixed sleep)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.e2e.test_routing import subscribe
from tests.e2e.test_runs import component, deploy

pytestmark = pytest.mark.both_modes

DEADLINE_S = 60.0

RECORDED = """export default {
  name: "Recorded",
  version: "1.0.0",
  props: { http: "$.interface.http", db: "$.service.db", token: { type: "string", secret: true } },
  hooks: {
    async deploy() { this.db.set("deployed", true); console.log("deploying"); },
  },
  async run(event) {
    console.log(`got ${JSON.stringify(event.body)} with ${this.token}`);
    this.db.set("last", event.body);
    this.$emit({ seen: event.body }, { summary: "seen" });
    if (event.body && event.body.fail) throw new Error(`failing with ${this.token}`);
  },
};
"""

TICKER = """export default {
  name: "Recorded ticker",
  version: "1.0.0",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 1 } } },
  async run(event) { this.$emit({ tick: event.timestamp }); },
};
"""


def wait_runs(api: httpx.Client, path: str, done: Callable[[list[dict[str, Any]]], bool], what: str) -> list[dict]:
    end = time.monotonic() + DEADLINE_S
    items: list[dict[str, Any]] = []
    while time.monotonic() < end:
        r = api.get(f"{path}/runs", params={"limit": 100})
        assert r.status_code == 200, r.text
        items = r.json()["data"]
        if done(items):
            return items
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; runs: {json.dumps(items)[:3000]}")


def one(api: httpx.Client, path: str, run_id: str) -> dict[str, Any]:
    r = api.get(f"{path}/runs/{run_id}")
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_hook_http_manual_runs_are_on_record_and_rerun(api: httpx.Client) -> None:
    secret = "tok-8c1f2e55"
    r = api.post("/sources", json={"component_code": RECORDED, "configured_props": {"token": secret}})
    assert r.status_code == 200, r.text
    source = r.json()["data"]
    path, url = f"/sources/{source['id']}", source["configured_props"]["http"]["endpoint_url"]
    [hook] = wait_runs(api, path, lambda runs: len(runs) == 1, "the deploy hook's record")
    assert (hook["kind"], hook["hook"], hook["rerunnable"]) == ("hook", "deploy", False)
    assert [line["message"] for line in one(api, path, hook["id"])["logs"]] == ["deploying"]

    assert httpx.post(url, json={"order": 1}, timeout=30).status_code == 200
    runs = wait_runs(api, path, lambda runs: any(r["kind"] == "http" for r in runs), "the request's record")
    request = one(api, path, next(r["id"] for r in runs if r["kind"] == "http"))
    assert request["trigger"]["body"] == {"order": 1} and request["trigger"]["method"] == "POST"
    assert request["outcome"] == "success" and request["db_keys_written"] == ["last"]
    assert request["emitted"][""]["count"] == 1
    assert request["duration_ms"] > 0 and (request["cpu_ms"] is None or request["cpu_ms"] >= 0)
    assert [line["message"] for line in request["logs"]] == ['got {"order":1} with [secret]']

    assert api.post(f"{path}/run", json={"body": {"fail": True}}).status_code == 202
    runs = wait_runs(api, path, lambda runs: any(r["kind"] == "manual" for r in runs), "the manual run's record")
    failed = one(api, path, next(r["id"] for r in runs if r["kind"] == "manual"))
    assert failed["outcome"] == "error" and failed["error"]["message"] == "failing with [secret]"
    assert secret not in json.dumps(failed)

    rerun = api.post(f"{path}/runs/{request['id']}/rerun")
    assert rerun.status_code == 202, rerun.text
    runs = wait_runs(api, path, lambda runs: any(r["kind"] == "rerun" for r in runs), "the re-run's record")
    again = one(api, path, next(r["id"] for r in runs if r["kind"] == "rerun"))
    assert again["rerun_of"] == request["id"] and again["trigger"] == request["trigger"]
    events = api.get(f"{path}/event_summaries", params={"expand": "event"}).json()["data"]
    assert [e["event"] for e in events if e["id"] in again["emitted"][""]["ids"]] == [{"seen": {"order": 1}}]
    assert api.post(f"{path}/runs/{hook['id']}/rerun").status_code == 409


def test_a_timer_tick_and_a_routed_event_are_on_record(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_code": TICKER})
    assert r.status_code == 200, r.text
    ticker = f"/sources/{r.json()['data']['id']}"
    [tick, *_] = wait_runs(api, ticker, lambda runs: any(r["kind"] == "timer" for r in runs), "a tick's record")
    assert "timestamp" in one(api, ticker, tick["id"])["trigger"]
    assert api.put(ticker, json={"active": False}).status_code == 200

    emitter_id, url = deploy(api, component("this.$emit(event.body)", name="Emitter"))
    listener_id, _ = deploy(api, component("this.$emit({relayed: event})", name="Listener"))
    subscribe(api, emitter_id, listener_id)
    assert httpx.post(url, json={"n": 7}, timeout=30).status_code == 200
    [routed] = wait_runs(api, f"/sources/{listener_id}", lambda runs: bool(runs), "the routed event's record")
    assert routed["kind"] == "subscription"
    assert one(api, f"/sources/{listener_id}", routed["id"])["trigger"] == {"n": 7}
