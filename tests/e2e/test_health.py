"""Source health end to end (issue 33): a timer whose run hangs stalls, says so once on `$errors`,
and recovers once when its run ends; after downtime, missed ticks follow the catch-up policy and
the skipped ones are counted on /health. On a private server of each mode, whose waits are the
test's: the stall check runs every second locally and looks at a source at most every 2 s (not
30), on AWS the sweep looks every 2 s (not every minute), and a tick 2 s later than two intervals
is a stall (not 10: HEADWATER_TICK_GRACE_S)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import BOTH_MODES, Gate, Server, client_for, new_user, running_server

HANGS_FIRST = """export default {
  name: "Hangs once",
  version: "1.0.0",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 2 } }, db: "$.service.db",
           gate: { type: "string" } },
  async run(event) {
    if (!this.db.get("held")) {
      this.db.set("held", true);
      await fetch(this.gate);  // held until the test releases it
    }
    this.$emit({ timestamp: event.timestamp });
  },
};
"""

TICKER = """export default {
  name: "Ticker",
  version: "1.0.0",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 2 } } },
  async run(event) { this.$emit({ timestamp: event.timestamp }); },
};
"""


@pytest.fixture(scope="module", params=BOTH_MODES)
def health_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # a held timer run outlives the default 60 s limit on AWS, where the sweep looks once a minute
    env = {"HEADWATER_STALL_CHECK_S": "1", "HEADWATER_TIMER_TIMEOUT_MS": "240000", "HEADWATER_TICK_GRACE_S": "2",
           "HEADWATER_STALL_MIN_LOOK_S": "2", "HEADWATER_EMULATED_SCHEDULE_S": "2"}
    if request.param != "local":
        env["HEADWATER_BACKEND"] = request.param
    with running_server(Path(tmp_path_factory.mktemp(f"health-{request.param}")), **env) as srv:
        yield srv


@pytest.fixture
def gate() -> Iterator[Gate]:
    held = Gate()
    yield held
    held.release()
    held.close()


def until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout} s for {what}")


def error_codes(api: httpx.Client, source_id: str) -> list[str]:
    items = api.get(f"/sources/{source_id}/event_summaries", params={"event_name": "$errors", "expand": "event"})
    return [e["event"]["error"]["code"] for e in items.json()["data"][::-1]]


def health(api: httpx.Client, source_id: str) -> dict[str, Any]:
    r = api.get(f"/sources/{source_id}/health")
    assert r.status_code == 200, r.text
    return r.json()["data"]  # type: ignore[no-any-return]


def test_a_timer_whose_run_hangs_stalls_once_and_recovers_once(health_server: Server, gate: Gate) -> None:
    with client_for(health_server, new_user(health_server, tier="paid").api_key) as api:
        r = api.post("/sources", json={"component_code": HANGS_FIRST, "configured_props": {"gate": gate.url}})
        assert r.status_code == 200, r.text
        source_id = r.json()["data"]["id"]
        assert gate.arrived.wait(60), "the first tick's run did not start"
        # its run hangs: the ticks meanwhile are skipped, and two intervals on it is stalled
        until("SOURCE_STALLED", lambda: error_codes(api, source_id) == ["SOURCE_STALLED"], 150)
        stalled = health(api, source_id)
        assert stalled["stalled"] is True and stalled["stalled_why"] == "timer"
        assert stalled["stalled_since"] is not None
        gate.release()
        until("SOURCE_RECOVERED", lambda: error_codes(api, source_id)[:2] == ["SOURCE_STALLED", "SOURCE_RECOVERED"],
              60)
        recovered = health(api, source_id)
        codes = error_codes(api, source_id)
        if codes == ["SOURCE_STALLED", "SOURCE_RECOVERED"]:  # (a late tick after it would be a stall again)
            assert recovered["stalled"] is False and recovered["stalled_since"] is None
        assert recovered["last_hour"]["runs"] >= 2 and recovered["last_hour"]["errors"] == 0
        assert recovered["last_event_at"] is not None and recovered["next_tick_at"] is not None
        # the ticks due while it hung did not run (locally they waited in its lane behind the run)
        until("the skipped ticks", lambda: health(api, source_id)["skipped_ticks"] >= 1, 30)
        assert api.get(f"/sources/{source_id}").json()["data"]["catch_up"] == "skip"
        api.delete(f"/sources/{source_id}")


@pytest.mark.local_only("the emulated deployment's data lives in its moto server, which a restart replaces")
def test_missed_ticks_follow_the_catch_up_policy_after_a_restart(health_server: Server) -> None:
    with client_for(health_server, new_user(health_server, tier="paid").api_key) as api:
        ids = {}
        for policy in ("skip", "all"):
            r = api.post("/sources", json={"component_code": TICKER, "catch_up": policy, "name": policy})
            assert r.status_code == 200, r.text
            ids[policy] = r.json()["data"]["id"]
        for source_id in ids.values():
            until("a first tick", lambda source_id=source_id: health(api, source_id)["last_run_at"], 30)
        before = {policy: health(api, source_id) for policy, source_id in ids.items()}

        health_server.stop()
        time.sleep(7)  # down for more than three intervals on purpose: ticks are missed
        health_server.start()

        def caught_up(policy: str) -> dict[str, Any] | None:
            seen = health(api, ids[policy])
            return seen if seen["last_tick_at"] > before[policy]["last_tick_at"] + 6 else None

        skip = until("the skip source's catch-up", lambda: caught_up("skip"), 60)
        assert skip["skipped_ticks"] - before["skip"]["skipped_ticks"] >= 2  # missed, counted, not run
        until("the all source's catch-up", lambda: caught_up("all"), 60)
        stamps = sorted(e["event"]["timestamp"] for e in api.get(
            f"/sources/{ids['all']}/event_summaries", params={"limit": 100, "expand": "event"}).json()["data"])
        assert [b - a for a, b in zip(stamps, stamps[1:], strict=False)] == [2] * (len(stamps) - 1), stamps
        assert health(api, ids["all"])["skipped_ticks"] == before["all"]["skipped_ticks"]
        for source_id in ids.values():
            api.delete(f"/sources/{source_id}")
