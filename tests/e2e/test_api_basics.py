"""HTTP basics through the running service: auth, content types, errors, orgs, paging, shaping."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Server, User, client_for, new_user

pytestmark = pytest.mark.both_modes

SIMPLE = """export default {{
  name: "Simple {n}",
  key: "simple-{n}",
  version: "0.0.{n}",
  props: {{ db: "$.service.db" }},
  async run(event) {{ this.$emit(event) }},
}};
"""


def save(api: httpx.Client, n: int, **params: str) -> dict:
    r = api.post("/components", json={"component_code": SIMPLE.format(n=n)}, params=params)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_healthz_needs_no_key(server: Server) -> None:
    r = httpx.get(server.base_url + "/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}
    assert r.headers["x-request-id"]


def test_missing_or_invalid_key_is_401(server: Server) -> None:
    """Each way to lack a valid key is tests/api/test_basics.py; here one, in both deployments."""
    headers = {"Authorization": "Bearer hw_not-a-key"}
    r = httpx.get(server.base_url + "/v1/users/me", headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert set(r.json()) == {"error"}
    assert r.headers["x-request-id"]


def test_revoked_key_is_401_and_other_keys_still_work(server: Server, user: User) -> None:
    second = server.cli("keys", "create", "--user", user.id)["api_key"]
    assert second.startswith("hw_") and len(second) >= 35
    with client_for(server, second) as c:
        assert c.get("/users/me").status_code == 200
    server.cli("keys", "revoke", second)
    with client_for(server, second) as c:
        assert c.get("/users/me").status_code == 401
    with client_for(server, user.api_key) as c:
        assert c.get("/users/me").status_code == 200


def test_users_me_free_tier(server: Server, api: httpx.Client, user: User) -> None:
    data = api.get("/users/me").json()["data"]
    assert data == {
        "id": user.id,
        "username": user.username,
        "email": f"{user.username}@example.com",
        "orgs": [],
        "daily_compute_time_quota": 1_800_000,
        "daily_compute_time_used": 0,
        "daily_invocations_quota": 100,
        "daily_invocations_used": 0,
    }


def test_users_me_paid_tier_with_org(server: Server) -> None:
    paid = new_user(server, tier="paid")
    org = server.cli("orgs", "create", "--name", "Acme Data", "--owner", paid.id)
    with client_for(server, paid.api_key) as c:
        data = c.get("/users/me").json()["data"]
    assert data["orgs"] == [
        {"name": "Acme Data", "id": org["id"], "orgname": org["orgname"], "email": f"{paid.username}@example.com"}
    ]
    assert data["billing_period_invocations"] == 0
    assert data["billing_period_end_ts"] > data["billing_period_start_ts"]
    assert "daily_invocations_quota" not in data


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
    r = api.post("/components", json={"component_code": SIMPLE.format(n=90), "code": "x"})
    assert r.status_code == 400 and r.json()["details"] == {"code": ["is not a field of this request"]}
    r = api.post("/subscriptions", json={"emitter_id": "dc_x", "listener": "wh_x"})
    assert r.status_code == 400 and r.json()["details"] == {"listener": ["is not a field of this request"]}


def test_an_unknown_field_on_update_is_400(api: httpx.Client) -> None:
    source = api.post("/sources", json={"component_key": "headwater-http"}).json()["data"]
    r = api.put(f"/sources/{source['id']}", json={"enabled": False})
    assert r.status_code == 400 and r.json()["details"] == {"enabled": ["is not a field of this request"]}
    assert api.get(f"/sources/{source['id']}").json()["data"]["active"] is True


def test_an_integer_prop_refuses_an_unresolved_expression(api: httpx.Client) -> None:
    code = 'export default {name: "n", version: "1", props: {n: {type: "integer"}}, run() {}}'
    r = api.post("/sources", json={"component_code": code, "configured_props": {"n": "{{steps.trigger.event.n}}"}})
    assert r.status_code == 422
    assert r.json()["details"] == {"n": ["must be an integer, not an unresolved {{ }} expression"]}


def test_a_webhook_without_url_is_400_and_the_document_says_it_is_required(server: Server,
                                                                           api: httpx.Client) -> None:
    r = api.post("/webhooks")
    assert r.status_code == 400 and list(r.json()["details"]) == ["url"]
    spec = httpx.get(server.base_url + "/openapi.json").json()
    [url] = [p for p in spec["paths"]["/v1/webhooks"]["post"]["parameters"] if p["name"] == "url"]
    assert url["required"] is True and url["description"] and url["schema"]["examples"]
    body = spec["components"]["schemas"]["SourceBody"]
    assert body["additionalProperties"] is False
    assert body["properties"]["configured_props"]["description"]


def test_no_component_reference_is_400(api: httpx.Client) -> None:
    r = api.post("/components", json={})
    assert r.status_code == 400
    assert "component_code" in r.json()["error"]


def test_body_over_limit_is_413_and_service_stays_up(server: Server, api: httpx.Client) -> None:
    r = api.post("/components", json={"component_code": "x" * (5 * 1024 * 1024)})
    assert r.status_code == 413
    assert httpx.get(server.base_url + "/healthz").status_code == 200


def test_unknown_route_and_wrong_method(server: Server, api: httpx.Client) -> None:
    r = api.get("/nothing-here")
    assert r.status_code == 404 and r.json() == {"error": "No such route."}
    r = api.delete("/users/me")
    assert r.status_code == 405 and "method" in r.json()["error"]


def test_trailing_slash_served_without_redirect(api: httpx.Client) -> None:
    for path in ("/users/me", "/users/me/"):
        r = api.get(path)
        assert r.status_code == 200, path


def test_component_saved_and_read_by_id_and_key(api: httpx.Client) -> None:
    saved = save(api, 1)
    assert saved["id"].startswith("sc_") and len(saved["id"]) >= 23
    assert len(saved["code_hash"]) == 64
    by_id = api.get(f"/components/{saved['id']}").json()["data"]
    by_key = api.get("/components/simple-1").json()["data"]
    assert by_id == by_key == saved


def test_other_users_component_is_404(server: Server, api: httpx.Client) -> None:
    saved = save(api, 2)
    stranger = new_user(server)
    with client_for(server, stranger.api_key) as c:
        for ref in (saved["id"], "simple-2"):
            r = c.get(f"/components/{ref}")
            assert r.status_code == 404, ref
            assert set(r.json()) == {"error"}


def test_org_member_access_and_non_member_403(server: Server) -> None:
    owner, member, outsider = new_user(server), new_user(server), new_user(server)
    org = server.cli("orgs", "create", "--name", "Team Rocket", "--owner", owner.id)
    server.cli("orgs", "add-member", "--org", org["id"], "--user", member.id)
    with client_for(server, owner.api_key) as c:
        saved = save(c, 3, org_id=org["id"])
    with client_for(server, member.api_key) as c:
        assert c.get(f"/components/{saved['id']}").json()["data"]["id"] == saved["id"]
        assert c.get("/components/simple-3", params={"org_id": org["id"]}).status_code == 200
        listed = c.get(f"/orgs/{org['id']}/components").json()
        assert [x["id"] for x in listed["data"]] == [saved["id"]]
        assert c.get(f"/workspaces/{org['id']}/components").json() == listed
    with client_for(server, outsider.api_key) as c:
        assert c.get(f"/components/{saved['id']}").status_code == 404
        assert c.get(f"/orgs/{org['id']}/components").status_code == 403
        assert c.get("/components/simple-3", params={"org_id": org["id"]}).status_code == 403
        r = c.post("/components", json={"component_code": SIMPLE.format(n=4)}, params={"org_id": org["id"]})
        assert r.status_code == 403


def test_pagination_over_12_items_both_ways(server: Server) -> None:
    # 12 items in pages of 5 cross two page boundaries each way and are more than the default page
    # of 10 (each item is a component saved, a describe in Node: 25 of them took 15-19 s)
    owner = new_user(server)
    with client_for(server, owner.api_key) as c:
        ids = [save(c, 100 + n)["id"] for n in range(12)]
        newest_first = ids[::-1]

        pages, cursor = [], None
        while True:
            r = c.get("/users/me/components", params={"limit": 5, **({"after": cursor} if cursor else {})})
            body = r.json()
            assert body["page_info"]["total_count"] == 12
            assert body["page_info"]["count"] == len(body["data"])
            if not body["data"]:
                break
            pages.append([x["id"] for x in body["data"]])
            cursor = body["page_info"]["end_cursor"]
        assert [len(p) for p in pages] == [5, 5, 2]
        assert sum(pages, []) == newest_first

        # `cursor` now points at the oldest item: walk back to the newest with `before`.
        back = []
        r = c.get("/users/me/components", params={"limit": 5, "before": cursor}).json()
        while r["data"]:
            assert len(r["data"]) <= 5
            back = [x["id"] for x in r["data"]] + back
            r = c.get("/users/me/components", params={"limit": 5, "before": r["page_info"]["start_cursor"]}).json()
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
    posted = api.post("/components", json={"component_code": SIMPLE.format(n=6), "include": "id"}).json()["data"]
    assert set(posted) == {"id"}


def test_openapi_matches_routes(server: Server) -> None:
    spec = httpx.get(server.base_url + "/openapi.json").json()
    paths = set(spec["paths"])
    assert {
        "/healthz",
        "/v1/users/me",
        "/v1/components",
        "/v1/components/{key_or_id}",
        "/v1/components/registry/{key}",
        "/v1/users/me/components",
        "/v1/orgs/{org_id}/components",
    } <= paths
    for path, ops in spec["paths"].items():
        concrete = path.replace("{key_or_id}", "sc_x").replace("{key}", "x").replace("{org_id}", "o_x")
        for method in ops:
            r = httpx.request(method.upper(), server.base_url + concrete)
            assert r.status_code not in (404, 405) or r.json()["error"] != "No such route.", (method, path)
