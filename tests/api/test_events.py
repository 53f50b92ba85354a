"""A source's events over /v1, in-process over the fakes: what a delete refuses and removes, and what
event_summaries answers (truncation, limits, channels, an item's shape)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from headwater.domain.events import Emit
from headwater.domain.runs import RunResult
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


# Moved from tests/e2e/test_runs.py (which keeps one range delete after real runs on SQLite; each
# range on every store is tests/contract/test_store_events.py): what a delete removes and what
# event_summaries answers, the events a run of FakeRunner emitted.


def emitted(app: App, api: httpx.Client, *emits: Emit) -> str:
    """A source whose one manual run emitted `emits`, the run done."""
    sid = deploy(api)
    app.world.runner.script = lambda instance, event: RunResult(emits=list(emits))
    assert api.post(f"/sources/{sid}/run", json={}).status_code == 202
    app.world.queue.drain()
    return sid


def summaries(api: httpx.Client, sid: str, **params: Any) -> dict:
    r = api.get(f"/sources/{sid}/event_summaries", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def ten_events(app: App, api: httpx.Client) -> tuple[str, list[str]]:
    """A source with ten default-channel events; returns (source id, event ids oldest first)."""
    sid = emitted(app, api, *(Emit({"n": n}, {"id": n}) for n in range(10)))
    items = summaries(api, sid)["data"]
    assert [i["event"]["n"] for i in items] == list(range(9, -1, -1))
    return sid, [i["id"] for i in reversed(items)]


def delete(app: App, api: httpx.Client, sid: str, expected: list[str], **params: str) -> None:
    r = api.delete(f"/sources/{sid}/events", params=params)
    assert r.status_code == 202, r.text
    assert r.content == b""
    app.world.queue.drain()
    assert [i["id"] for i in reversed(summaries(api, sid)["data"])] == expected


def test_delete_all_events(app: App, api: httpx.Client) -> None:
    sid, _ = ten_events(app, api)
    delete(app, api, sid, [])
    assert summaries(api, sid)["page_info"]["total_count"] == 0


def test_delete_from_start_id(app: App, api: httpx.Client) -> None:
    sid, ids = ten_events(app, api)
    delete(app, api, sid, ids[:6], start_id=ids[6])


def test_delete_up_to_end_id(app: App, api: httpx.Client) -> None:
    sid, ids = ten_events(app, api)
    delete(app, api, sid, ids[4:], end_id=ids[3])


def test_delete_inclusive_range(app: App, api: httpx.Client) -> None:
    sid, ids = ten_events(app, api)
    delete(app, api, sid, ids[:2] + ids[8:], start_id=ids[2], end_id=ids[7])
    delete(app, api, sid, ids[:1] + ids[8:], start_id=ids[1], end_id=ids[1])  # the same id: that one


def three_channels(app: App, api: httpx.Client) -> str:
    """A source with one event on each of the default channel, "alerts" and "$logs"."""
    sid = emitted(app, api, Emit({"n": 1}), Emit({"n": 2}, {"name": "alerts"}),
                  Emit({"level": "log", "message": "logged"}, {"name": "$logs"}))
    for channel in ("", "alerts", "$logs"):
        assert summaries(api, sid, event_name=channel)["page_info"]["total_count"] == 1, channel
    return sid


def test_delete_only_touches_the_named_channel(app: App, api: httpx.Client) -> None:
    sid = three_channels(app, api)
    assert api.delete(f"/sources/{sid}/events", params={"event_name": "alerts"}).status_code == 202
    app.world.queue.drain()
    assert summaries(api, sid, event_name="alerts")["data"] == []
    assert summaries(api, sid)["page_info"]["total_count"] == 1
    assert summaries(api, sid, event_name="$logs")["page_info"]["total_count"] == 1


def test_delete_without_event_name_clears_every_channel(app: App, api: httpx.Client) -> None:
    sid = three_channels(app, api)
    assert api.delete(f"/sources/{sid}/events").status_code == 202
    app.world.queue.drain()
    for channel in ("", "alerts", "$logs"):
        assert summaries(api, sid, event_name=channel)["data"] == [], channel


def test_truncation_over_1kb_and_expand(app: App, api: httpx.Client) -> None:
    sid = emitted(app, api, Emit("x" * 1022, {"id": "fits"}), Emit("x" * 1023, {"id": "over"}),
                  Emit({"big": "y" * 3000, "n": 1}, {"id": "big"}))
    items = {i["metadata"]["id"]: i["event"] for i in summaries(api, sid)["data"]}
    assert items["fits"] == "x" * 1022  # JSON of 1024 bytes
    assert items["over"] == {"$truncated": True, "size": 1025, "preview": '"' + "x" * 1023}
    big_json = json.dumps({"big": "y" * 3000, "n": 1}, separators=(",", ":"))
    assert items["big"] == {"$truncated": True, "size": len(big_json), "preview": big_json[:1024]}
    expanded = {i["metadata"]["id"]: i["event"] for i in summaries(api, sid, expand="event")["data"]}
    assert expanded["over"] == "x" * 1023
    assert expanded["big"] == {"big": "y" * 3000, "n": 1}


def test_limit_param(app: App, api: httpx.Client) -> None:
    sid, ids = ten_events(app, api)
    page = summaries(api, sid, limit=5)
    assert page["page_info"]["total_count"] == 10
    assert page["page_info"]["count"] == 5
    assert [i["id"] for i in page["data"]] == list(reversed(ids))[:5]
    assert summaries(api, sid)["page_info"]["count"] == 10  # default is up to 100
    assert len(summaries(api, sid, limit=100)["data"]) == 10
    for bad in ("0", "101", "-1", "abc"):
        r = api.get(f"/sources/{sid}/event_summaries", params={"limit": bad})
        assert r.status_code == 400, (bad, r.text)


def test_event_name_filters_a_custom_channel(app: App, api: httpx.Client) -> None:
    sid = emitted(app, api, Emit({"kind": "default"}),
                  Emit({"kind": "alert", "n": 1}, {"name": "alerts", "summary": "first alert"}),
                  Emit({"kind": "alert", "n": 2}, {"name": "alerts"}), Emit({"kind": "other"}, {"name": "other"}))
    alerts = summaries(api, sid, event_name="alerts")["data"]
    assert [i["event"] for i in alerts] == [{"kind": "alert", "n": 2}, {"kind": "alert", "n": 1}]
    assert [i["metadata"]["name"] for i in alerts] == ["alerts", "alerts"]
    assert alerts[1]["metadata"]["summary"] == "first alert"
    default = summaries(api, sid)["data"]
    assert [i["event"] for i in default] == [{"kind": "default"}]
    assert default[0]["metadata"]["name"] == ""
    assert [i["event"] for i in summaries(api, sid, event_name="other")["data"]] == [{"kind": "other"}]
    empty = summaries(api, sid, event_name="nothing-here")
    assert empty["data"] == []
    assert empty["page_info"]["total_count"] == 0


def test_summary_item_shape(app: App, api: httpx.Client) -> None:
    sid = emitted(app, api, Emit({"a": 1}, {"id": "e1", "summary": "s1", "ts": 1700000000000}))
    [item] = summaries(api, sid)["data"]
    assert set(item) == {"id", "indexed_at_ms", "event", "metadata"}
    assert isinstance(item["indexed_at_ms"], int)
    assert item["event"] == {"a": 1}
    meta = item["metadata"]
    assert {k: meta[k] for k in ("emitter_id", "name", "summary", "id", "ts")} == {
        "emitter_id": sid, "name": "", "summary": "s1", "id": "e1", "ts": 1700000000000,
    }
    assert isinstance(meta["emit_id"], str) and meta["emit_id"]
