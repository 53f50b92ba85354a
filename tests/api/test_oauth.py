"""/v1/oauth in-process over the fakes (a FakeOAuthClient for the provider): clients answered
without their secret, the 4xx of bad input, connect and reconnect, and the callback's pages;
every JSON answer checked against the OpenAPI document."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx

from tests.api.conftest import App
from tests.fakes import FakeOAuthClient

SECRET = "the-client-secret"
CLIENT = {"client_id": "hw", "client_secret": SECRET, "authorize_url": "https://id.example.com/authorize",
          "token_url": "https://id.example.com/token", "scopes": ["read"], "extra_params": {"prompt": "consent"}}


def provider(app: App) -> FakeOAuthClient:
    fake = FakeOAuthClient()
    app.world.services.oauth.client = fake
    return fake


def test_clients_are_set_listed_and_deleted_without_their_secret(app: App, api: httpx.Client) -> None:
    r = api.put("/oauth/clients/github", json=CLIENT)
    assert r.status_code == 200, r.text
    assert r.json()["data"]["has_client_secret"] is True and SECRET not in r.text
    listed = api.get("/oauth/clients")
    assert [c["app"] for c in listed.json()["data"]] == ["github"] and SECRET not in listed.text
    assert api.put("/oauth/clients/github", json={**CLIENT, "unknown": 1}).status_code == 400
    bad = api.put("/oauth/clients/github", json={**CLIENT, "token_url": "ftp://x"})
    assert bad.status_code == 422 and "token_url" in bad.json()["details"]
    assert api.delete("/oauth/clients/github").status_code == 204
    assert api.delete("/oauth/clients/github").status_code == 404
    assert api.delete("/oauth/clients/" + "x" * 300).status_code == 404


def test_connect_callback_and_reconnect(app: App, api: httpx.Client) -> None:
    fake = provider(app)
    assert api.post("/oauth/connect", json={"app": "gitlab"}).status_code == 422  # no client for it
    api.put("/oauth/clients/gitlab", json=CLIENT)
    started = api.post("/oauth/connect", json={"app": "gitlab", "name": "mine"})
    assert started.status_code == 201, started.text
    state = parse_qs(urlsplit(started.json()["data"]["authorize_url"]).query)["state"][0]
    assert started.json()["data"]["redirect_uri"].endswith("/v1/oauth/callback")
    pending = app.world.store.data.pending_connects[state]
    code = fake.authorize(app.world.services.adapters.secrets.decrypt(pending.verifier["$secret"]))

    page = app.http.get("/v1/oauth/callback", params={"state": state, "code": code})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    account_id = next(w for w in page.text.split() if w.startswith("(apn_")).strip("()")
    assert app.http.get("/v1/oauth/callback", params={"state": state, "code": code}).status_code == 400
    assert app.http.get("/v1/oauth/callback", params={"state": "<script>", "error": "x"}).status_code == 400
    assert app.http.get("/v1/oauth/callback", params={"state": "s" * 5000, "code": "c"}).status_code == 400
    account = api.get(f"/accounts/{account_id}").json()["data"]
    assert (account["kind"], account["name"], account["status"]) == ("oauth", "mine", "active")

    again = api.post("/oauth/connect", json={"account_id": account_id})
    assert again.status_code == 201
    other = app.client(name="other")
    assert other.post("/oauth/connect", json={"account_id": account_id}).status_code == 404
    denied_state = parse_qs(urlsplit(again.json()["data"]["authorize_url"]).query)["state"][0]
    denied = app.http.get("/v1/oauth/callback", params={"state": denied_state, "error": "access_denied"})
    assert denied.status_code == 400 and "access_denied" in denied.text
