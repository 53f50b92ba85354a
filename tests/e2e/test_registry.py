"""Listing and searching the registry (DECISIONS Extensions), as the third-party Go client calls it."""

from __future__ import annotations

import httpx


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
