"""The HTTP interface of sources (`/http/{endpoint_id}[/sub/path]`, any method) in-process over the
fakes: which requests reach a source as an event, and which are 404 or 413. Moved from
tests/e2e/test_http_requests.py, which keeps the event's shape and each of these errors once per
deployment (through the local server and the emulated API Gateway and Lambda handlers)."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from headwater.domain.commands import RunSource
from tests.api.conftest import App
from tests.services.test_services import HTTP, component_code

LIMIT = 512 * 1024  # the endpoints' default body limit (HEADWATER_HTTP_MAX_BODY_BYTES)


def deploy(api: httpx.Client) -> tuple[str, str]:
    """An HTTP source: (its id, its endpoint's path)."""
    r = api.post("/sources", json={"component_code": component_code(configurable_props=HTTP)})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    return data["id"], urlsplit(data["configured_props"]["http"]["endpoint_url"]).path


def events_to(app: App, source_id: str) -> list:
    """The events queued to run for the source (and taken off the queue)."""
    queued = [c for c in app.world.queue.of(RunSource) if c.source_id == source_id]
    app.world.queue.pending[:] = [p for p in app.world.queue.pending
                                  if not (isinstance(p[0].command, RunSource) and p[0].command.source_id == source_id)]
    return [c.event for c in queued]


@pytest.mark.parametrize("method", ["DELETE", "OPTIONS", "HEAD"])
def test_any_method_reaches_the_source(app: App, api: httpx.Client, method: str) -> None:
    sid, path = deploy(api)
    r = app.http.request(method, path + "/m")
    assert r.status_code == 200
    [event] = events_to(app, sid)
    assert (event["method"], event["path"]) == (method, "/m")


def test_default_body_limit_is_512_kb(app: App, api: httpx.Client) -> None:
    sid, path = deploy(api)
    r = app.http.post(path, content=b"a" * (LIMIT + 1), headers={"content-type": "text/plain"})
    assert r.status_code == 413
    assert "error" in r.json()
    assert app.http.post(path, content=b"a" * LIMIT, headers={"content-type": "text/plain"}).status_code == 200
    assert [len(e["bodyRaw"]) for e in events_to(app, sid)] == [LIMIT]


def test_unknown_endpoint_is_404(app: App) -> None:
    for path in ("/http/en_doesnotexist000000000000", "/http/en_doesnotexist000000000000/sub"):
        r = app.http.post(path, json={})
        assert r.status_code == 404
        assert "error" in r.json()


def test_inactive_source_is_404_until_reactivated(app: App, api: httpx.Client) -> None:
    sid, path = deploy(api)
    r = api.put(f"/sources/{sid}", json={"active": False})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["active"] is False
    assert app.http.post(path, json={"n": 1}).status_code == 404
    assert app.http.get(path + "/sub").status_code == 404
    assert api.put(f"/sources/{sid}", json={"active": True}).status_code == 200
    assert app.http.post(path, json={"n": 2}).status_code == 200
    assert [e["body"] for e in events_to(app, sid)] == [{"n": 2}]


def test_deleted_source_is_404(app: App, api: httpx.Client) -> None:
    sid, path = deploy(api)
    assert api.delete(f"/sources/{sid}").status_code == 204
    assert app.http.post(path, json={}).status_code == 404
    assert api.get(f"/sources/{sid}/event_summaries").status_code == 404
