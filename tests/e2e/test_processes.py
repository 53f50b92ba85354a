"""`headwater serve` with two serving processes on one port and one store (issue 32): a source's
runs never overlap and stay in order whichever process took its requests in, a serving process
that is killed is started again and nothing it answered is lost, and a stop ends them all."""

from __future__ import annotations

import concurrent.futures
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Server, client_for, make_server, new_user
from tests.e2e.test_shutdown import Proc, Runners, wait_for

COUNTER = """export default {
  name: "Counter",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true }, db: "$.service.db" },
  async run(event) {
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    await this.http.respond({ status: 200, body: { count } });
  },
};
"""

# Each run appends its request's number to `seen` and emits how many it has seen: in order and
# without overlap, the event of request i says i + 1.
SEQUENCE = """export default {
  name: "Sequence",
  version: "0.0.1",
  props: { http: "$.interface.http", db: "$.service.db" },
  async run(event) {
    const seen = this.db.get("seen") ?? [];
    seen.push(event.body.i);
    this.db.set("seen", seen);
    this.$emit({ i: event.body.i, seen: seen.length }, { id: String(event.body.i) });
  },
};
"""


TICKS = """export default {
  name: "Ticks",
  version: "0.0.1",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 1 } } },
  async run(event) { this.$emit({ due: event.timestamp }); },
};
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = make_server(tmp_path_factory.mktemp("processes"), HEADWATER_PROCESSES="2")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def serving(srv: Server) -> list[Proc]:
    """The serving processes the service (its supervisor) has started and that are running."""
    assert srv.process is not None
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = (Path("/proc") / entry / "stat").read_text()
        except OSError:
            continue
        after = fields[fields.rindex(")") + 2:].split()
        if int(after[1]) == srv.process.pid and after[0] != "Z":
            found.append(Proc(int(entry), after[19]))
    return found


def deploy(srv: Server, api: httpx.Client, code: str) -> tuple[str, str]:
    r = api.post("/sources", json={"component_code": code})
    assert r.status_code == 200, r.text
    source = r.json()["data"]
    return source["id"], source["configured_props"]["http"]["endpoint_url"]


def events(api: httpx.Client, source_id: str) -> list[dict]:
    r = api.get(f"/sources/{source_id}/event_summaries", params={"limit": 100})
    assert r.status_code == 200, r.text
    return [e["event"] for e in r.json()["data"]]


def test_the_service_runs_two_serving_processes_on_its_port(service: Server) -> None:
    assert len(serving(service)) == 2
    assert httpx.get(service.base_url + "/healthz", timeout=30).status_code == 200


def test_concurrent_requests_to_one_source_never_overlap_across_processes(service: Server) -> None:
    """80 requests at once, taken in by both processes: each run read the count the one before it
    wrote (a run overlapping another, or reading a copy another process had changed, repeats one)."""
    with client_for(service, new_user(service, tier="paid").api_key) as api:
        _, url = deploy(service, api, COUNTER)
        with httpx.Client(timeout=60) as http, concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda i: http.post(url, json={"i": i}), range(80)))
    assert [a.status_code for a in answers] == [200] * 80, [a.text for a in answers if a.status_code != 200][:3]
    assert sorted(a.json()["count"] for a in answers) == list(range(1, 81))


def test_a_sources_runs_stay_in_the_order_its_requests_were_answered(service: Server) -> None:
    with client_for(service, new_user(service, tier="paid").api_key) as api:
        source_id, url = deploy(service, api, SEQUENCE)
        with httpx.Client(timeout=60) as http:  # a new connection each: either process may take it
            for i in range(60):
                assert http.post(url, json={"i": i}, headers={"Connection": "close"}).status_code == 200
        emitted = wait_for("the 60th run", lambda: found if len(found := events(api, source_id)) == 60 else None)
    assert sorted((e["i"], e["seen"]) for e in emitted) == [(i, i + 1) for i in range(60)]


def test_a_timer_ticks_once_for_each_due_time(service: Server) -> None:
    """Both processes look at the timers; each tick is fired by one (a tick fired twice emits its
    due time twice)."""
    with client_for(service, new_user(service, tier="paid").api_key) as api:
        r = api.post("/sources", json={"component_code": TICKS})
        assert r.status_code == 200, r.text
        source_id = r.json()["data"]["id"]
        ticks = wait_for("five ticks", lambda: found if len(found := events(api, source_id)) >= 5 else None)
        api.delete(f"/sources/{source_id}")
    dues = [t["due"] for t in ticks]
    assert len(set(dues)) == len(dues), dues


def test_a_killed_serving_process_is_started_again_and_loses_nothing_it_answered(service: Server) -> None:
    with client_for(service, new_user(service, tier="paid").api_key) as api:
        source_id, url = deploy(service, api, SEQUENCE)
        before = serving(service)
        with httpx.Client(timeout=60) as http:
            answered = []
            for i in range(40):
                if i == 20:
                    os.kill(before[0].pid, signal.SIGKILL)
                try:
                    if http.post(url, json={"i": i}, headers={"Connection": "close"}).status_code == 200:
                        answered.append(i)
                except httpx.TransportError:
                    pass  # taken in by the process as it died: not answered, so not promised
        assert len(answered) >= 30
        wait_for("a new serving process", lambda: True if before[0] not in (now := serving(service))
                 and len(now) == 2 else None)

        def all_answered() -> list[dict] | None:
            found = events(api, source_id)
            return found if {e["i"] for e in found} >= set(answered) else None

        emitted = wait_for("every answered request's run", all_answered)
    # in order: each run saw every run before it (and one whose request went unanswered may be among them)
    assert [e["seen"] for e in sorted(emitted, key=lambda e: e["seen"])] == list(range(1, len(emitted) + 1))


def test_a_stop_ends_every_serving_process_and_their_runners(service: Server) -> None:
    assert service.process is not None
    with client_for(service, new_user(service, tier="paid").api_key) as api:
        _, url = deploy(service, api, COUNTER)
        assert httpx.post(url, json={}, timeout=60).status_code == 200
    runners = Runners.of(service.process.pid)
    assert len(runners.procs) >= 3  # two serving processes and a runner at least
    if service.admin is not None:  # the tests' warm `headwater` process: it claims cgroups of its own too
        service.admin.close()
        service.admin = None
    service.process.send_signal(signal.SIGTERM)
    service.process.wait(timeout=60)
    procs, dirs = runners.left()
    assert procs == [] and dirs == [], f"left behind: processes {procs}, cgroups {dirs}"
    # nor what the serving process killed above left (its runners are no longer below the service)
    assert list((service.data_dir / "run").glob("cgroup-headwater-*.lock")) == []
