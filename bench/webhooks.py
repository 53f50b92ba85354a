"""Webhook benchmark: emit-to-webhook latency and deliveries per second to a loopback receiver.

Starts a private Headwater server, deploys an HTTP source subscribed to a webhook whose URL is a
receiver in this process, sends N events through the source's endpoint and times, for each, the
span from sending the request to the receiver getting its signed delivery (one clock: both ends
are this process). Deliveries per second are counted over the span in which they arrived.

    .venv/bin/python bench/webhooks.py [--events 2000] [--connections 8] [--rate 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.conftest import client_for, make_server, new_user  # noqa: E402

SOURCE = """export default {
  name: "Bench webhook source", version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit(event.body) },
};"""


class Receiver:
    def __init__(self, expected: int) -> None:
        self.arrivals: dict[int, float] = {}
        self.done = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                now = time.perf_counter()
                receiver.arrivals.setdefault(json.loads(body)["event"]["i"], now)
                if len(receiver.arrivals) >= expected:
                    receiver.done.set()
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/in"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


async def send_all(url: str, count: int, connections: int, sent: dict[int, float],
                   rate: float | None = None) -> None:
    """Sends `count` events over `connections`; with `rate`, event i goes out at i / rate seconds
    (an open load at that rate, as a service meets it, rather than as fast as answers come back)."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)
    start = time.perf_counter()
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=connections)) as client:
        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                if rate:
                    await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
                sent[i] = time.perf_counter()
                response = await client.post(url, json={"i": i})
                response.raise_for_status()
        await asyncio.gather(*(worker() for _ in range(connections)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--rate", type=float, help="events per second (default: as fast as answered)")
    args = parser.parse_args()
    receiver = Receiver(args.events)
    with tempfile.TemporaryDirectory() as data_dir:
        server = make_server(Path(data_dir))
        server.start()
        try:
            user = new_user(server, tier="paid")
            with client_for(server, user.api_key) as api:
                source = api.post("/sources", json={"component_code": SOURCE}).json()["data"]
                hook = api.post("/webhooks", params={"url": receiver.url}).json()["data"]
                api.post("/subscriptions", params={"emitter_id": source["id"], "listener_id": hook["id"]})
            sent: dict[int, float] = {}
            asyncio.run(send_all(source["configured_props"]["http"]["endpoint_url"], args.events,
                                 args.connections, sent, args.rate))
            complete = receiver.done.wait(timeout=300)
        finally:
            server.stop()
    latencies = sorted(receiver.arrivals[i] - sent[i] for i in receiver.arrivals)
    arrivals = sorted(receiver.arrivals.values())
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
    print(json.dumps({
        "events": args.events,
        "delivered": len(receiver.arrivals),
        "complete": complete,
        "emit_to_webhook_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "emit_to_webhook_p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000, 1),
        "deliveries_per_s": round(len(arrivals) / span, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
