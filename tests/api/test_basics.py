"""/v1's basics in-process over the fakes: authentication (every way a request can lack a valid key
is a 401 with the DECISIONS body), content types, errors, orgs, paging, shaping.
tests/e2e/test_api_basics.py keeps each route and error kind once against both deployments."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from tests.api.conftest import BASE, App
from tests.openapi_conformance import assert_every_route_routed
from tests.services.test_services import HTTP, component_code


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer hw_not-a-key"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer"},
    ],
    ids=["no-header", "bad-key", "wrong-scheme", "empty-key"],
)
def test_missing_or_invalid_key_is_401(app: App, headers: dict) -> None:
    r = app.http.get("/v1/users/me", headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert set(r.json()) == {"error"}
    assert r.headers["x-request-id"]


# The rest of /v1's basics in-process (moved from tests/e2e/test_api_basics.py, which keeps each
# route and error kind once per deployment): a component is describe's answer as FakeRunner takes it.

DB = [{"name": "db", "type": "$.service.db"}]


def simple(n: int) -> str:
    return component_code(name=f"Simple {n}", key=f"simple-{n}", version=f"0.0.{n}", configurable_props=DB)


def save(api: httpx.Client, n: int, **params: str) -> dict:
    r = api.post("/components", json={"component_code": simple(n)}, params=params)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_users_me_free_tier(app: App) -> None:
    api = app.client(tier="free", name="freddie")
    data = api.get("/users/me").json()["data"]
    assert data == {
        "id": data["id"],
        "username": "freddie",
        "email": "freddie@example.com",
        "orgs": [],
        "daily_compute_time_quota": 1_800_000,
        "daily_compute_time_used": 0,
        "daily_invocations_quota": 100,
        "daily_invocations_used": 0,
    }
    assert data["id"].startswith("u_")


def test_users_me_paid_tier_with_org(app: App) -> None:
    api = app.client(tier="paid", name="pat")
    me = api.get("/users/me").json()["data"]
    org = app.world.services.accounts.create_org("Acme Data", me["id"])
    data = api.get("/users/me").json()["data"]
    assert data["orgs"] == [{"name": "Acme Data", "id": org.id, "orgname": org.orgname, "email": "pat@example.com"}]
    assert data["billing_period_invocations"] == 0
    assert data["billing_period_end_ts"] > data["billing_period_start_ts"]
    assert "daily_invocations_quota" not in data


def test_a_revoked_key_is_401_and_other_keys_still_work(app: App, api: httpx.Client) -> None:
    accounts = app.world.services.accounts
    me = api.get("/users/me").json()["data"]["id"]
    second = accounts.create_key(me)
    assert second.startswith("hw_") and len(second) >= 35
    assert app.http.get("/v1/users/me", headers={"Authorization": f"Bearer {second}"}).status_code == 200
    accounts.revoke_key(second)
    assert app.http.get("/v1/users/me", headers={"Authorization": f"Bearer {second}"}).status_code == 401
    assert api.get("/users/me").status_code == 200


def test_post_without_json_content_type_is_415(api: httpx.Client) -> None:
    r = api.post("/components", content=b"component_code=x", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    assert "application/json" in r.json()["error"]


def test_malformed_json_is_400(api: httpx.Client) -> None:
    r = api.post("/components", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"] == "The request body is not valid JSON."


def test_mistyped_field_is_400_with_details(api: httpx.Client) -> None:
    r = api.post("/components", json={"component_code": 42})
    assert r.status_code == 400
    assert "component_code" in r.json()["details"]


def test_an_unknown_body_field_is_400_naming_it(api: httpx.Client) -> None:
    # `props` for `configured_props` used to deploy the source without its props.
    r = api.post("/sources", json={"component_key": "headwater-http", "props": {"x": 1}})
    assert r.status_code == 400
    assert r.json() == {"error": "The request has unknown fields: props.",
                        "details": {"props": ["is not a field of this request"]}}
    assert api.get("/users/me/sources").json()["data"] == []
    r = api.post("/components", json={"component_code": simple(90), "code": "x"})
    assert r.status_code == 400 and r.json()["details"] == {"code": ["is not a field of this request"]}
    r = api.post("/subscriptions", json={"emitter_id": "dc_x", "listener": "wh_x"})
    assert r.status_code == 400 and r.json()["details"] == {"listener": ["is not a field of this request"]}


def test_an_unknown_field_on_update_is_400(api: httpx.Client) -> None:
    source = api.post("/sources", json={"component_code": component_code(configurable_props=HTTP)}).json()["data"]
    r = api.put(f"/sources/{source['id']}", json={"enabled": False})
    assert r.status_code == 400 and r.json()["details"] == {"enabled": ["is not a field of this request"]}
    assert api.get(f"/sources/{source['id']}").json()["data"]["active"] is True


def test_an_integer_prop_refuses_an_unresolved_expression(api: httpx.Client) -> None:
    code = component_code(configurable_props=[{"name": "n", "type": "integer"}])
    r = api.post("/sources", json={"component_code": code, "configured_props": {"n": "{{steps.trigger.event.n}}"}})
    assert r.status_code == 422
    assert r.json()["details"] == {"n": ["must be an integer, not an unresolved {{ }} expression"]}


def test_a_webhook_without_url_is_400_and_the_document_says_it_is_required(app: App, api: httpx.Client) -> None:
    r = api.post("/webhooks")
    assert r.status_code == 400 and list(r.json()["details"]) == ["url"]
    spec = app.http.get("/openapi.json").json()
    [url] = [p for p in spec["paths"]["/v1/webhooks"]["post"]["parameters"] if p["name"] == "url"]
    assert url["required"] is True and url["description"] and url["schema"]["examples"]
    body = spec["components"]["schemas"]["SourceBody"]
    assert body["additionalProperties"] is False
    assert body["properties"]["configured_props"]["description"]


def test_no_component_code_is_400(api: httpx.Client) -> None:
    r = api.post("/components", json={})
    assert r.status_code == 400
    assert "component_code" in r.json()["error"]


def test_body_over_limit_is_413_and_the_app_stays_up(app: App, api: httpx.Client) -> None:
    r = api.post("/components", json={"component_code": "x" * (5 * 1024 * 1024)})
    assert r.status_code == 413
    assert app.http.get("/healthz").status_code == 200


def test_unknown_route_and_wrong_method(api: httpx.Client) -> None:
    r = api.get("/nothing-here")
    assert r.status_code == 404 and r.json() == {"error": "No such route."}
    r = api.delete("/users/me")
    assert r.status_code == 405 and "method" in r.json()["error"]


def test_trailing_slash_served_without_redirect(api: httpx.Client) -> None:
    for path in ("/users/me", "/users/me/"):
        r = api.get(path, follow_redirects=False)
        assert r.status_code == 200, path


def test_component_saved_and_read_by_id_and_key(api: httpx.Client) -> None:
    saved = save(api, 1)
    assert saved["id"].startswith("sc_") and len(saved["id"]) >= 23
    assert saved["code_hash"]  # the bundler's (its form: tests/e2e/test_api_basics.py)
    by_id = api.get(f"/components/{saved['id']}").json()["data"]
    by_key = api.get("/components/simple-1").json()["data"]
    assert by_id == by_key == saved


def test_other_users_component_is_404(app: App, api: httpx.Client) -> None:
    saved = save(api, 2)
    stranger = app.client()
    for ref in (saved["id"], "simple-2"):
        r = stranger.get(f"/components/{ref}")
        assert r.status_code == 404, ref
        assert set(r.json()) == {"error"}


def test_org_member_access_and_non_member_403(app: App) -> None:
    owner, member, outsider = app.client(), app.client(), app.client()
    accounts = app.world.services.accounts
    org = accounts.create_org("Team Rocket", owner.get("/users/me").json()["data"]["id"])
    accounts.add_member(org.id, member.get("/users/me").json()["data"]["id"])
    saved = save(owner, 3, org_id=org.id)
    assert member.get(f"/components/{saved['id']}").json()["data"]["id"] == saved["id"]
    assert member.get("/components/simple-3", params={"org_id": org.id}).status_code == 200
    listed = member.get(f"/orgs/{org.id}/components").json()
    assert [x["id"] for x in listed["data"]] == [saved["id"]]
    assert member.get(f"/workspaces/{org.id}/components").json() == listed
    assert outsider.get(f"/components/{saved['id']}").status_code == 404
    assert outsider.get(f"/orgs/{org.id}/components").status_code == 403
    assert outsider.get("/components/simple-3", params={"org_id": org.id}).status_code == 403
    r = outsider.post("/components", json={"component_code": simple(4)}, params={"org_id": org.id})
    assert r.status_code == 403


def test_pagination_over_25_items_both_ways(app: App) -> None:
    # 25 items in pages of 10: two page boundaries each way and more than the default page of 10
    c = app.client()
    ids = [save(c, 100 + n)["id"] for n in range(25)]
    newest_first = ids[::-1]

    pages, cursor = [], None
    while True:
        r = c.get("/users/me/components", params={"limit": 10, **({"after": cursor} if cursor else {})})
        body = r.json()
        assert body["page_info"]["total_count"] == 25
        assert body["page_info"]["count"] == len(body["data"])
        if not body["data"]:
            break
        pages.append([x["id"] for x in body["data"]])
        cursor = body["page_info"]["end_cursor"]
    assert [len(p) for p in pages] == [10, 10, 5]
    assert sum(pages, []) == newest_first

    # `cursor` now points at the oldest item: walk back to the newest with `before`.
    back: list[str] = []
    r = c.get("/users/me/components", params={"limit": 10, "before": cursor}).json()
    while r["data"]:
        assert len(r["data"]) <= 10
        back = [x["id"] for x in r["data"]] + back
        r = c.get("/users/me/components", params={"limit": 10, "before": r["page_info"]["start_cursor"]}).json()
    assert back == newest_first[:-1]

    assert len(c.get("/users/me/components").json()["data"]) == 10
    for bad in ({"limit": 0}, {"limit": 101}, {"limit": "x"}, {"after": "garbage!"}):
        r = c.get("/users/me/components", params=bad)
        assert r.status_code == 400, bad
        assert r.json()["details"]


def test_include_and_exclude(api: httpx.Client) -> None:
    saved = save(api, 5)
    only = api.get(f"/components/{saved['id']}", params={"include": "id,name"}).json()["data"]
    assert only == {"id": saved["id"], "name": "Simple 5"}
    without = api.get(f"/components/{saved['id']}", params={"exclude": "code,configurable_props"}).json()["data"]
    assert "code" not in without and "configurable_props" not in without and without["id"] == saved["id"]
    listed = api.get("/users/me/components", params={"include": "id"}).json()["data"]
    assert all(set(x) == {"id"} for x in listed)
    me = api.get("/users/me", params={"include": "id,username"}).json()["data"]
    assert set(me) == {"id", "username"}
    posted = api.post("/components", json={"component_code": simple(6), "include": "id"}).json()["data"]
    assert set(posted) == {"id"}


def test_answers_shaped_by_include_or_exclude_are_what_the_document_says(app: App, api: httpx.Client) -> None:
    """`include`/`exclude` may leave out any field, required ones too: the operations that take them
    answer `<Resource>Fields` (no field required), and the suite's check (the `api` client's hook)
    validates such answers against it, every other answer against the resource, all fields required."""
    saved = save(api, 7)
    checked = app.conformance.checked
    assert api.get(f"/components/{saved['id']}", params={"include": "name"}).json()["data"] == {"name": "Simple 7"}
    assert api.get("/users/me/components", params={"exclude": "id,code"}).json()["data"]
    assert api.get("/users/me", params={"include": "nothing-such"}).json()["data"] == {}
    source = api.post("/sources", json={"component_id": saved["id"], "include": "id"}).json()["data"]
    assert set(source) == {"id"}
    assert set(api.get(f"/sources/{source['id']}", params={"exclude": "id"}).json()["data"]) >= {"name", "active"}
    assert api.get(f"/sources/{source['id']}").json()["data"]["id"] == source["id"]
    assert app.conformance.checked == checked + 6

    url = f"{BASE_V1}/sources/{source['id']}"
    partial = {"data": {"name": "x"}}
    assert app.conformance.problems(_answer(200, partial, url + "?include=name")) == []
    assert any("is a required property" in p for p in app.conformance.problems(_answer(200, partial, url)))
    extra = {"data": {"name": "x", "not_a_field": 1}}
    assert any("violates schema" in p for p in app.conformance.problems(_answer(200, extra, url + "?include=name")))


def test_every_operation_that_takes_include_documents_its_fields_as_optional(app: App) -> None:
    document = app.http.get("/openapi.json").json()
    schemas = document["components"]["schemas"]

    def resolve(schema: dict) -> dict:
        return schemas[schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else schema

    shaped = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if "include" not in {p["name"] for p in operation.get("parameters", [])}:
                continue
            assert "exclude" in {p["name"] for p in operation["parameters"]}, (method, path)
            for status, response in operation["responses"].items():
                if status.startswith("2"):
                    data = resolve(response["content"]["application/json"]["schema"])["properties"]["data"]
                    fields = resolve(data.get("items", data))
                    full = schemas[fields["x-fields-of"]]
                    assert "required" not in fields and full["required"], (method, path)
                    assert fields["properties"] == full["properties"], (method, path)
                    assert fields.get("additionalProperties") is full.get("additionalProperties") is False
                    shaped.append(f"{method} {path}")
    assert len(shaped) >= 30 and "get /v1/sources/{source_id}" in shaped


def test_openapi_matches_routes(app: App) -> None:
    assert_every_route_routed(app.http.get("/openapi.json").json(), app.http.request)


BASE_V1 = BASE + "/v1"


def _answer(status: int, body: object, url: str) -> httpx.Response:
    response = httpx.Response(status, json=body, request=httpx.Request("GET", url))
    response.elapsed = timedelta(0)
    return response
