"""`POST /v1/components/run` in both deployments (locally the Node runner pool, on AWS the runner
Lambda): the code runs once, what it did comes back, nothing is kept but the caller's usage."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.both_modes

SOURCE = """export default {
  name: "Trial", version: "1",
  props: { http: { type: "$.interface.http", customResponse: true }, db: "$.service.db", times: { type: "integer" } },
  async run(event) {
    const seen = (this.db.get("seen") ?? 0) + this.times;
    this.db.set("seen", seen);
    console.log(`seen ${seen}`);
    this.$emit({ n: event.body.n, seen }, { summary: `n=${event.body.n}` });
    this.http.respond({ status: 201, body: { ok: true } });
    if (event.body.n < 0) throw new Error("negative");
  },
};
"""

ACTION = """export default {
  name: "Double", version: "1", type: "action",
  props: { n: { type: "integer", optional: true } },
  async run({ $, steps }) { $.export("$summary", "doubled"); return 2 * (this.n ?? steps.trigger.event.n); },
};
"""


def test_a_component_runs_once_and_nothing_is_kept_but_the_usage(api: httpx.Client) -> None:
    used = api.get("/users/me").json()["data"]["daily_invocations_used"]
    body = {"component_code": SOURCE, "event": {"body": {"n": 2}}, "configured_props": {"times": 3},
            "db": {"seen": 1}}
    ran = api.post("/components/run", json=body).json()["data"]
    assert ran["emits"] == [{"event": {"n": 2, "seen": 4}, "metadata": {"summary": "n=2"}}]
    assert (ran["db_writes"], ran["db"], ran["error"]) == ({"seen": 4}, {"seen": 4}, None)
    assert [log["message"] for log in ran["logs"]] == ["seen 4"]
    assert ran["response"]["status"] == 201

    failed = api.post("/components/run", json={**body, "event": {"body": {"n": -1}}}).json()["data"]
    assert failed["error"]["message"] == "negative" and "Error: negative" in failed["error"]["stack"]
    assert failed["emits"][0]["event"]["n"] == -1  # what it did before it threw

    action = api.post("/components/run", json={"component_code": ACTION, "event": {"n": 21}}).json()["data"]
    assert (action["return_value"], action["exports"]) == (42, {"$summary": "doubled"})

    assert api.get("/users/me/sources").json()["data"] == []
    assert api.get("/users/me/components").json()["data"] == []
    assert api.get("/users/me").json()["data"]["daily_invocations_used"] == used + 3


def test_code_that_does_not_load_or_props_that_do_not_fit_are_422(api: httpx.Client) -> None:
    broken = api.post("/components/run", json={"component_code": "export default {"})
    assert broken.status_code == 422
    wrong = api.post("/components/run", json={"component_code": SOURCE, "configured_props": {"times": "x"}})
    assert wrong.status_code == 422 and "times" in wrong.json()["details"]
    unknown = api.post("/components/run", json={"component_code": SOURCE, "props": {}})
    assert unknown.status_code == 400 and "props" in unknown.json()["error"] + str(unknown.json().get("details"))
