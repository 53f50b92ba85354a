"""Ingest benchmark: HTTP-source throughput and customResponse latency on this machine.

Starts a private Headwater server, deploys two HTTP sources (default response; customResponse
echo), and drives them from a keep-alive asyncio client on loopback. `/healthz` is measured in
the same run as the baseline, so the numbers read as ratios to the server's own floor.

    .venv/bin/python bench/ingest.py [--seconds 10] [--connections 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.conftest import client_for, make_server, new_user  # noqa: E402

PLAIN = """export default {
  name: "Bench ingest", version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit(event.body, { summary: "hit" }) },
};"""

ECHO = """export default {
  name: "Bench echo", version: "1.0.0",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    this.$emit(event.body);
    this.http.respond({ status: 200, body: event.body });
  },
};"""


async def one_connection(host: str, port: int, request: bytes, stop_at: float, latencies: list[float],
                         statuses: dict[int, int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            writer.write(request)
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            code = int(status_line.split()[1])
            statuses[code] = statuses.get(code, 0) + 1
    finally:
        writer.close()


async def load(url: str, method: str, body: bytes, seconds: float, connections: int) -> dict:
    parts = urlsplit(url)
    request = (
        f"{method} {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    stop_at = time.perf_counter() + seconds
    started = time.perf_counter()
    await asyncio.gather(*(
        one_connection(parts.hostname or "127.0.0.1", parts.port or 80, request, stop_at, latencies, statuses)
        for _ in range(connections)
    ))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": len(latencies),
        "rps": round(len(latencies) / elapsed),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2),
        "statuses": statuses,
    }


def backlog(data_dir: Path) -> int:
    """Runs still queued: the service reads its own database the same way."""
    conn = sqlite3.connect(data_dir / "headwater.db")
    try:
        return conn.execute("SELECT count(*) FROM tasks").fetchone()[0]
    finally:
        conn.close()


def drain(data_dir: Path, limit_s: float = 600) -> float:
    """Seconds until no run is queued."""
    started = time.perf_counter()
    while backlog(data_dir) and time.perf_counter() - started < limit_s:
        time.sleep(0.05)
    return round(time.perf_counter() - started, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        server = make_server(Path(data_dir))
        server.start()
        try:
            user = new_user(server, tier="paid")
            with client_for(server, user.api_key) as api:
                plain = api.post("/sources", json={"component_code": PLAIN}).json()["data"]
                echo = api.post("/sources", json={"component_code": ECHO}).json()["data"]
                body = json.dumps({"i": 0, "payload": "x" * 200}).encode()
                plain_url = plain["configured_props"]["http"]["endpoint_url"]
                echo_url = echo["configured_props"]["http"]["endpoint_url"]
                scenarios = {
                    "healthz": (server.base_url + "/healthz", "GET", b"", args.connections),
                    "ingest_default_response": (plain_url, "POST", body, args.connections),
                    "custom_response_sequential": (echo_url, "POST", body, 1),
                    "custom_response_concurrent": (echo_url, "POST", body, args.connections),
                }
                results: dict = {}
                for name, (url, method, payload, connections) in scenarios.items():
                    result = asyncio.run(load(url, method, payload, args.seconds, connections))
                    # Runs that the answers went ahead of finish before the next scenario starts:
                    # how long that takes is part of the figure (processed_per_s).
                    result["drained_after_s"] = drain(server.data_dir)
                    result["processed_per_s"] = round(
                        result["requests"] / (args.seconds + result["drained_after_s"]))
                    results[name] = result
                results["ratio_ingest_to_healthz"] = round(
                    results["ingest_default_response"]["rps"] / results["healthz"]["rps"], 3)
        finally:
            server.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
