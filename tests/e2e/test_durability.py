"""kill -9 in the middle of an ingest stream: every request answered 200 has its event."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import Server, client_for, make_server, new_user

RECORDER = """export default {
  name: "Recorder",
  version: "1.0.0",
  props: { http: { type: "$.interface.http", customResponse: CUSTOM }, db: "$.service.db" },
  async run(event) {
    if (event.report) {
      this.$emit({ seen: this.db.get("seen") || [] }, { name: "report" });
      return;
    }
    const seen = this.db.get("seen") || [];
    seen.push(event.body.n);
    this.db.set("seen", seen);
    if (CUSTOM) this.http.respond({ status: 200, body: "recorded" });
  },
};
"""


def runner_processes(data_dir: Path) -> list[int]:
    """Node runners started for this data dir (their command line names its tmp dir)."""
    marker = f"--allow-fs-write={data_dir / 'tmp'}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One service for both tests (a start and a stop fewer): each kills it -9 mid-stream and starts
    it again, so the second kill is of a service that recovered from the first."""
    server = make_server(tmp_path_factory.mktemp("durability"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("custom", [False, True], ids=["default-response", "custom-response"])
def test_every_acknowledged_request_survives_kill_9(server: Server, custom: bool) -> None:
    """A customResponse request is answered by its run, before the run's outcome commits: what
    makes it durable is its task, committed before the run started, which runs again."""
    check_kill_9(server, custom)


def check_kill_9(server: Server, custom: bool = False) -> None:
    tmp_path = server.data_dir
    owner = new_user(server, tier="paid")  # 2000 requests: past the free tier's daily quota
    code = RECORDER.replace("CUSTOM", "true" if custom else "false")
    with client_for(server, owner.api_key) as api:
        source = api.post("/sources", json={"component_code": code}).json()["data"]
    url = source["configured_props"]["http"]["endpoint_url"]

    acknowledged: set[int] = set()
    lock = threading.Lock()
    killed = threading.Event()

    def send(n: int) -> None:
        if killed.is_set():
            return
        try:
            r = httpx.post(url, json={"n": n}, timeout=10)
        except httpx.TransportError:
            return
        if r.status_code == 200:
            with lock:
                acknowledged.add(n)
                if len(acknowledged) == 400:
                    server.stop(kill=True)
                    killed.set()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(send, range(2000)))
    assert killed.is_set() and len(acknowledged) >= 400
    deadline = time.monotonic() + 30
    while runner_processes(tmp_path):
        assert time.monotonic() < deadline, "runner processes outlived the killed service"
        time.sleep(0.05)

    server.start()
    with client_for(server, owner.api_key) as api:
        deadline = time.monotonic() + 60
        seen: set[int] = set()
        while time.monotonic() < deadline:
            before = api.get(f"/sources/{source['id']}/event_summaries", params={"event_name": "report"})
            count = before.json()["page_info"]["total_count"]
            assert api.post(f"/sources/{source['id']}/run", json={"report": True}).status_code == 202
            while time.monotonic() < deadline:
                r = api.get(f"/sources/{source['id']}/event_summaries",
                            params={"event_name": "report", "expand": "event", "limit": 1}).json()
                if r["page_info"]["total_count"] > count:
                    seen = set(r["data"][0]["event"]["seen"])
                    break
                time.sleep(0.05)
            if acknowledged <= seen:
                break
        missing = sorted(acknowledged - seen)
        assert not missing, f"{len(missing)} acknowledged requests lost, e.g. {missing[:10]}"
