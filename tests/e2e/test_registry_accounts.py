"""A registry component deployed with `authProvisionId` (issue 22): an app folder in the public
registry's layout (tests/components/registry_keyed: `<app>.app.mjs` whose requests go through
`axios` from `@pipedream/platform` with a base URL and a token from `this.<app>.$auth`, a polling
source spreading `sources/common/base.mjs`) published with `headwater registry publish`, an API-key
account created for its app, the source deployed by key naming the account; its run reaches a
loopback stand-in of the app's API with the account's token, and the token is in no answer and
no line of the server's log."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import COMPONENTS, Server, client_for, new_user
from tests.e2e.test_sources_api import events_of, wait_events

APP = COMPONENTS / "registry_keyed"
KEY = "hwtest_docstore-new-document"
DOCUMENTS = [{"id": 7, "title": "Lease", "createdAt": "2026-01-02T10:00:00Z"},
             {"id": 8, "title": "Offer", "createdAt": "2026-01-03T10:00:00Z"}]


class StandIn:
    """The app's API on loopback: the documents for the right token, a 401 otherwise."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.seen: list[tuple[str, str | None]] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                url = urlsplit(self.path)
                authorization = self.headers.get("Authorization")
                stand_in.seen.append((url.path, authorization))
                page = parse_qs(url.query).get("page", ["1"])[0]
                ok = url.path == "/docs/api/v1/documents" and authorization == stand_in.token
                body = json.dumps({"documents": DOCUMENTS if page == "1" else []} if ok else {"error": "no"})
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: object) -> None:
                pass
        return Handler


@pytest.fixture
def stand_in() -> Iterator[tuple[StandIn, str]]:
    api = StandIn("tok-" + uuid.uuid4().hex)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield api, f"http://127.0.0.1:{httpd.server_address[1]}/docs"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_published_registry_component_runs_with_the_account_it_names(
        local_server: Server, stand_in: tuple[StandIn, str]) -> None:
    api_of, base_url = stand_in
    published = local_server.cli("registry", "publish", str(APP))
    [result] = published["results"]
    assert (result["file"], result["key"], result["status"]) == (
        "sources/new-document/new-document.mjs", KEY, "published"), result
    answers: list[str] = []
    with client_for(local_server, new_user(local_server).api_key) as api:
        api.event_hooks["response"].append(lambda r: answers.append(r.read().decode()))
        account = api.post("/accounts", json={"app": "hwtest_docstore", "credentials": {
            "url": base_url, "api_token": api_of.token}})
        assert account.status_code == 200, account.text
        account_id = account.json()["data"]["id"]
        source = api.post("/sources", json={"component_key": KEY, "configured_props": {
            "hwtest_docstore": {"authProvisionId": account_id}}})
        assert source.status_code == 200, source.text
        source_id = source.json()["data"]["id"]
        assert source.json()["data"]["configured_props"]["hwtest_docstore"] == {"authProvisionId": account_id}

        assert api.post(f"/sources/{source_id}/run", json={}).status_code < 300
        emitted = events_of(wait_events(api, source_id, 2))
        assert sorted(e["id"] for e in emitted) == [7, 8]
        assert wait_events(api, source_id, 0, "$errors") == []
    assert ("/docs/api/v1/documents", api_of.token) in api_of.seen
    assert all(token == api_of.token for _, token in api_of.seen)
    assert not any(api_of.token in body for body in answers)
    assert api_of.token not in (local_server.data_dir / "server.log").read_text(errors="replace")
