"""Connected accounts end to end (issue 22), on both backends: a real component whose app prop
names an account by `authProvisionId` reads `this.<app>.$auth` in its run; the account updated,
the next run sees the new key; deleted, the next run leaves an ACCOUNT_NOT_FOUND `$errors`
event. No key appears in any answer or in the server's log. And an app whose code only shows
`$auth` (the registry's `schedule`) deploys without one. The CLI's `accounts` verbs, too."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from headwater.cli import cli
from tests.cli.test_cli_offline import saved_login
from tests.conftest import Server, User
from tests.e2e.test_sources_api import events_of, wait_events

KEYED = """export default {
  name: "Keyed %(tag)s", key: "keyed-%(tag)s", version: "0.0.1", type: "source",
  props: {
    keyed: { type: "app", app: "keyed_app", methods: { key() { return this.$auth.api_key } } },
    http: "$.interface.http",
  },
  async run(event) {
    // the key's last characters only: the whole key must never leave the run
    this.$emit({ tail: this.keyed.key().slice(-8), fields: Object.keys(this.keyed.$auth) })
  },
}
"""

SCHEDULE_LIKE = """const schedule = {
  type: "app", app: "schedule",
  propDefinitions: { cron: { type: "$.interface.timer", default: { intervalSeconds: 3600 } } },
  methods: {
    // this.$auth contains connected account data
    authKeys() { console.log(Object.keys(this.$auth)) },
  },
}
export default {
  name: "Custom Interval %(tag)s", key: "schedule-like-%(tag)s", version: "0.0.2", type: "source",
  props: { schedule, cron: { propDefinition: [schedule, "cron"] } },
  %(run)s
}
"""


@pytest.mark.both_modes
def test_a_run_reads_the_accounts_current_credentials_and_a_deleted_account_fails_the_next_run(
        server: Server, api: httpx.Client) -> None:
    key, new_key = "sk-" + uuid.uuid4().hex, "sk-" + uuid.uuid4().hex
    answers: list[str] = []

    def answered(r: httpx.Response) -> dict:
        answers.append(r.text)
        assert r.status_code < 300, r.text
        return r.json() if r.content else {}

    account = answered(api.post("/accounts", json={"app": "keyed_app", "name": "Keyed",
                                                   "credentials": {"api_key": key}}))["data"]
    source = answered(api.post("/sources", json={
        "component_code": KEYED % {"tag": uuid.uuid4().hex[:8]},
        "configured_props": {"keyed": {"authProvisionId": account["id"]}}}))["data"]
    assert source["configured_props"]["keyed"] == {"authProvisionId": account["id"]}

    answered(api.post(f"/sources/{source['id']}/run", json={}))
    assert events_of(wait_events(api, source["id"], 1)) == [{"tail": key[-8:], "fields": ["api_key"]}]
    answered(api.patch(f"/accounts/{account['id']}", json={"credentials": {"api_key": new_key}}))
    answered(api.post(f"/sources/{source['id']}/run", json={}))
    assert events_of(wait_events(api, source["id"], 2))[0] == {"tail": new_key[-8:], "fields": ["api_key"]}

    answered(api.delete(f"/accounts/{account['id']}"))
    answered(api.post(f"/sources/{source['id']}/run", json={"n": 3}))
    [error] = wait_events(api, source["id"], 1, "$errors")
    assert error["event"]["error"]["code"] == "ACCOUNT_NOT_FOUND"
    assert account["id"] in error["event"]["error"]["message"]
    assert error["event"]["original_event"] == {"n": 3}

    answers += [api.get(f"/sources/{source['id']}").text, api.get("/users/me/accounts").text,
                json.dumps(wait_events(api, source["id"], 2))]
    log = (server.data_dir / "server.log").read_text(errors="replace")
    for secret in (key, new_key):
        assert all(secret not in text for text in answers)
        assert secret not in log


def test_an_app_that_only_shows_auth_deploys_without_an_account(api: httpx.Client) -> None:
    code = SCHEDULE_LIKE % {"tag": uuid.uuid4().hex[:8], "run": ""}
    component = api.post("/components", json={"component_code": code})
    assert component.status_code == 200, component.text
    app_prop = next(p for p in component.json()["data"]["configurable_props"] if p["name"] == "schedule")
    assert app_prop["auth_type"] == "none"
    r = api.post("/sources", json={"component_code": code})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["configured_props"]["cron"]["interval_seconds"] == 3600

    # the same app, but the component reads the account's key: it needs one
    reads = SCHEDULE_LIKE % {"tag": uuid.uuid4().hex[:8], "run": "run() { return this.schedule.$auth.api_key },"}
    r = api.post("/sources", json={"component_code": reads})
    assert r.status_code == 422 and "schedule" in r.json()["details"], r.text


@pytest.fixture
def env(server: Server, user: User, tmp_path: Path) -> dict[str, str]:
    """The CLI's environment, logged in as `user`."""
    env = {**server.env, "HEADWATER_CONFIG": str(tmp_path / "cli.json")}
    saved_login(env, server.base_url, user.api_key)
    return env


def test_the_cli_manages_accounts_and_never_prints_a_credential(env: dict[str, str]) -> None:
    """In this process (click's runner: the verbs' own code, real HTTP to the server), to spare a
    Python start per verb; the one-line errors of `headwater accounts` as a process are in
    tests/cli and tests/e2e/test_cli.py."""
    key = "sk-" + uuid.uuid4().hex
    outputs: list[str] = []

    def hw_in(*args: str, stdin: str = "") -> str:
        result = CliRunner().invoke(cli, ["accounts", *args], input=stdin, env=env)
        outputs.append(result.output)
        assert result.exit_code == 0, result.output
        return result.output

    made = json.loads(hw_in("create", "keyed_app", "--name", "Work", "--credentials", "-", "--json",
                            stdin=json.dumps({"api_key": key})))
    assert made["id"].startswith("apn_") and made["fields"] == ["api_key"]
    updated = json.loads(hw_in("update", made["id"], "--credential", "region=eu", "--json"))
    assert updated["fields"] == ["api_key", "region"]
    assert hw_in("list") == f"{made['id']}  keyed_app  Work  active  api_key,region\n"
    assert "fields     api_key, region" in hw_in("show", made["id"])
    assert json.loads(hw_in("delete", made["id"], "--json")) == {"deleted": made["id"]}
    assert hw_in("list") == "no accounts\n"
    assert all(key not in out for out in outputs)
