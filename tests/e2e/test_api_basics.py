"""HTTP basics through the running service in both deployments: /healthz, auth, a key revoked by the
operator's CLI, /users/me, a component through the real describe, each error kind once, and every
documented route routed. The cases of each rule (content types, unknown fields, orgs, paging,
include/exclude) are tests/api/test_basics.py, in-process over the fakes."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Server, User, client_for, new_user
from tests.openapi_conformance import assert_every_route_routed

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


def test_each_error_kind_answers_its_status_and_the_error_body(server: Server, api: httpx.Client) -> None:
    """One request for each error kind of /v1 through the deployment's own edge; each kind's cases
    are tests/api/ (test_basics.py, test_bad_input.py, test_sources.py) on the fakes."""
    owner = new_user(server)
    org = server.cli("orgs", "create", "--name", "Not Yours", "--owner", owner.id)

    def error(r: httpx.Response, status: int) -> dict:
        assert r.status_code == status, r.text
        assert r.headers["content-type"].startswith("application/json") and r.headers["x-request-id"]
        body = r.json()
        assert set(body) <= {"error", "details"} and body["error"], body
        return body

    assert error(api.post("/components", content=b"{not json", headers={"Content-Type": "application/json"}),
                 400)["error"] == "The request body is not valid JSON."
    assert error(api.post("/sources", json={"component_key": "headwater-http", "props": {}}), 400)["details"] == {
        "props": ["is not a field of this request"]}
    assert error(api.get("/users/me/components", params={"limit": 0}), 400)["details"]
    assert error(api.get(f"/orgs/{org['id']}/components"), 403)
    assert error(api.get("/components/sc_000000000000000000000"), 404)
    assert error(api.get("/nothing-here"), 404) == {"error": "No such route."}
    assert "method" in error(api.delete("/users/me"), 405)["error"]
    assert error(api.post("/components", json={"component_code": "x" * (5 * 1024 * 1024)}), 413)
    assert "application/json" in error(api.post("/components", content=b"component_code=x",
                                                 headers={"Content-Type": "text/plain"}), 415)["error"]
    code = 'export default {name: "n", version: "1", props: {n: {type: "integer"}}, run() {}}'
    r = api.post("/sources", json={"component_code": code, "configured_props": {"n": "{{steps.trigger.event.n}}"}})
    assert error(r, 422)["details"] == {"n": ["must be an integer, not an unresolved {{ }} expression"]}
    assert httpx.get(server.base_url + "/healthz").status_code == 200


def test_component_saved_and_read_by_id_and_key(api: httpx.Client) -> None:
    saved = save(api, 1)
    assert saved["id"].startswith("sc_") and len(saved["id"]) >= 23
    assert len(saved["code_hash"]) == 64
    by_id = api.get(f"/components/{saved['id']}").json()["data"]
    by_key = api.get("/components/simple-1").json()["data"]
    assert by_id == by_key == saved


def test_openapi_matches_routes(server: Server) -> None:
    assert_every_route_routed(httpx.get(server.base_url + "/openapi.json", timeout=60).json(),
                              lambda method, path: httpx.request(method, server.base_url + path, timeout=60))
