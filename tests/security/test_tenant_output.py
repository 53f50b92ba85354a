"""Nothing proportional to one tenant's output runs on the shared event loop (issue 31): a
`POST /v1/components/run` whose component emits 500,000 events answers a bounded answer, made off
the event loop; a page of sources whose props are as large as allowed, and SSE replays of large
events, are encoded off it too, while the service's other requests (`/healthz`) go on being
answered."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from tests.conftest import Server, client_for, new_user

FLOOD = """export default {
  name: "flood", version: "1",
  async run() {
    for (let i = 0; i < 500000; i++) this.$emit({ i });
    for (let i = 0; i < 3000; i++) console.log(`line ${i}`);
  },
};
"""
WIDE = """export default {
  name: "wide", version: "1",
  props: { PROPS },
  async run() {},
};
""".replace("PROPS", ", ".join(f'p{i}: {{ type: "integer[]" }}' for i in range(15)))
BULKY = """export default {
  name: "bulky", version: "1",
  props: { http: "$.interface.http" },
  async run() {
    for (let i = 0; i < 30; i++) this.$emit({ i, zeros: new Array(250000).fill(0) }, { id: `bulky-${i}` });
  },
};
"""
SOURCES = 8
HEALTHY_WITHIN_S = 3.0  # generous: an idle service answers in milliseconds


@pytest.fixture
def server(local_server: Server) -> Server:
    """The session's local service: this module needs no settings of its own (each test makes its
    own users)."""
    return local_server


def slowest_health_answer(server: Server, busy: threading.Thread) -> float:
    """/healthz asked again and again while `busy` runs: its slowest answer, in seconds."""
    slowest = 0.0
    with httpx.Client(timeout=60) as client:
        while busy.is_alive():
            started = time.monotonic()
            assert client.get(server.base_url + "/healthz").status_code == 200
            slowest = max(slowest, time.monotonic() - started)
            time.sleep(0.05)
    return slowest


def test_a_run_emitting_500000_events_answers_bounded_and_the_loop_stays_free(server: Server) -> None:
    api = client_for(server, new_user(server, tier="paid").api_key)
    answer: dict[str, Any] = {}

    def run() -> None:
        response = api.post("/components/run", json={"component_code": FLOOD}, timeout=300)
        answer.update(status=response.status_code, size=len(response.content), body=response.json())
    busy = threading.Thread(target=run)
    busy.start()
    slowest = slowest_health_answer(server, busy)
    busy.join()

    assert answer["status"] == 200, str(answer)[:2000]
    data = answer["body"]["data"]
    assert slowest < HEALTHY_WITHIN_S, f"/healthz took {slowest:.1f} s while the run's answer was made"
    assert answer["size"] <= 4 * 1024 * 1024 + 64 * 1024, answer["size"]
    assert len(data["emits"]) == 1000 and data["emits"][0]["event"] == {"i": 0}
    assert len(data["logs"]) == 1000 and data["logs"][0]["message"] == "line 0"
    assert data["truncated"]["emits"] == 500000 and data["truncated"]["logs"] == 3000
    assert "500000" in data["truncated"]["message"].replace(",", "")




def test_a_page_of_sources_with_the_largest_props_is_encoded_off_the_loop(server: Server) -> None:
    """Eight sources, each with 15 props of 21,000 integers (63 KB apiece as the limit counts, about
    the most a prop may hold): on base, encoding their page on the event loop stalled /healthz ~8 s."""
    api = client_for(server, new_user(server, tier="paid").api_key)
    props = {f"p{i}": [0] * 21_000 for i in range(15)}
    for _ in range(SOURCES):
        created = api.post("/sources", json={"component_code": WIDE, "configured_props": props}, timeout=120)
        assert created.status_code == 200, created.text[:2000]
    answer: dict[str, Any] = {}

    def listing() -> None:
        response = api.get("/users/me/sources", params={"limit": SOURCES}, timeout=300)
        answer.update(status=response.status_code, body=response.json())
    busy = threading.Thread(target=listing)
    busy.start()
    slowest = slowest_health_answer(server, busy)
    busy.join()
    assert answer["status"] == 200 and len(answer["body"]["data"]) == SOURCES
    assert answer["body"]["data"][0]["configured_props"]["p0"] == [0] * 21_000
    assert slowest < HEALTHY_WITHIN_S, f"/healthz took {slowest:.1f} s while the page was encoded"


def test_sse_replays_of_large_events_are_framed_off_the_loop(server: Server) -> None:
    """Four streams replaying 30 retained events of 250,000 integers each (`Last-Event-ID: 0-0`):
    on base each frame was JSON-encoded on the event loop, and /healthz stalled for seconds."""
    api = client_for(server, new_user(server, tier="paid").api_key)
    created = api.post("/sources", json={"component_code": BULKY}).json()["data"]
    assert httpx.post(created["configured_props"]["http"]["endpoint_url"], json={}, timeout=60).status_code == 200
    deadline = time.monotonic() + 120
    while len(api.get(f"/sources/{created['id']}/event_summaries").json()["data"]) < 30:
        assert time.monotonic() < deadline, "the 30 events were not stored"
        time.sleep(0.2)
    frames: list[int] = []

    def replay() -> None:
        seen = 0
        with httpx.stream("GET", f"{server.base_url}/v1/sources/{created['id']}/sse", timeout=120,
                          headers={"Authorization": api.headers["authorization"], "Last-Event-ID": "0-0"}) as stream:
            for line in stream.iter_lines():
                seen += line.startswith("id: ")
                if seen == 30:
                    break
        frames.append(seen)
    readers = [threading.Thread(target=replay) for _ in range(4)]
    for reader in readers:
        reader.start()
    busy = threading.Thread(target=lambda: [reader.join() for reader in readers])
    busy.start()
    slowest = slowest_health_answer(server, busy)
    busy.join()
    assert frames == [30] * 4
    assert slowest < HEALTHY_WITHIN_S, f"/healthz took {slowest:.1f} s while the streams replayed"
