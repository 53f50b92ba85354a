"""Sources over the REST API where the component's code runs: the real describe, additional props,
secrets and app auth as Node sees them, hooks, manual runs, errors. Everything goes through a running
service with real Node runners; components live in tests/components/sources_api/ or inline below.
The rules of requests and answers (creating, naming, props, masks, wrong ids, orgs, lists) are
tests/api/test_sources.py, in-process over the fakes."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from tests.api.test_sources import TRACKER_VALID, assert_422, tracker_props
from tests.conftest import Server, client_for, new_user

COMPONENTS = Path(__file__).parents[1] / "components" / "sources_api"
EVENT_ID = re.compile(r"^\d+-\d+$")
MASK = "********"


def component(name: str) -> str:
    return (COMPONENTS / name).read_text()


ECHO = """export default {{
  name: "{name}",
  key: "{key}",
  version: "0.0.1",
  description: "Emit every event it is given.",
  props: {{ db: "$.service.db" }},
  async run(event) {{
    this.$emit(event, {{ summary: "echo", id: event && event.orderId }});
  }},
}};
"""

HEARTBEAT = """export default {
  name: "Heartbeat",
  key: "sources-api-heartbeat",
  version: "1.0.0",
  type: "source",
  props: {
    timer: {
      type: "$.interface.timer",
      label: "Every",
      default: { intervalSeconds: 3600 },
    },
  },
  async run(event) {
    this.$emit(event, { summary: "tick" });
  },
};
"""

WITNESS = """export default {
  name: "Witness",
  key: "sources-api-witness",
  version: "0.0.1",
  type: "source",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit(event.body, { summary: `${event.method} ${event.path}` });
  },
};
"""

HISTORY = """export default {
  name: "Backfilled Orders",
  key: "sources-api-backfill",
  version: "0.4.0",
  type: "source",
  props: { db: "$.service.db" },
  hooks: {
    async deploy() {
      // Historical events, deliberately emitted out of order.
      const orders = [
        { id: "ord_2", total: 20, ts: 1700000200000 },
        { id: "ord_3", total: 30, ts: 1700000300000 },
        { id: "ord_1", total: 10, ts: 1700000100000 },
      ];
      for (const order of orders) {
        this.$emit(order, { id: order.id, summary: `Order ${order.id}`, ts: order.ts });
      }
      this.db.set("lastTs", 1700000300000);
    },
  },
  async run(event) {
    this.$emit(event);
  },
};
"""

COUNTER = """export default {
  name: "Paged Poller",
  key: "sources-api-paged-poller",
  version: "0.2.0",
  type: "source",
  props: {
    db: "$.service.db",
    prefix: { type: "string", label: "Prefix" },
  },
  methods: {
    label(page) {
      return `${this.prefix}-${page}`;
    },
  },
  hooks: {
    async deploy() {
      this.db.set("cursor", { page: 7, token: "tok-abc" });
      this.db.set("deployedWith", this.label(0));
      this.$emit({
        hook: "deploy",
        prefix: this.prefix,
        label: this.label(0),
        hasDb: typeof this.db.get === "function" && typeof this.db.set === "function",
        cursorSeenInHook: this.db.get("cursor"),
      });
    },
  },
  async run(event) {
    const cursor = this.db.get("cursor");
    this.db.set("cursor", { ...cursor, page: cursor.page + 1 });
    this.$emit({ cursor, deployedWith: this.db.get("deployedWith"), label: this.label(cursor.page), event });
  },
};
"""

SECRET = "whsec_9f8e7d6c5b4a39281706f5e4d3"
TOKEN = "gho_16C7e42F292c6912E7710c838347Ae178B4a"


# helpers


def create(api: httpx.Client, params: dict | None = None, **body: Any) -> dict:
    r = api.post("/sources", json=body, params=params or {})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def echo(n: int = 0, name: str = "My Source") -> str:
    return ECHO.format(name=name, key=f"sources-api-echo-{n}")


def summaries(api: httpx.Client, source_id: str, event_name: str = "") -> list[dict]:
    r = api.get(f"/sources/{source_id}/event_summaries", params={"expand": "event", "event_name": event_name})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def wait_events(api: httpx.Client, source_id: str, count: int, event_name: str = "", timeout: float = 60) -> list:
    """Polls event summaries (newest first) until at least `count` events are there."""
    deadline = time.monotonic() + timeout
    while True:
        items = summaries(api, source_id, event_name)
        if len(items) >= count:
            return items
        if time.monotonic() > deadline:
            errors = summaries(api, source_id, "$errors")
            raise AssertionError(f"{len(items)} of {count} events after {timeout}s: {items}; errors: {errors}")
        time.sleep(0.05)


def events_of(items: list[dict]) -> list:
    return [i["event"] for i in items]


def hooks_seen(api: httpx.Client, source_id: str) -> list[str]:
    """The hook names the lifecycle component recorded, oldest first."""
    return [e["hook"] for e in reversed(events_of(summaries(api, source_id))) if "hook" in e]


def registry_component(api: httpx.Client, key: str, timeout: float = 120) -> dict:
    """The shipped registry is published in the background when the service starts."""
    deadline = time.monotonic() + timeout
    while True:
        r = api.get(f"/components/registry/{key}")
        if r.status_code == 200:
            return r.json()["data"]
        assert time.monotonic() < deadline, f"registry component {key} not published: {r.text}"
        time.sleep(0.2)


# creating (by code, by saved id, names and slugs, unknown keys: tests/api/test_sources.py)


def test_create_by_registry_key_schedule(api: httpx.Client) -> None:
    published = registry_component(api, "headwater-schedule")
    data = create(api, component_key="headwater-schedule", configured_props={"timer": {"intervalSeconds": 7200}})
    assert data["component_id"] == published["id"]
    assert data["name"] == "schedule" and data["name_slug"] == "schedule"
    assert data["configured_props"] == {"timer": {"cron": None, "interval_seconds": 7200}}
    before = int(time.time())
    assert api.post(f"/sources/{data['id']}/run").status_code == 202
    [item] = wait_events(api, data["id"], 1)
    assert item["event"]["interval_seconds"] == 7200
    assert before - 1 <= item["event"]["timestamp"] <= int(time.time()) + 1


def test_create_by_registry_key_http(server: Server, api: httpx.Client) -> None:
    published = registry_component(api, "headwater-http")
    data = create(api, component_key="headwater-http")
    assert data["component_id"] == published["id"]
    url = data["configured_props"]["http"]["endpoint_url"]
    assert set(data["configured_props"]) == {"http"}
    assert re.fullmatch(re.escape(server.base_url) + r"/http/en_[A-Za-z0-9_-]{20,}", url), url


# prop validation

# Each kind of invalid prop is tests/api/test_sources.py (the tracker's definition as describe
# gives it, on the fakes); here one on create and one on update, through the real describe.


def test_create_rejects_invalid_prop(api: httpx.Client) -> None:
    override, prop = {"maxResults": 51}, "maxResults"
    r = api.post("/sources", json={"component_code": component("issue_tracker.mjs"),
                                   "configured_props": tracker_props(override)})
    assert_422(r, prop)
    assert api.get("/users/me/sources").json()["page_info"]["total_count"] == 0


def test_update_rejects_invalid_prop_and_keeps_source(api: httpx.Client) -> None:
    override, prop = {"region": "US East (N. Virginia)"}, "region"
    src = create(api, component_code=component("issue_tracker.mjs"), configured_props=TRACKER_VALID)
    r = api.put(f"/sources/{src['id']}", json={"configured_props": tracker_props(override)})
    assert_422(r, prop)
    assert api.get(f"/sources/{src['id']}").json()["data"] == src


# all problems at once, defaults, integer bounds, replacing and keeping props and the cron form are
# tests/api/test_sources.py


# additionalProps / reloadProps


def test_additional_prop_is_required(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_code": component("dynamic_feed.mjs"),
                                   "configured_props": {"mode": "poll"}})
    assert_422(r, "feedUrl")


def test_additional_prop_is_validated(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_code": component("dynamic_feed.mjs"),
                                   "configured_props": {"mode": "poll", "feedUrl": "https://example.com/feed.xml",
                                                        "everyMinutes": 0}})
    assert_422(r, "everyMinutes")
    r = api.post("/sources", json={"component_code": component("dynamic_feed.mjs"),
                                   "configured_props": {"mode": "poll", "feedUrl": ["https://example.com/feed.xml"]}})
    assert_422(r, "feedUrl")


def test_additional_prop_not_offered_is_unknown(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_code": component("dynamic_feed.mjs"),
                                   "configured_props": {"mode": "webhook", "feedUrl": "https://example.com/feed.xml"}})
    assert_422(r, "feedUrl")


def test_additional_props_merged_and_seen_by_run(api: httpx.Client) -> None:
    feed = "https://example.com/feed.xml"
    data = create(api, component_code=component("dynamic_feed.mjs"),
                  configured_props={"mode": "poll", "feedUrl": feed})
    assert api.post(f"/sources/{data['id']}/run", json={"ping": 1}).status_code == 202
    [item] = wait_events(api, data["id"], 1)
    assert item["event"] == {"mode": "poll", "feedUrl": feed, "everyMinutes": 15, "event": {"ping": 1}}


def test_additional_props_in_response(api: httpx.Client) -> None:
    feed = "https://example.com/feed.xml"
    data = create(api, component_code=component("dynamic_feed.mjs"),
                  configured_props={"mode": "poll", "feedUrl": feed})
    expected = {"mode": "poll", "feedUrl": feed, "everyMinutes": 15}
    assert data["configured_props"] == expected
    assert api.get(f"/sources/{data['id']}").json()["data"]["configured_props"] == expected


def test_additional_props_configuration_error_is_422(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_code": component("dynamic_feed.mjs"),
                                   "configured_props": {"mode": "email"}})
    assert r.status_code == 422, r.text
    assert 'Unknown delivery mode "email"' in r.json()["error"]


def test_update_switching_mode_requires_the_new_props(api: httpx.Client) -> None:
    src = create(api, component_code=component("dynamic_feed.mjs"), configured_props={"mode": "webhook"})
    r = api.put(f"/sources/{src['id']}", json={"configured_props": {"mode": "poll"}})
    assert_422(r, "feedUrl")
    r = api.put(f"/sources/{src['id']}", json={"configured_props": {"mode": "poll", "feedUrl": "https://e.com/f"}})
    assert r.status_code == 200, r.text


# secrets and app auth


def source_texts(api: httpx.Client, source_id: str) -> list[str]:
    return [
        api.get(f"/sources/{source_id}").text,
        api.get("/users/me/sources").text,
        api.get("/users/me/sources", params={"limit": 100}).text,
    ]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_secret_masked_everywhere_and_plaintext_in_component(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_code": component("signed_secret.mjs"),
                                   "configured_props": {"signingSecret": SECRET}})
    assert r.status_code == 200, r.text
    assert SECRET not in r.text
    data = r.json()["data"]
    assert data["configured_props"] == {"signingSecret": MASK, "channel": "general"}
    for text in source_texts(api, data["id"]):
        assert SECRET not in text
        assert MASK in text

    # The activate hook saw the plaintext.
    [activated] = summaries(api, data["id"])
    assert activated["event"] == {"hook": "activate", "secretLength": len(SECRET), "fingerprint": sha256(SECRET)}

    # So does a run, and the deploy hook's this.db write is visible to it.
    payload = {"orderId": "ord_1", "total": 12}
    assert api.post(f"/sources/{data['id']}/run", json=payload).status_code == 202
    ran = wait_events(api, data["id"], 2)[0]["event"]
    expected_sig = hmac.new(SECRET.encode(), json.dumps(payload, separators=(",", ":")).encode(),
                            hashlib.sha256).hexdigest()
    assert ran == {"signature": expected_sig, "secretLength": len(SECRET),
                   "fingerprintAtDeploy": sha256(SECRET), "channel": "general"}


def test_secret_not_stored_in_plaintext(server: Server, api: httpx.Client) -> None:
    secret = "whsec_stored-" + hashlib.md5(str(time.time()).encode()).hexdigest()
    create(api, component_code=component("signed_secret.mjs"), configured_props={"signingSecret": secret})
    for path in server.data_dir.glob("headwater.db*"):
        assert secret.encode() not in path.read_bytes(), path.name


def test_update_with_mask_keeps_secret(api: httpx.Client) -> None:
    src = create(api, component_code=component("signed_secret.mjs"), configured_props={"signingSecret": SECRET})
    r = api.put(f"/sources/{src['id']}", json={"configured_props": {"signingSecret": MASK, "channel": "alerts"}})
    assert r.status_code == 200, r.text
    assert SECRET not in r.text
    assert r.json()["data"]["configured_props"] == {"signingSecret": MASK, "channel": "alerts"}
    for text in source_texts(api, src["id"]):
        assert SECRET not in text
    newest = summaries(api, src["id"])[0]["event"]
    assert newest == {"hook": "activate", "secretLength": len(SECRET), "fingerprint": sha256(SECRET)}


def test_update_with_new_secret_replaces_it(api: httpx.Client) -> None:
    src = create(api, component_code=component("signed_secret.mjs"), configured_props={"signingSecret": SECRET})
    new_secret = "whsec_rotated_0123456789"
    r = api.put(f"/sources/{src['id']}", json={"configured_props": {"signingSecret": new_secret}})
    assert r.status_code == 200, r.text
    assert new_secret not in r.text and r.json()["data"]["configured_props"]["signingSecret"] == MASK
    newest = summaries(api, src["id"])[0]["event"]
    assert newest["fingerprint"] == sha256(new_secret) and newest["secretLength"] == len(new_secret)


def test_app_auth_seen_by_app_methods_and_masked(api: httpx.Client) -> None:
    r = api.post("/sources", json={
        "component_code": component("github_app.mjs"),
        "configured_props": {"github": {"$auth": {"oauth_access_token": TOKEN}}, "repo": "octo/hello"},
    })
    assert r.status_code == 200, r.text
    assert TOKEN not in r.text
    data = r.json()["data"]
    assert data["configured_props"] == {"github": {"$auth": MASK}, "repo": "octo/hello"}
    for text in source_texts(api, data["id"]):
        assert TOKEN not in text
    [deployed] = summaries(api, data["id"])
    assert deployed["event"] == {"hook": "deploy", "token": TOKEN, "authorization": f"Bearer {TOKEN}",
                                 "direct": TOKEN, "repo": "octo/hello"}


# lifecycle hooks
# (an update with new code, deactivate and reactivate, and a deploy hook that throws are
# tests/api/test_sources.py, on the fakes; here the hooks as Node runs them: db, props, fetch)


def test_create_runs_deploy_then_activate(api: httpx.Client) -> None:
    data = create(api, component_code=component("lifecycle.mjs"))
    items = summaries(api, data["id"])
    assert events_of(items) == [
        {"hook": "activate", "label": "v1", "calls": 2},
        {"hook": "deploy", "label": "v1", "calls": 1},
    ]
    assert [i["metadata"]["summary"] for i in items] == ["activate hook", "deploy hook"]
    assert all(i["metadata"]["emitter_id"] == data["id"] and i["metadata"]["name"] == "" for i in items)


def test_update_runs_deactivate_then_activate_same_id(api: httpx.Client) -> None:
    src = create(api, component_code=component("lifecycle.mjs"))
    r = api.put(f"/sources/{src['id']}", json={"configured_props": {"label": "v2"}})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["id"] == src["id"] and data["active"] is True
    assert data["configured_props"] == {"label": "v2"}
    assert data["created_at"] == src["created_at"] and data["updated_at"] >= src["updated_at"]
    assert list(reversed(events_of(summaries(api, src["id"])))) == [
        {"hook": "deploy", "label": "v1", "calls": 1},
        {"hook": "activate", "label": "v1", "calls": 2},
        {"hook": "deactivate", "label": "v1", "calls": 3},
        {"hook": "activate", "label": "v2", "calls": 4},
    ]


def test_delete_runs_deactivate_and_removes_source_and_events(server: Server, api: httpx.Client) -> None:
    witness = create(api, component_code=WITNESS)
    url = witness["configured_props"]["http"]["endpoint_url"]
    src = create(api, component_code=component("lifecycle.mjs"), configured_props={"witnessUrl": url})
    assert len(summaries(api, src["id"])) == 2

    r = api.delete(f"/sources/{src['id']}")
    assert r.status_code == 204 and r.content == b""

    [report] = wait_events(api, witness["id"], 1)
    assert report["event"] == {"hook": "deactivate", "source": src["id"], "label": "v1"}
    assert api.get(f"/sources/{src['id']}").status_code == 404
    assert api.get(f"/sources/{src['id']}/event_summaries").status_code == 404
    assert api.delete(f"/sources/{src['id']}").status_code == 404
    listed = api.get("/users/me/sources").json()["data"]
    assert [s["id"] for s in listed] == [witness["id"]]
    with sqlite3.connect(f"file:{server.data_dir / 'headwater.db'}?mode=ro", uri=True) as db:
        (left,) = db.execute("SELECT count(*) FROM events WHERE emitter_id = ?", (src["id"],)).fetchone()
    assert left == 0


def test_delete_inactive_source_skips_deactivate(api: httpx.Client) -> None:
    witness = create(api, component_code=WITNESS)
    url = witness["configured_props"]["http"]["endpoint_url"]
    src = create(api, component_code=component("lifecycle.mjs"), configured_props={"witnessUrl": url})
    assert api.put(f"/sources/{src['id']}", json={"active": False}).status_code == 200
    wait_events(api, witness["id"], 1)  # the deactivate of PUT active:false
    assert api.delete(f"/sources/{src['id']}").status_code == 204
    time.sleep(1)
    assert len(summaries(api, witness["id"])) == 1


def test_deploy_hook_historical_events_ordered_by_ts(api: httpx.Client) -> None:
    data = create(api, component_code=HISTORY)
    items = summaries(api, data["id"])
    assert [i["event"]["id"] for i in items] == ["ord_3", "ord_2", "ord_1"]
    assert [i["metadata"]["ts"] for i in items] == [1700000300000, 1700000200000, 1700000100000]
    assert [i["metadata"]["id"] for i in items] == ["ord_3", "ord_2", "ord_1"]
    assert [i["metadata"]["summary"] for i in items] == ["Order ord_3", "Order ord_2", "Order ord_1"]
    ids = [tuple(int(p) for p in i["id"].split("-")) for i in items]
    assert all(EVENT_ID.match(i["id"]) for i in items)
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 3


def test_activate_hook_that_throws_on_update_keeps_old_source(api: httpx.Client) -> None:
    code = component("lifecycle.mjs")
    src = create(api, component_code=code)
    broken = code.replace('this.record("activate");', 'throw new Error("quota of webhooks reached");')
    r = api.put(f"/sources/{src['id']}", json={"component_code": broken, "configured_props": {"label": "v2"}})
    assert r.status_code == 422, r.text
    assert "quota of webhooks reached" in r.json()["error"]
    after = api.get(f"/sources/{src['id']}").json()["data"]
    assert after["component_id"] == src["component_id"]
    assert after["configured_props"] == {"label": "v1"}


def test_hooks_and_runs_see_props_db_and_methods(api: httpx.Client) -> None:
    data = create(api, component_code=COUNTER, configured_props={"prefix": "acme"})
    [deployed] = summaries(api, data["id"])
    assert deployed["event"] == {"hook": "deploy", "prefix": "acme", "label": "acme-0", "hasDb": True,
                                 "cursorSeenInHook": {"page": 7, "token": "tok-abc"}}

    assert api.post(f"/sources/{data['id']}/run", json={"n": 1}).status_code == 202
    first = wait_events(api, data["id"], 2)[0]["event"]
    assert first == {"cursor": {"page": 7, "token": "tok-abc"}, "deployedWith": "acme-0", "label": "acme-7",
                     "event": {"n": 1}}

    assert api.post(f"/sources/{data['id']}/run", json={"n": 2}).status_code == 202
    second = wait_events(api, data["id"], 3)[0]["event"]
    assert second["cursor"] == {"page": 8, "token": "tok-abc"} and second["label"] == "acme-8"


# manual runs


def test_manual_run_emits_body(api: httpx.Client) -> None:
    data = create(api, component_code=echo())
    payload = {"orderId": "ord_77", "status": "paid", "lines": [{"sku": "A1", "qty": 2}]}
    before_ms = int(time.time() * 1000)
    r = api.post(f"/sources/{data['id']}/run", json=payload)
    assert r.status_code == 202, r.text
    [item] = wait_events(api, data["id"], 1)
    assert item["event"] == payload
    assert EVENT_ID.match(item["id"])
    assert before_ms - 1000 <= item["indexed_at_ms"] <= int(time.time() * 1000) + 1000
    meta = item["metadata"]
    assert meta["emitter_id"] == data["id"]
    assert meta["name"] == ""
    assert meta["summary"] == "echo"
    assert meta["id"] == "ord_77"
    assert isinstance(meta["emit_id"], str) and meta["emit_id"]
    assert before_ms - 1000 <= meta["ts"] <= int(time.time() * 1000) + 1000


def test_manual_run_of_timer_source_gets_timer_event(api: httpx.Client) -> None:
    data = create(api, component_code=HEARTBEAT, configured_props={"timer": {"intervalSeconds": 3600}})
    assert data["configured_props"] == {"timer": {"cron": None, "interval_seconds": 3600}}
    before = int(time.time())
    r = api.post(f"/sources/{data['id']}/run")
    assert r.status_code == 202, r.text
    [item] = wait_events(api, data["id"], 1)
    assert set(item["event"]) == {"timestamp", "interval_seconds"}
    assert item["event"]["interval_seconds"] == 3600
    assert before - 1 <= item["event"]["timestamp"] <= int(time.time()) + 1


def test_run_error_goes_to_errors_channel(api: httpx.Client) -> None:
    code = echo().replace("this.$emit(event", 'throw new Error("upstream said 503"); this.$emit(event')
    data = create(api, component_code=code)
    assert api.post(f"/sources/{data['id']}/run", json={"orderId": "x"}).status_code == 202
    [item] = wait_events(api, data["id"], 1, event_name="$errors")
    assert item["metadata"]["name"] == "$errors"
    assert item["event"]["error"]["code"] == "RUNTIME_ERROR"
    assert "upstream said 503" in item["event"]["error"]["message"]
    assert item["event"]["original_event"] == {"orderId": "x"}
    assert summaries(api, data["id"]) == []


def test_console_output_goes_to_logs_channel(api: httpx.Client) -> None:
    code = echo().replace("this.$emit(event", 'console.log("got order", event.orderId); this.$emit(event')
    data = create(api, component_code=code)
    assert api.post(f"/sources/{data['id']}/run", json={"orderId": "ord_5"}).status_code == 202
    [log] = wait_events(api, data["id"], 1, event_name="$logs")
    assert log["event"]["level"] == "log"
    assert log["event"]["message"] == "got order ord_5"


# bad input


# Every source route with an unknown, malformed or foreign id, mistyped bodies, actions, foreign
# components and orgs are tests/api/test_sources.py; here a foreign delete (it would run the real
# deactivate hook) and code the real describe cannot load.


def test_other_users_source_is_404(server: Server, api: httpx.Client) -> None:
    method, path, body = "DELETE", "/sources/{id}", None
    src = create(api, component_code=component("lifecycle.mjs"))
    stranger = new_user(server)
    with client_for(server, stranger.api_key) as c:
        r = c.request(method, path.format(id=src["id"]), json=body)
        assert r.status_code == 404, r.text
        assert set(r.json()) == {"error"}
        assert c.get("/users/me/sources").json()["data"] == []
    # Untouched for its owner: still there, still active, no extra hooks ran.
    assert api.get(f"/sources/{src['id']}").json()["data"] == src
    assert hooks_seen(api, src["id"]) == ["deploy", "activate"]


def test_code_that_does_not_load_is_422(api: httpx.Client) -> None:
    for code in ("export default {", "export default { version: '1' , props: {} }", "module.exports = 42;"):
        r = api.post("/sources", json={"component_code": code})
        assert r.status_code == 422, (code, r.text)
        assert set(r.json()) <= {"error", "details"}
    assert api.get("/users/me/sources").json()["page_info"]["total_count"] == 0


