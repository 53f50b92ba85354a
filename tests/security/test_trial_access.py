"""Issue 34: a trial on recorded traffic (`POST /v1/sources/{id}/trial`) on both backends.

- A trial of another namespace's source is a 404 (never a 403), as is trying a component of
  another namespace on one's own source; nothing of the other source's runs is answered.
- A trial reaches only its own source's records: its inputs, its live events and its `this.db`,
  never another source's, even one of the same user.
- Secret values (secret props, an app's `$auth`, given with the trial or kept by the source) never
  appear in a trial's answer, wherever the code put them: logs, emits, the error, the live events.
"""

from __future__ import annotations

import json

import httpx

from tests.conftest import Server, client_for, new_user
from tests.e2e.test_run_records import wait_runs

SECRET = "s3cr3t-9f1e4c2b7a"
AUTH = "xoxb-a1b2c3d4e5f6"
NEW_SECRET = "n3w-s3cr3t-77aa19"

ECHO = """export default {
  name: "Echo", version: "1.0.0",
  props: { http: "$.interface.http", db: "$.service.db", token: { type: "string", secret: true },
           slack: { type: "app", app: "slack" } },
  async run(event) {
    this.db.set("last", event.body);
    this.$emit({ got: event.body, token: this.token, auth: this.slack.$auth }, { id: String(event.body.n) });
  },
};
"""

LEAKY = """export default {
  name: "Echo", version: "2.0.0",
  props: { http: "$.interface.http", db: "$.service.db", token: { type: "string", secret: true },
           slack: { type: "app", app: "slack" } },
  async run(event) {
    const last = JSON.stringify(this.db.get("last"));
    console.log(`token=${this.token} auth=${JSON.stringify(this.slack.$auth)} db=${last}`);
    this.$emit({ got: event.body, token: this.token, auth: this.slack.$auth, [this.token]: 1 },
               { id: String(event.body.n), summary: this.token });
    this.db.set("last", event.body);
    if (event.body.n === 1) throw new Error(`failing with ${this.token} and ${this.slack.$auth.oauth_access_token}`);
  },
};
"""


def source_with_runs(api: httpx.Client, marker: str, runs: int = 2) -> str:
    r = api.post("/sources", json={"component_code": ECHO, "configured_props": {
        "token": SECRET, "slack": {"$auth": {"oauth_access_token": AUTH}}}})
    assert r.status_code == 200, r.text
    source_id = r.json()["data"]["id"]
    for n in range(runs):
        assert api.post(f"/sources/{source_id}/run", json={"body": {"n": n, "marker": marker}}).status_code == 202
        wait_runs(api, f"/sources/{source_id}", lambda items, want=n + 1: len(items) == want, "the runs' records")
    return source_id


def test_a_trial_of_another_namespaces_source_is_a_404(server: Server) -> None:
    alice, bob = new_user(server, tier="paid"), new_user(server, tier="paid")
    with client_for(server, alice.api_key) as a, client_for(server, bob.api_key) as b:
        source_id = source_with_runs(a, "alice-private-1")
        component = a.post("/components", json={"component_code": LEAKY}).json()["data"]
        for body in ({"component_code": LEAKY}, {}, {"component_id": component["id"], "runs": 1}):
            r = b.post(f"/sources/{source_id}/trial", json=body)
            assert r.status_code == 404, r.text
            assert "alice-private" not in r.text and SECRET not in r.text
        own = source_with_runs(b, "bob-1", runs=1)
        r = b.post(f"/sources/{own}/trial", json={"component_id": component["id"]})
        assert r.status_code == 404, r.text  # Alice's saved component is not Bob's to try
        assert a.post(f"/sources/{source_id}/trial", json={"component_code": ECHO}).status_code == 200


def test_a_trial_reaches_only_its_own_sources_records(server: Server) -> None:
    alice, bob = new_user(server, tier="paid"), new_user(server, tier="paid")
    with client_for(server, alice.api_key) as a, client_for(server, bob.api_key) as b:
        source_with_runs(a, "alice-private-2")
        alice_second = source_with_runs(a, "alice-second")
        bob_source = source_with_runs(b, "bob-2")
        for client, source_id, mine in ((b, bob_source, "bob-2"), (a, alice_second, "alice-second")):
            r = client.post(f"/sources/{source_id}/trial", json={"component_code": LEAKY, "runs": 100})
            assert r.status_code == 200, r.text
            trial = r.json()["data"]
            tried = [run for run in trial["runs"] if not run["skipped"]]
            assert [run["trigger"]["body"]["marker"] for run in tried] == [mine, mine]
            assert trial["runs_skipped"] == 0 and trial["state_exact"] is True  # no deploy hook here
            # the first run starts from this source's state before it, the second from the first's write
            assert "db=undefined" in tried[0]["trial"]["logs"][0]["message"]
            assert f'"marker":"{mine}"' in tried[1]["trial"]["logs"][0]["message"]
            for other in ("alice-private-2", "alice-second", "bob-2"):
                if other != mine:
                    assert other not in r.text


def test_secrets_never_appear_in_a_trial_answer(server: Server) -> None:
    user = new_user(server, tier="paid")
    with client_for(server, user.api_key) as api:
        source_id = source_with_runs(api, "m")
        for body in ({"component_code": LEAKY},
                     {"component_code": LEAKY, "configured_props": {
                         "token": NEW_SECRET, "slack": {"$auth": {"oauth_access_token": AUTH}}}},
                     {"component_code": LEAKY, "configured_props": {"token": "[secret]", "slack": {
                         "$auth": {"oauth_access_token": NEW_SECRET}}}}):
            r = api.post(f"/sources/{source_id}/trial", json=body)
            assert r.status_code == 200, r.text
            text = json.dumps(r.json())
            for secret in (SECRET, AUTH, NEW_SECRET):
                assert secret not in text, (secret, body)
            first, second = r.json()["data"]["runs"]
            assert second["trial"]["error"]["message"] == "failing with [secret] and [secret]"
            assert first["changed"][0]["live"]["event"]["token"] == "[secret]"  # the live event's too
