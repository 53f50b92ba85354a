"""A source's events over /v1, in-process over the fakes: what a delete refuses. What events a
delete removes (from the real store, after real runs) is tests/e2e/test_runs.py."""

from __future__ import annotations

import httpx
import pytest

from tests.api.conftest import App
from tests.services.test_services import HTTP, component_code


def deploy(api: httpx.Client) -> str:
    r = api.post("/sources", json={"component_code": component_code(configurable_props=HTTP)})
    assert r.status_code == 200, r.text
    return r.json()["data"]["id"]


@pytest.mark.parametrize("param", ["start_id", "end_id"])
@pytest.mark.parametrize("value", ["abc", "123", "1-x", "-1"])
def test_delete_with_bad_id_is_400(api: httpx.Client, param: str, value: str) -> None:
    sid = deploy(api)
    r = api.delete(f"/sources/{sid}/events", params={param: value})
    assert r.status_code == 400, r.text
    assert "error" in r.json()


def test_delete_events_of_unknown_source_is_404(app: App, api: httpx.Client) -> None:
    r = api.delete("/sources/dc_doesnotexist0000000000000/events")
    assert r.status_code == 404
    assert "error" in r.json()
    assert api.get("/sources/dc_doesnotexist0000000000000/event_summaries").status_code == 404
    # someone else's source is just as unknown
    sid = deploy(api)
    other = app.client(tier="free")
    assert other.delete(f"/sources/{sid}/events").status_code == 404
    assert other.get(f"/sources/{sid}/event_summaries").status_code == 404
