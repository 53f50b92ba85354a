"""Listing and searching the registry (DECISIONS Extensions), as the third-party Go client calls it."""

from __future__ import annotations

from pathlib import Path

import httpx

from headwater.services.registry import SHIPPED_MARKER
from tests.conftest import client_for, new_user, running_server


def test_registry_lists_published_components_newest_first(api: httpx.Client) -> None:
    page = api.get("/components/registry", params={"limit": 100}).json()
    keys = [c["key"] for c in page["data"]]
    assert {"headwater-http", "headwater-schedule", "headwater-emit"} <= set(keys)
    assert page["page_info"]["total_count"] >= 6
    first = api.get("/components/registry", params={"limit": 2}).json()
    second = api.get("/components/registry", params={"limit": 2, "after": first["page_info"]["end_cursor"]}).json()
    assert not {c["id"] for c in first["data"]} & {c["id"] for c in second["data"]}
    assert api.get("/components/registry", params={"limit": 0}).status_code == 400


def test_search_by_words_type_and_app(api: httpx.Client) -> None:
    found = api.get("/components/search", params={"query": "http"}).json()
    assert "headwater-http" in found["sources"] and "headwater-http-request" in found["actions"]
    assert found["sources"][0] == "headwater-http"  # the key matches best
    only_actions = api.get("/components/search", params={"query": "emit", "type": "action"}).json()
    assert only_actions["sources"] == [] and "headwater-emit" in only_actions["actions"]
    none = api.get("/components/search", params={"query": "nothing-matches-this"}).json()
    assert none == {"sources": [], "actions": []}
    by_app = api.get("/components/search", params={"query": "", "app": "headwater"}).json()
    assert "headwater-schedule" in by_app["sources"]
    assert api.get("/components/search", params={"query": "x", "type": "workflow"}).status_code == 400


def test_a_published_key_is_still_fetched_by_key(api: httpx.Client) -> None:
    assert api.get("/components/registry/headwater-http").json()["data"]["key"] == "headwater-http"


def test_a_new_service_publishes_the_shipped_registry_when_it_starts(tmp_path: Path) -> None:
    """The other test servers start from a copy of a data dir where a start did this once
    (tests/conftest.py, RegistryTemplate): this one does it itself."""
    with running_server(tmp_path, publish_at_start=True) as srv:
        assert (tmp_path / SHIPPED_MARKER).exists(), (tmp_path / "server.log").read_text()[-3000:]
        with client_for(srv, new_user(srv).api_key) as api:
            keys = {c["key"] for c in api.get("/components/registry", params={"limit": 100}).json()["data"]}
        assert {"headwater-http", "headwater-schedule", "headwater-emit", "headwater-http-request"} <= keys, keys
