"""/v1/accounts in-process over the fakes: the answers (never a credential), the 4xx of bad input,
foreign ids as 404, org accounts, lists paged like the others, and sources deployed with
`{"authProvisionId"}`; every answer checked against the OpenAPI document."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from headwater.domain.runs import RunResult
from headwater.ports import Instance
from tests.api.conftest import App
from tests.services.test_services import HTTP, component_code

KEY = "sk-" + uuid.uuid4().hex
SLACK = {"name": "slack", "type": "app", "app": "slack"}


def create(api: httpx.Client, **body: Any) -> httpx.Response:
    return api.post("/accounts", json={"app": "slack", "credentials": {"api_key": KEY}, **body})


def test_create_read_update_delete_and_never_a_secret(api: httpx.Client) -> None:
    r = create(api, name="Work")
    assert r.status_code == 200, r.text
    account = r.json()["data"]
    assert account["id"].startswith("apn_") and account["fields"] == ["api_key"]
    assert (account["app"], account["name"], account["kind"], account["status"]) == ("slack", "Work", "keys", "active")
    got = api.get(f"/accounts/{account['id']}")
    assert got.status_code == 200 and got.json()["data"] == account
    r = api.patch(f"/accounts/{account['id']}", json={"credentials": {"team": "T1", "api_key": KEY + "-new"}})
    assert r.status_code == 200 and r.json()["data"]["fields"] == ["api_key", "team"]
    r = api.patch(f"/accounts/{account['id']}", json={"name": "Renamed", "credentials": {"team": None}})
    assert r.json()["data"]["name"] == "Renamed" and r.json()["data"]["fields"] == ["api_key"]
    listed = api.get("/users/me/accounts").json()
    assert [a["id"] for a in listed["data"]] == [account["id"]] and listed["page_info"]["total_count"] == 1
    assert api.get("/accounts").json()["data"] == listed["data"]
    assert api.get("/accounts", params={"include": "id,fields"}).json()["data"] == [
        {"id": account["id"], "fields": ["api_key"]}]
    assert api.delete(f"/accounts/{account['id']}").status_code == 204
    assert api.get(f"/accounts/{account['id']}").status_code == 404
    assert api.delete(f"/accounts/{account['id']}").status_code == 404


def test_bad_input_is_400_or_422_and_quotes_no_value(api: httpx.Client) -> None:
    r = api.post("/accounts", json={"app": "slack", "credentials": {"api_key": KEY}, "secret": KEY})
    assert r.status_code == 400 and "secret" in r.json()["details"], r.text
    r = api.post("/accounts", json={"name": "no app"})
    assert r.status_code == 400 and "app" in r.json()["details"], r.text
    r = api.post("/accounts", json={"app": "slack", "credentials": "sk-plain"})
    assert r.status_code == 400 and "credentials" in r.json()["details"], r.text
    r = api.post("/accounts", json={"app": "../etc", "credentials": {"api_key": {"deep": KEY}}})
    assert r.status_code == 422 and set(r.json()["details"]) == {"app", "credentials"}, r.text
    account = create(api).json()["data"]
    r = api.patch(f"/accounts/{account['id']}", json={"credentials": {"api_key": [KEY]}, "name": ""})
    assert r.status_code == 422 and set(r.json()["details"]) == {"credentials", "name"}, r.text
    r = api.patch(f"/accounts/{account['id']}", json={"kind": "oauth"})
    assert r.status_code == 400, r.text
    r = api.get("/users/me/accounts", params={"limit": 0})
    assert r.status_code == 400, r.text


def test_an_app_whose_slug_starts_with_an_underscore_has_accounts(api: httpx.Client) -> None:
    # registry apps are named so (`_46elks`, `__1msg`): their components' app props name them
    r = api.post("/accounts", json={"app": "_12sms", "credentials": {"api_key": KEY}})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["app"] == "_12sms"
    for bad in ("-12sms", ".12sms", "_12 sms"):
        assert api.post("/accounts", json={"app": bad}).status_code == 422, bad


def test_another_users_account_is_404_everywhere(app: App, api: httpx.Client) -> None:
    theirs = create(app.client()).json()["data"]["id"]
    assert api.get(f"/accounts/{theirs}").status_code == 404
    assert api.patch(f"/accounts/{theirs}", json={"name": "mine now"}).status_code == 404
    assert api.delete(f"/accounts/{theirs}").status_code == 404
    r = api.post("/sources", json={"component_code": component_code(configurable_props=[*HTTP, SLACK]),
                                   "configured_props": {"slack": {"authProvisionId": theirs}}})
    assert r.status_code == 404 and theirs in r.json()["error"], r.text
    assert api.get("/accounts", params={"org_id": "o_not_mine"}).status_code == 403
    assert create(api, org_id="o_not_mine").status_code == 403


def test_org_accounts_are_listed_for_its_members(app: App, api: httpx.Client) -> None:
    me = api.get("/users/me").json()["data"]["id"]
    org = app.world.services.accounts.create_org("Acme Accounts", me)
    r = api.post("/accounts", params={"org_id": org.id}, json={"app": "github", "credentials": {"token": KEY}})
    assert r.status_code == 200 and r.json()["data"]["owner_id"] == org.id, r.text
    assert [a["id"] for a in api.get(f"/orgs/{org.id}/accounts").json()["data"]] == [r.json()["data"]["id"]]
    assert api.get(f"/workspaces/{org.id}/accounts").json() == api.get(f"/orgs/{org.id}/accounts").json()
    assert api.get("/users/me/accounts").json()["data"] == []
    mine = create(api).json()["data"]["id"]
    usable = api.get("/accounts").json()  # the caller's and the orgs', one list
    assert [a["id"] for a in usable["data"]] == [mine, r.json()["data"]["id"]]
    assert usable["page_info"]["total_count"] == 2


def test_lists_page_with_cursors(api: httpx.Client) -> None:
    made = [create(api, name=f"n{i}").json()["data"]["id"] for i in range(3)]
    first = api.get("/users/me/accounts", params={"limit": 2}).json()
    assert [a["id"] for a in first["data"]] == made[:0:-1] and first["page_info"]["total_count"] == 3
    rest = api.get("/users/me/accounts", params={"limit": 2, "after": first["page_info"]["end_cursor"]}).json()
    assert [a["id"] for a in rest["data"]] == [made[0]]


def test_a_source_with_an_account_shows_the_reference_and_runs_with_its_credentials(
        app: App, api: httpx.Client) -> None:
    seen: list[dict[str, Any]] = []

    def script(instance: Instance, event: Any) -> RunResult:
        seen.append(instance.props)
        return RunResult()
    app.world.runner.script = script
    account = create(api).json()["data"]["id"]
    r = api.post("/sources", json={"component_code": component_code(configurable_props=[*HTTP, SLACK]),
                                   "configured_props": {"slack": {"authProvisionId": account}}})
    assert r.status_code == 200, r.text
    source = r.json()["data"]
    assert source["configured_props"]["slack"] == {"authProvisionId": account}
    assert api.post(f"/sources/{source['id']}/run", json={}).status_code == 202
    app.world.queue.drain()
    assert seen[-1]["slack"] == {"$auth": {"api_key": KEY}}
    for answer in (source, api.get(f"/sources/{source['id']}").json(), api.get("/users/me/accounts").json()):
        assert KEY not in json.dumps(answer)


def test_the_openapi_document_describes_the_routes(app: App) -> None:
    document = app.http.get("/openapi.json").json()
    paths = document["paths"]
    assert {"post", "get"} <= set(paths["/v1/accounts"])
    assert {"get", "patch", "delete"} <= set(paths["/v1/accounts/{account_id}"])
    assert "/v1/users/me/accounts" in paths and "/v1/orgs/{org_id}/accounts" in paths
    body = json.dumps(document["components"]["schemas"]["CreateAccountBody"])
    assert "never answered" in body and "examples" in body
    assert "never their values" in json.dumps(document["components"]["schemas"]["ConnectedAccount"])
