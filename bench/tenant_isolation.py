"""One tenant's load against another tenant's latency (issue 32's target): tenant B's customResponse
source measured idle, then again while tenant A holds 50 sleeping runs, 50 slow outbound exchanges
(webhook deliveries to a receiver that drips its answer a byte at a time) and OAuth callbacks
whose token endpoint drips too. Target: B's p99 within 2x of its idle p99.

    .venv/bin/python bench/tenant_isolation.py [--processes N] [--seconds 5] [--connections 10]

One server (a serving process per core unless --processes says), the bench's load generator
(autocannon, from `make bench`'s peers; the asyncio client without them). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ingest import ECHO  # noqa: E402
from bench.load import AsyncioClient, LoadGenerator  # noqa: E402
from bench.targets import INSTALLED_PEERS, Headwater, autocannon  # noqa: E402
from tests.security.drip import BODY as DRIP_BODY  # noqa: E402
from tests.security.drip import HEADERS as DRIP_HEADERS  # noqa: E402
from tests.security.drip import Drip, dripping  # noqa: E402

REQUEST = b'{"hello": "world"}'
SLEEPERS = 50
EXCHANGES = 50
CALLBACKS = 20

SLEEPER = """export default {
  name: "Sleeper", version: "1.0.0",
  props: { http: "$.interface.http" },
  async run() { await new Promise((resolve) => setTimeout(resolve, 600000)); },
};"""

EMITTER = """export default {
  name: "Emitter", version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit(event.body); },
};"""


def wait_until(what: str, check: Any, deadline_s: float = 120) -> None:
    ends = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > ends:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def hold_tenant_a(hw: Headwater, receiver: Drip, token_endpoint: Drip) -> list[threading.Thread]:
    """Tenant A's load, begun: sleeping runs, dripping deliveries, OAuth callbacks on a dripping token
    endpoint. Returns the threads that wait for the callbacks' answers."""
    user = hw.server.cli("users", "create", "--username", "tenant-a", "--email", "a@example.com", "--tier", "paid")
    with httpx.Client(base_url=hw.server.base_url + "/v1", timeout=120,
                      headers={"Authorization": f"Bearer {user['api_key']}"}) as a:
        # the deliveries first: A's sleeping runs would hold its share of the queue's work before them
        emitter = a.post("/sources", json={"component_code": EMITTER, "name": "emitter"}).json()["data"]
        for _ in range(EXCHANGES):
            hook = a.post("/webhooks", params={"url": receiver.url}).json()["data"]
            a.post("/subscriptions", params={"emitter_id": emitter["id"], "listener_id": hook["id"]})
        httpx.post(emitter["configured_props"]["http"]["endpoint_url"], json={"n": 1}, timeout=60).raise_for_status()
        wait_until("A's deliveries to reach the receiver", lambda: receiver.accepted > 0)
        component = a.post("/components", json={"component_code": SLEEPER}).json()["data"]
        for i in range(SLEEPERS):
            source = a.post("/sources", json={"component_id": component["id"], "name": f"sleeper-{i}"}).json()["data"]
            httpx.post(source["configured_props"]["http"]["endpoint_url"], json={}, timeout=60).raise_for_status()
        a.put("/oauth/clients/slowidp", json={"client_id": "a", "client_secret": "s",
                                              "authorize_url": "http://127.0.0.1:9/authorize",
                                              "token_url": token_endpoint.url}).raise_for_status()
        states = [a.post("/oauth/connect", json={"app": "slowidp"}).json()["data"]["state"] for _ in range(CALLBACKS)]
    callers = [threading.Thread(target=lambda s=state: httpx.get(
        hw.server.base_url + "/v1/oauth/callback", params={"state": s, "code": "c"}, timeout=300), daemon=True)
        for state in states]
    for caller in callers:
        caller.start()
    wait_until("A's token requests to reach the token endpoint", lambda: token_endpoint.accepted > 0)
    return callers


def shot_of(gen: LoadGenerator, url: str, connections: int, seconds: float, pid: int) -> dict[str, Any]:
    shot = gen.run(url, REQUEST, connections, seconds, pid)
    return {"rps": round(shot.rps), "p50_ms": shot.p50_ms, "p99_ms": shot.p99_ms, "failed": shot.failed,
            "server_cpu": shot.target_cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=10)
    args = parser.parse_args()
    gen: LoadGenerator = autocannon() if (INSTALLED_PEERS / "node_modules" / "autocannon").is_dir() \
        else AsyncioClient()
    with tempfile.TemporaryDirectory(prefix="headwater-tenants-") as tmp, \
            dripping(DRIP_BODY, interval_s=1.0) as receiver, dripping(DRIP_HEADERS, interval_s=1.0) as token:
        hw = Headwater.start(Path(tmp), HEADWATER_PROCESSES=str(args.processes))
        try:
            with hw.api() as b:
                echo = b.post("/sources", json={"component_code": ECHO, "name": "tenant-b-echo"}).json()["data"]
            url = echo["configured_props"]["http"]["endpoint_url"]
            with httpx.Client(timeout=30) as client:
                for _ in range(200):
                    client.post(url, content=REQUEST, headers={"content-type": "application/json"}).raise_for_status()
            idle = shot_of(gen, url, args.connections, args.seconds, hw.pid)
            started = time.monotonic()
            hold_tenant_a(hw, receiver, token)
            loaded = shot_of(gen, url, args.connections, args.seconds, hw.pid)
            result = {
                "processes": args.processes, "connections": args.connections, "seconds": args.seconds,
                "loadgen": type(gen).__name__, "idle": idle, "loaded": loaded,
                "p99_loaded_over_idle": round(loaded["p99_ms"] / idle["p99_ms"], 2),
                "p50_loaded_over_idle": round(loaded["p50_ms"] / idle["p50_ms"], 2),
                "tenant_a": {"sleeping_runs": SLEEPERS, "deliveries_to_dripping_receiver": EXCHANGES,
                             "callbacks_on_dripping_token_endpoint": CALLBACKS,
                             "receiver_connections_open_at_most": receiver.most_open,
                             "token_requests_open_at_most": token.most_open,
                             "load_set_up_s": round(time.monotonic() - started, 1)},
            }
        finally:
            hw.stop()
            gen.close()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
