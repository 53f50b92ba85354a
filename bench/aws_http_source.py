"""Latency of an HTTP-source request through the emulated AWS deployment (HEADWATER_BACKEND=
aws-emulated): API Gateway event -> HttpIngestFunction (Mangum) -> SQS on moto, answered once the
message is queued; and of a customResponse source, answered by the run done inline in the
ingest function (runner in its sandbox, DynamoDB commit on moto). Sequential requests on one
keep-alive connection; p50/p90/p99 in ms. The local mode's numbers, same script, `--backend local`.

    .venv/bin/python bench/aws_http_source.py [--requests 300] [--backend aws-emulated]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.ingest import ECHO, PLAIN  # noqa: E402
from tests.conftest import client_for, make_server, new_user  # noqa: E402


def percentiles(samples: list[float]) -> dict[str, float]:
    q = statistics.quantiles(samples, n=100)
    return {"p50": round(q[49], 2), "p90": round(q[89], 2), "p99": round(q[98], 2)}


def measure(url: str, n: int) -> list[float]:
    out = []
    with httpx.Client(timeout=60) as client:
        for i in range(n + 10):
            started = time.perf_counter()
            response = client.post(url, json={"i": i})
            elapsed = (time.perf_counter() - started) * 1000
            assert response.status_code == 200, response.text
            if i >= 10:  # the first ones warm the functions (cold starts are bench/aws_cold_start.py)
                out.append(elapsed)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--backend", default="aws-emulated")
    args = parser.parse_args()
    extra = {} if args.backend == "local" else {"HEADWATER_BACKEND": args.backend}
    server = make_server(Path(tempfile.mkdtemp()), **extra)
    server.start()
    try:
        user = new_user(server, tier="paid")
        results = {}
        with client_for(server, user.api_key) as api:
            for name, code in (("plain", PLAIN), ("custom_response", ECHO)):
                created = api.post("/sources", json={"component_code": code})
                assert created.status_code == 200, created.text
                url = created.json()["data"]["configured_props"]["http"]["endpoint_url"]
                results[name] = percentiles(measure(url, args.requests))
        print(json.dumps({"backend": args.backend, "requests": args.requests, "latency_ms": results}))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
