"""Who may use a connected account, checked where its credentials are handed to code (issue 31):
end to end on a real service, each attack an ordinary user or org member tried against 583905a.

DECISIONS (Accounts): a personal account only by what its owner configured; an org's account by
what runs in that org; checked each time credentials are handed to code, whatever put the
reference there. A refused reference fails that call with ACCOUNT_NOT_FOUND and reveals nothing
more. Changing the code of a source that uses an account requires being allowed to use it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import Server, client_for, new_user
from tests.e2e.test_routing import EMITTER
from tests.e2e.test_runs import deploy
from tests.e2e.test_sources_api import events_of, wait_events
from tests.e2e.test_workflows import wait_for

APP = "keyed_app"

KEYED = """export default {
  name: "Keyed %(tag)s", version: "0.0.1", type: "source",
  props: { keyed: { type: "app", app: "keyed_app" }, http: "$.interface.http" },
  async run(event) { this.$emit({ tail: String(this.keyed.$auth.api_key).slice(-8) }) },
}
"""

# The new code an org member puts in place of the source's: it hands the whole key out.
LEAKER = """export default {
  name: "Keyed %(tag)s", version: "0.0.2", type: "source",
  props: { keyed: { type: "app", app: "keyed_app" }, http: "$.interface.http" },
  async run(event) { this.$emit({ tail: String(this.keyed.$auth.api_key).slice(-8), leaked: true }) },
}
"""

LEAK_STEP = """export default {
  name: "Leak %(tag)s", key: "leak-%(tag)s", version: "0.0.1", type: "action",
  props: { keyed: { type: "app", app: "keyed_app" } },
  async run({ $ }) { $.send.emit({ raw_event: { tail: String(this.keyed.$auth.api_key).slice(-8) } }) },
}
"""

# A reference to someone else's account baked into a prop's default, and an additionalProps that
# reads it: whatever `data` resolves to ends up as the default of a prop the API answers.
DEFAULTED = """export default {
  name: "Defaulted %(tag)s", version: "0.0.1", type: "source",
  props: {
    data: { type: "object", optional: true, default: { authProvisionId: "%(account)s" } },
    http: "$.interface.http",
  },
  async additionalProps() {
    const auth = this.data && this.data.$auth
    return { leaked: { type: "string", optional: true, default: auth ? String(auth.api_key).slice(-8) : "none" } }
  },
  async run(event) { this.$emit({ data: this.data }) },
}
"""

# An org component whose options() does its work in the runner's /tmp: it lists what is there and
# leaves a file behind.
TMP_OPTIONS = """import fs from "node:fs"
export default {
  name: "Tmp options %(tag)s", key: "tmp-options-%(tag)s", version: "0.0.1", type: "source",
  props: {
    pick: { type: "string", async options() {
      fs.writeFileSync("/tmp/left-by-options-%(tag)s", "x")
      return fs.readdirSync("/tmp")
    } },
    http: "$.interface.http",
  },
  async run(event) {},
}
"""

# A member's own source: writes a file of its own in its runner's /tmp and says what it finds there.
TMP_LOOKER = """import fs from "node:fs"
export default {
  name: "Tmp looker %(tag)s", version: "0.0.1", type: "source",
  props: { http: "$.interface.http" },
  async run(event) {
    fs.writeFileSync("/tmp/own-secret-%(tag)s", "secret")
    this.$emit({ files: fs.readdirSync("/tmp") })
  },
}
"""


@pytest.fixture
def server(local_server: Server) -> Server:
    """The session's local service: this module needs no settings of its own (each test makes its
    own users)."""
    return local_server


@dataclass
class Member:
    id: str
    api: httpx.Client


def member(server: Server) -> Member:
    user = new_user(server, tier="paid")
    return Member(user.id, client_for(server, user.api_key))


def org_of(server: Server, owner: Member, *members: Member) -> str:
    org = server.cli("orgs", "create", "--name", "org" + uuid.uuid4().hex[:8], "--owner", owner.id)["id"]
    for m in members:
        server.cli("orgs", "add-member", "--org", org, "--user", m.id)
    return str(org)


def account(who: Member, key: str, org_id: str | None = None) -> str:
    r = who.api.post("/accounts", params={"org_id": org_id} if org_id else None,
                     json={"app": APP, "credentials": {"api_key": key}})
    assert r.status_code == 200, r.text
    return str(r.json()["data"]["id"])


def tag() -> str:
    return uuid.uuid4().hex[:8]


def secret_key() -> str:
    return "sk-" + uuid.uuid4().hex


def workflow_from_expression(who: Member) -> tuple[str, str]:
    """A workflow triggered by an HTTP source whose step's app prop is the trigger event's `acct`:
    (its id, the source's endpoint)."""
    source_id, url = deploy(who.api, EMITTER)
    r = who.api.post("/workflows", json={"name": "w" + tag(), "trigger": source_id, "steps": [
        {"name": "leak", "component_code": LEAK_STEP % {"tag": tag()},
         "props": {"keyed": "{{steps.trigger.event.acct}}"}}]})
    assert r.status_code == 200, r.text
    return str(r.json()["data"]["id"]), url


def test_a_workflow_step_whose_app_prop_is_an_expression_cannot_reach_another_users_account(server: Server) -> None:
    victim, attacker = member(server), member(server)
    key = secret_key()
    victims = account(victim, key)
    workflow_id, url = workflow_from_expression(attacker)
    assert httpx.post(url, json={"acct": {"authProvisionId": victims}}).status_code == 200
    [outcome] = wait_for_outcome(attacker.api, workflow_id)
    assert key[-8:] not in str(outcome), "another user's key reached the attacker's workflow step"
    assert outcome["event"]["error"]["code"] == "ACCOUNT_NOT_FOUND"


def wait_for_outcome(api: httpx.Client, workflow_id: str) -> list[dict]:
    """The workflow's first emit or error, whichever comes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for path in ("event_summaries", "$errors/event_summaries"):
            r = api.get(f"/workflows/{workflow_id}/{path}", params={"expand": "event"})
            assert r.status_code == 200, r.text
            if r.json()["data"]:
                return list(r.json()["data"])
        time.sleep(0.05)
    raise AssertionError(f"workflow {workflow_id} neither emitted nor failed")


def test_a_workflow_step_resolves_its_own_namespaces_account_from_an_expression(server: Server) -> None:
    owner = member(server)
    key = secret_key()
    own = account(owner, key)
    workflow_id, url = workflow_from_expression(owner)
    assert httpx.post(url, json={"acct": {"authProvisionId": own}}).status_code == 200
    [emitted] = wait_for(owner.api, workflow_id)
    assert emitted["event"]["raw_event"] == {"tail": key[-8:]}


def test_a_reference_in_a_props_default_is_checked_like_one_given(server: Server) -> None:
    victim, attacker = member(server), member(server)
    key = secret_key()
    code = DEFAULTED % {"tag": tag(), "account": account(victim, key)}
    created = attacker.api.post("/sources", json={"component_code": code})
    if created.status_code == 200:  # 583905a: kept unchecked, and a later PUT kept it as "already there"
        source = created.json()["data"]
        again = attacker.api.put(f"/sources/{source['id']}",
                                 json={"configured_props": {"data": source["configured_props"]["data"]}})
        assert key[-8:] not in again.text, "another user's key reached the attacker's code"
    assert created.status_code == 404, created.text
    assert "apn_" in created.json()["error"] and key[-8:] not in created.text


def test_an_org_member_cannot_change_the_code_of_a_source_using_another_members_personal_account(
        server: Server) -> None:
    owner, other = member(server), member(server)
    org = org_of(server, owner, other)
    key = secret_key()
    personal = account(owner, key)
    t = tag()
    r = owner.api.post("/sources", params={"org_id": org}, json={
        "component_code": KEYED % {"tag": t}, "configured_props": {"keyed": {"authProvisionId": personal}}})
    assert r.status_code == 200, r.text
    source_id = r.json()["data"]["id"]

    replaced = other.api.put(f"/sources/{source_id}", json={"component_code": LEAKER % {"tag": t}})
    assert replaced.status_code == 403, replaced.text
    assert "keyed" in replaced.json()["error"] and replaced.json()["details"] == {
        "keyed": [f"uses the connected account {personal}, which you may not use"]}
    repointed = other.api.put(f"/sources/{source_id}", json={"configured_props": {
        "keyed": {"authProvisionId": personal}}, "component_code": LEAKER % {"tag": t}})
    assert repointed.status_code == 403, repointed.text

    # what the member may still do: pause and resume it, rename it
    assert other.api.put(f"/sources/{source_id}", json={"active": False}).status_code == 200
    assert other.api.put(f"/sources/{source_id}", json={"active": True, "name": "renamed-" + t}).status_code == 200
    assert other.api.post(f"/sources/{source_id}/run", json={}).status_code == 202
    [run] = wait_events(other.api, source_id, 1)
    assert run["event"] == {"tail": key[-8:]}  # the owner's code ran with the owner's account

    # the account's owner may change the code; a member may give the source an account of the org's
    changed = owner.api.put(f"/sources/{source_id}", json={"component_code": LEAKER % {"tag": t}})
    assert changed.status_code == 200, changed.text
    org_key = secret_key()
    shared = account(owner, org_key, org)
    mine = other.api.put(f"/sources/{source_id}", json={"configured_props": {"keyed": {"authProvisionId": shared}}})
    assert mine.status_code == 200, mine.text
    assert other.api.post(f"/sources/{source_id}/run", json={}).status_code == 202
    newest = events_of(wait_events(other.api, source_id, 2))[0]
    assert newest == {"tail": org_key[-8:], "leaked": True}


def test_an_orgs_account_is_used_only_by_what_runs_in_the_org(server: Server) -> None:
    owner, outsider_org_member = member(server), member(server)
    org = org_of(server, owner, outsider_org_member)
    shared = account(owner, secret_key(), org)
    personal_use = outsider_org_member.api.post("/sources", json={
        "component_code": KEYED % {"tag": tag()}, "configured_props": {"keyed": {"authProvisionId": shared}}})
    assert personal_use.status_code == 422, personal_use.text
    assert personal_use.json()["details"] == {"keyed": [f"{shared} is an account of {org}: only what runs "
                                                        f"in {org} may use it"]}
    in_org = outsider_org_member.api.post("/sources", params={"org_id": org}, json={
        "component_code": KEYED % {"tag": tag()}, "configured_props": {"keyed": {"authProvisionId": shared}}})
    assert in_org.status_code == 200, in_org.text


def test_an_org_components_options_never_run_in_a_members_personal_runner(server: Server) -> None:
    author, victim = member(server), member(server)
    org = org_of(server, author, victim)
    t = tag()
    r = author.api.post("/components", params={"org_id": org}, json={"component_code": TMP_OPTIONS % {"tag": t}})
    assert r.status_code == 200, r.text
    component_id = r.json()["data"]["id"]

    looker, url = deploy(victim.api, TMP_LOOKER % {"tag": t})
    assert httpx.post(url, json={}).status_code == 200
    [first] = wait_events(victim.api, looker, 1)
    assert f"own-secret-{t}" in first["event"]["files"]

    options = victim.api.post(f"/components/{component_id}/props/pick/options", json={})
    assert options.status_code == 200, options.text
    assert f"own-secret-{t}" not in options.text, "the org component's code read the member's runner's /tmp"
    assert httpx.post(url, json={}).status_code == 200
    second = events_of(wait_events(victim.api, looker, 2))[0]
    assert f"left-by-options-{t}" not in second["files"], "the org component's code left a file in it"

    # nor as the member's personal source: an org's component is deployed in its org
    personal = victim.api.post("/sources", json={"component_id": component_id, "configured_props": {"pick": "x"}})
    assert personal.status_code == 422, personal.text
    assert org in personal.json()["error"]
