"""How soon an event reaches a client following a source's SSE stream (issue 35: within 2 s at p99
on the AWS deployment), measured against the local service or the emulated AWS deployment.

    .venv/bin/python bench/sse_latency.py [--mode local|aws-emulated] [--events 100] [--gap-ms 700]

A standard EventSource client (the npm `eventsource` package, tests/e2e/clients/eventsource.mjs)
follows a plain HTTP source while the bench sends it `--events` requests, one after another, each
after a random pause of up to `--gap-ms`. Per event: `stored` is the time from the event's id (the
millisecond its run's commit gave it) to the client's having it; `sent` is from the request's
answer (the run is queued then, so this adds the queue and the run). On AWS the stream is a series
of answers API Gateway buffers whole, the client reconnecting with Last-Event-ID after each
(docs/aws.md, Consistency with local); locally one stream carries every event. Prints one JSON
document: percentiles in ms, and how many events were missed or came twice.
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conftest import client_for, new_user, running_server  # noqa: E402
from tests.e2e.test_sse import CLIENT, EMITTER, NODE, WEB  # noqa: E402


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}

    def at(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1)

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": round(ordered[-1], 1), "n": len(ordered)}


def follow(base_url: str, key: str, path: str, into: queue.Queue[tuple[float, dict[str, Any]]]) -> subprocess.Popen:
    process = subprocess.Popen(
        [str(NODE), str(CLIENT), f"{base_url}/v1{path}", key, str(WEB / "node_modules" / "eventsource")],
        cwd=WEB, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    opened = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            into.put((time.time(), json.loads(line)))

    def errors() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if line.strip() == "open":
                opened.set()

    threading.Thread(target=read, daemon=True).start()
    threading.Thread(target=errors, daemon=True).start()
    if not opened.wait(60):
        raise RuntimeError("the EventSource client did not open the stream within 60 s")
    return process


def measure(mode: str, events: int, gap_ms: int) -> dict[str, Any]:
    extra = {"HEADWATER_BACKEND": "aws-emulated"} if mode == "aws-emulated" else {}
    with running_server(Path(tempfile.mkdtemp(prefix="sse-bench-")), **extra) as server:
        user = new_user(server, tier="paid")
        with client_for(server, user.api_key) as api:
            source = api.post("/sources", json={"component_code": EMITTER}).json()["data"]
            url = source["configured_props"]["http"]["endpoint_url"]
            arrived: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
            follower = follow(server.base_url, user.api_key, f"/sources/{source['id']}/sse", arrived)
            answered: dict[int, float] = {}
            try:
                with httpx.Client(timeout=60) as http:
                    for n in range(events):
                        time.sleep(random.uniform(0, gap_ms / 1000))  # noqa: S311 - pacing, not secrets
                        assert http.post(url, json={"n": n}).status_code == 200
                        answered[n] = time.time()
                got: list[tuple[float, dict[str, Any]]] = []
                deadline = time.monotonic() + 60
                while len(got) < events and time.monotonic() < deadline:
                    try:
                        got.append(arrived.get(timeout=max(0.1, deadline - time.monotonic())))
                    except queue.Empty:
                        break
                time.sleep(2)  # anything more (a repeat) arrives now
                while not arrived.empty():
                    got.append(arrived.get())
            finally:
                follower.kill()
                follower.wait(timeout=10)
    numbers = [m["data"]["event"]["n"] for _, m in got]
    stored = [(at - int(m["id"].split("-")[0]) / 1000) * 1000 for at, m in got]
    sent = [(at - answered[m["data"]["event"]["n"]]) * 1000 for at, m in got]
    return {"mode": mode, "events": events, "gap_ms": gap_ms, "received": len(got),
            "missed": len(set(range(events)) - set(numbers)), "repeated": len(numbers) - len(set(numbers)),
            "in_order": numbers == sorted(numbers), "stored_to_client_ms": percentiles(stored),
            "answered_to_client_ms": percentiles(sent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["local", "aws-emulated"], default="aws-emulated")
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--gap-ms", type=int, default=700)
    args = parser.parse_args()
    print(json.dumps(measure(args.mode, args.events, args.gap_ms), indent=1))


if __name__ == "__main__":
    main()
