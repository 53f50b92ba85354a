"""GET /v1/sources/{id}/schedule, in-process over the fakes: a timer source's schedule and next run,
none while paused, 404 for a source without a timer."""

from __future__ import annotations

import time

import httpx

from tests.api.conftest import App

TIMED = repr({"name": "Timed", "version": "0.0.1", "type": "source", "key": "schedule-timed",
              "configurable_props": [{"name": "timer", "type": "$.interface.timer",
                                      "default": {"intervalSeconds": 300}}]})
UNTIMED = repr({"name": "Untimed", "version": "0.0.1", "type": "source", "key": "schedule-untimed",
                "configurable_props": [{"name": "db", "type": "$.service.db"}]})


def test_a_timer_sources_schedule_shows_its_next_run_and_none_while_paused(api: httpx.Client) -> None:
    r = api.post("/sources/", json={"component_code": TIMED, "configured_props": {"timer": {"intervalSeconds": 600}}})
    assert r.status_code == 200, r.text
    source = r.json()["data"]
    schedule = api.get(f"/sources/{source['id']}/schedule").json()["data"]
    assert schedule["cron"] is None and schedule["interval_seconds"] == 600 and schedule["active"] is True
    assert schedule["last_run_at"] is None
    assert source["updated_at"] < schedule["next_run_at"] <= time.time() + 600

    assert api.put(f"/sources/{source['id']}", json={"active": False}).status_code == 200
    paused = api.get(f"/sources/{source['id']}/schedule").json()["data"]
    assert paused["active"] is False and paused["next_run_at"] is None


def test_a_cron_schedule_gives_its_time_zone(api: httpx.Client) -> None:
    r = api.post("/sources/", json={"component_code": TIMED, "configured_props": {
        "timer": {"cron": "0 9 * * 1-5", "timezone": "Europe/Paris"}}})
    schedule = api.get(f"/sources/{r.json()['data']['id']}/schedule").json()["data"]
    assert schedule["cron"] == "0 9 * * 1-5" and schedule["timezone"] == "Europe/Paris"
    assert schedule["next_run_at"] > time.time()


def test_a_source_without_a_timer_or_of_someone_else_has_no_schedule(api: httpx.Client, app: App) -> None:
    untimed = api.post("/sources/", json={"component_code": UNTIMED}).json()["data"]
    r = api.get(f"/sources/{untimed['id']}/schedule")
    assert r.status_code == 404 and "has no timer" in r.json()["error"]
    timed = api.post("/sources/", json={"component_code": TIMED}).json()["data"]
    assert app.client().get(f"/sources/{timed['id']}/schedule").status_code == 404
