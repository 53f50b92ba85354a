"""A new version tried on a source's recorded traffic, end to end on both backends
(`POST /v1/sources/{id}/trial`, docs/trials.md): the diff shows a changed, an added and a removed
emit run by run, the trial starts from `this.db` as it was before the first run tried, and the
source is left untouched (its events, its state and its webhook deliveries counted before and
after). Runs are asynchronous: every wait polls to a deadline, never a fixed sleep."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.e2e.test_routing import Receiver, subscribe, wait_delivery, webhook
from tests.e2e.test_run_records import wait_runs
from tests.e2e.test_runs import wait_events

pytestmark = pytest.mark.both_modes

SECRET = "tok-5d0c9a7e31"

LIVE = """export default {
  name: "Orders", version: "1.0.0",
  props: { http: "$.interface.http", db: "$.service.db", token: { type: "string", secret: true } },
  async run(event) {
    const n = (this.db.get("n") || 0) + 1;
    this.db.set("n", n);
    const o = event.body;
    this.$emit({ order: o.id, total: o.total, n }, { id: `o-${o.id}`, summary: `order ${o.id}` });
  },
};
"""

# Totals in cents, no order 2, and an audit event per order: one changed, one removed, two added;
# order 3 is the same as live only if `n` was counted from the state before the first run tried.
TRIED = """export default {
  name: "Orders", version: "2.0.0",
  props: { http: "$.interface.http", db: "$.service.db", token: { type: "string", secret: true } },
  async run(event) {
    const n = (this.db.get("n") || 0) + 1;
    this.db.set("n", n);
    const o = event.body;
    console.log(`order ${o.id} with ${this.token}`);
    if (o.id === 2) return;
    this.$emit({ order: o.id, total: o.id === 1 ? o.total * 100 : o.total, n }, { id: `o-${o.id}`,
      summary: `order ${o.id}` });
    if (o.id === 1) this.$emit({ audit: o.id, token: this.token }, { id: `a-${o.id}`, name: "audit" });
  },
};
"""


def counts(api: httpx.Client, source_id: str, hook_id: str) -> dict[str, Any]:
    """What a trial must not change: the source's events, its state (the next run's count) aside."""
    events = api.get(f"/sources/{source_id}/event_summaries", params={"limit": 100}).json()["page_info"]
    audit = api.get(f"/sources/{source_id}/event_summaries", params={"event_name": "audit"}).json()["page_info"]
    runs = api.get(f"/sources/{source_id}/runs", params={"limit": 100}).json()["page_info"]
    deliveries = api.get(f"/webhooks/{hook_id}/deliveries").json()["page_info"]
    return {"events": events["total_count"], "audit": audit["total_count"], "runs": runs["total_count"],
            "deliveries": deliveries["total_count"]}


def test_a_trial_diffs_each_run_and_leaves_the_source_untouched(api: httpx.Client) -> None:
    receiver = Receiver()
    try:
        r = api.post("/sources", json={"component_code": LIVE, "configured_props": {"token": SECRET}})
        assert r.status_code == 200, r.text
        source = r.json()["data"]
        source_id, url = source["id"], source["configured_props"]["http"]["endpoint_url"]
        hook = webhook(api, receiver.url)
        subscribe(api, source_id, hook["id"])
        for n, order in enumerate(({"id": 1, "total": 5}, {"id": 2, "total": 7}, {"id": 3, "total": 9}), 1):
            assert httpx.post(url, json=order, timeout=60).status_code == 200
            wait_events(api, source_id, n)
        wait_runs(api, f"/sources/{source_id}", lambda runs: len(runs) == 3, "three runs on record")
        wait_delivery(api, hook["id"], lambda d: d["status"] == "succeeded")
        before = counts(api, source_id, hook["id"])

        r = api.post(f"/sources/{source_id}/trial", json={"component_code": TRIED, "runs": 3})
        assert r.status_code == 200, r.text
        trial = r.json()["data"]
        assert SECRET not in json.dumps(trial)
        assert trial["state_exact"] is True and trial["state_note"] is None
        assert (trial["runs_tried"], trial["runs_skipped"]) == (3, 0)
        first, second, third = trial["runs"]
        assert [run["trigger"]["body"]["id"] for run in trial["runs"]] == [1, 2, 3]  # oldest first
        [changed] = first["changed"]
        assert changed["id"] == "o-1" and changed["live"]["event"] == {"order": 1, "total": 5, "n": 1}
        assert changed["trial"]["event"] == {"order": 1, "total": 500, "n": 1}
        [added] = first["added"]
        assert added["channel"] == "audit" and added["trial"]["event"] == {"audit": 1, "token": "[secret]"}
        assert first["trial"]["logs"][0]["message"] == "order 1 with [secret]"
        assert (second["added"], second["changed"], second["unchanged"]) == ([], [], 0)
        [removed] = second["removed"]
        assert removed["id"] == "o-2" and removed["live"]["event"] == {"order": 2, "total": 7, "n": 2}
        assert (third["added"], third["removed"], third["changed"], third["unchanged"]) == ([], [], [], 1)
        assert trial["totals"] == {"added": 1, "removed": 1, "changed": 1, "unchanged": 1, "unknown": 0,
                                   "errors": 0}

        assert counts(api, source_id, hook["id"]) == before  # nothing stored, delivered or recorded
        assert len(receiver.requests) == 3
        assert httpx.post(url, json={"id": 4, "total": 1}, timeout=60).status_code == 200
        [newest, *_] = wait_events(api, source_id, 4, expand="event")
        assert newest["event"] == {"order": 4, "total": 1, "n": 4}  # the state the trial left alone
    finally:
        receiver.close()


def test_a_trial_answers_404_409_and_422(api: httpx.Client) -> None:
    assert api.post("/sources/dc_nosuchsource0000000000000/trial", json={"component_code": LIVE}).status_code == 404
    r = api.post("/sources", json={"component_code": LIVE.replace("Orders", "Quiet"),
                                   "configured_props": {"token": SECRET}})
    assert r.status_code == 200, r.text
    source_id = r.json()["data"]["id"]
    r = api.post(f"/sources/{source_id}/trial", json={"component_code": TRIED})
    assert r.status_code == 409, r.text  # no run on record yet
    assert api.post(f"/sources/{source_id}/run", json={"body": {"id": 9, "total": 1}}).status_code == 202
    wait_runs(api, f"/sources/{source_id}", lambda runs: len(runs) == 1, "the manual run's record")
    for body in ({"component_code": TRIED, "runs": 0}, {"component_code": TRIED, "runs": 101},
                 {"component_code": "export default {"}, {"component_code": TRIED, "component_id": "sc_x"}):
        r = api.post(f"/sources/{source_id}/trial", json=body)
        assert r.status_code == 422, (body, r.text)
