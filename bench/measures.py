"""The platform figures of `make bench` besides ingest: runner call overhead, emit-to-webhook,
timer lateness, idle memory with many sources, and event_summaries latency. Each takes its sizes
as arguments, so the CI smoke runs the very same code on small numbers.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from bench.ingest import backlog
from bench.proc import command_name, tree_rss_kb
from bench.targets import Headwater
from bench.webhooks import SOURCE as WEBHOOK_SOURCE
from bench.webhooks import Receiver
from bench.webhooks import send_all as send_events
from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.settings import Settings

# An HTTP source that emits `n` events per request (default 1): 10,000 of these are the idle-memory
# population, and 1,000 of them get 100 events each through their endpoint for event_summaries.
FILL = """export default {
  name: "Bench fill", version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) {
    const n = Math.min(Number(event.body?.n ?? 1), 100);
    for (let i = 0; i < n; i++) this.$emit({ i, payload: event.body?.payload ?? null }, { summary: `event ${i}` });
  },
};"""

RUN_SOURCE = """export default {
  name: "Bench runner", version: "1.0.0", key: "bench-runner",
  props: { n: { type: "integer", default: 1 } },
  async run(event) { this.$emit({ n: this.n, event }) },
};"""

# The floor for a runner call: a bare Node child answering JSON lines on stdin/stdout.
BARE_NODE = """const rl = require("node:readline").createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const m = JSON.parse(line);
  process.stdout.write(JSON.stringify({ id: m.id, ok: true, result: {} }) + "\\n");
});"""


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def percentiles(values: Iterable[float], scale: float = 1000) -> dict[str, float]:
    """p50/p99 (nearest rank) of seconds, in ms by default."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    p99 = ordered[min(len(ordered) - 1, max(0, math.ceil(0.99 * len(ordered)) - 1))]
    return {"p50_ms": round(statistics.median(ordered) * scale, 3), "p99_ms": round(p99 * scale, 3),
            "samples": len(ordered)}


def timed_calls(fn: Any, count: int) -> list[float]:
    out = []
    for _ in range(count):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def runner_overhead(calls: int) -> dict[str, Any]:
    """Warm runner pool `ping` and `run` round trips (bench/runner.py's approach) against a bare
    `node -e` child answering JSON lines over pipes, all from this process, one call at a time."""
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(data_dir=Path(data_dir), runner_processes=1)
        pool = NodeRunnerPool(settings)
        try:
            bundle = LocalBundler(settings).bundle(RUN_SOURCE)
            request = {"instance": "dc_bench", "env": {"PD_COMPONENT": "dc_bench"}, "props": {"n": 1}, "db": {},
                       "event": {"a": 1}, "http": None, "timeout_ms": 30_000, "memory_mb": 256}
            for _ in range(20):  # warm: process, worker, bundle
                pool.call("ping", {})
                pool.call("run", request, bundle=bundle)
            pings = timed_calls(lambda: pool.call("ping", {}), calls)
            runs, own = [], []
            for _ in range(calls):
                started = time.perf_counter()
                result = pool.call("run", request, bundle=bundle)
                runs.append(time.perf_counter() - started)
                own.append(result["duration_ms"] / 1000)
            # A run of an instance the process has not loaded (its first, or one dropped past the
            # bounds), on a warm worker of its code: its bundle evaluated again for it. And a run that
            # needs a worker started (no worker of its code and memory limit): a new memory limit each.
            fresh = itertools.count()
            colds = timed_calls(lambda: pool.call("run", {**request, "instance": f"dc_cold_{next(fresh)}"},
                                                  bundle=bundle), max(10, calls // 20))
            limits = itertools.count(257)
            starts = timed_calls(lambda: pool.call("run", {**request, "memory_mb": next(limits)}, bundle=bundle),
                                 max(10, calls // 20))
        finally:
            pool.close()
    bare = subprocess.Popen([str(settings.node), "-e", BARE_NODE], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert bare.stdin is not None and bare.stdout is not None
    stdin, stdout = bare.stdin, bare.stdout

    def bare_call(counter: list[int] = [0]) -> None:  # noqa: B006 - a call counter
        counter[0] += 1
        stdin.write(json.dumps({"id": counter[0], "op": "ping"}).encode() + b"\n")
        stdin.flush()
        assert json.loads(stdout.readline())["id"] == counter[0]

    try:
        timed_calls(bare_call, 20)
        bares = timed_calls(bare_call, calls)
    finally:
        stdin.close()
        bare.wait(timeout=10)
    overheads = [r - o for r, o in zip(runs, own, strict=True)]
    return {
        "calls": calls,
        "bare_node_round_trip": percentiles(bares),
        "pool_ping_round_trip": percentiles(pings),
        "pool_run_round_trip": percentiles(runs),
        "pool_run_overhead": percentiles(overheads),  # round trip minus the run's own time in the worker
        "pool_cold_run_round_trip": percentiles(colds),  # a new instance on a warm worker of its code
        "pool_worker_start_run_round_trip": percentiles(starts),  # a worker started, the bundle loaded
        "ping_minus_bare_p50_ms": round(ms(statistics.median(pings)) - ms(statistics.median(bares)), 3),
    }


def webhooks(hw: Headwater, events: int, connections: int, rate: float | None = None) -> dict[str, Any]:
    """bench/webhooks.py on a server of ours: HTTP source -> subscription -> webhook on loopback,
    the events sent at `rate` a second (None: as fast as they are answered)."""
    receiver = Receiver(events)
    receiver.server.daemon_threads = True  # its keep-alive handler threads must not hold up the close
    receiver.server.block_on_close = False
    try:
        with hw.api() as api:
            source = api.post("/sources", json={"component_code": WEBHOOK_SOURCE}).json()["data"]
            hook = api.post("/webhooks", params={"url": receiver.url}).json()["data"]
            api.post("/subscriptions", params={"emitter_id": source["id"], "listener_id": hook["id"]}
                     ).raise_for_status()
        sent: dict[int, float] = {}
        asyncio.run(send_events(source["configured_props"]["http"]["endpoint_url"], events, connections, sent, rate))
        complete = receiver.done.wait(timeout=120)
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    arrivals = sorted(receiver.arrivals.values())
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
    return {
        "events": events,
        "rate_per_s": rate,
        "delivered": len(receiver.arrivals),
        "complete": complete,
        "emit_to_webhook": percentiles(receiver.arrivals[i] - sent[i] for i in receiver.arrivals),
        "deliveries_per_s": round(len(arrivals) / span, 1),
    }


async def _send_all(base_url: str, api_key: str, requests: list[tuple[str, str, dict[str, Any] | None]],
                    concurrency: int) -> list[Any]:
    """Sends each (method, url, json) over `concurrency` keep-alive connections; the answers' JSON in order."""
    results: list[Any] = [None] * len(requests)
    todo = iter(enumerate(requests))
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=300,
                                 limits=httpx.Limits(max_connections=concurrency)) as client:
        async def worker() -> None:
            for index, (method, url, body) in todo:
                response = await client.request(method, url, json=body)
                if not response.is_success:
                    raise RuntimeError(f"{method} {url}: {response.status_code} {response.text[:300]}")
                results[index] = response.json() if response.content else None
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


def send_all(hw: Headwater, requests: list[tuple[str, str, dict[str, Any] | None]],
             concurrency: int = 4) -> list[Any]:
    return asyncio.run(_send_all(hw.server.base_url, hw.api_key, requests, concurrency))


def deploy(hw: Headwater, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """POST /v1/sources for each body; the created sources."""
    return [answer["data"] for answer in send_all(hw, [("POST", "/v1/sources", body) for body in bodies])]


def rss(hw: Headwater) -> dict[str, Any]:
    """VmRSS of the service's processes (`headwater serve` and its serving processes) and of the
    rest of its tree (the Node runners and their sandboxes), MiB."""
    by_pid = tree_rss_kb(hw.pid)
    names = {pid: command_name(pid) for pid in by_pid}
    service = sum(kb for pid, kb in by_pid.items() if pid == hw.pid or names[pid].startswith("python"))
    runners = sum(by_pid.values()) - service
    return {"service_mib": round(service / 1024, 1), "runners_mib": round(runners / 1024, 1),
            "total_mib": round((service + runners) / 1024, 1),
            "children": dict(Counter(names[pid] for pid in by_pid if pid != hw.pid))}


def idle_rss(hw: Headwater, count: int, settle_s: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """RSS of an idle service with one source that has run once (so the runner processes are up),
    then with `count` deployed sources (one saved component, reused by `component_id`); returns the
    figures and the sources."""
    with hw.api() as api:
        component = api.post("/components", json={"component_code": FILL}).json()["data"]
        first = api.post("/sources", json={"component_id": component["id"], "name": "fill-0"}).json()["data"]
        httpx.post(first["configured_props"]["http"]["endpoint_url"], json={"n": 1}).raise_for_status()
    hw.drain()
    time.sleep(settle_s)
    before = rss(hw)
    started = time.perf_counter()
    sources = [first] + deploy(hw, [{"component_id": component["id"], "name": f"fill-{i}"} for i in range(1, count)])
    deploy_s = time.perf_counter() - started
    hw.drain()
    time.sleep(settle_s)
    after = rss(hw)
    return {
        "sources": count,
        "deploy_s": round(deploy_s, 1),
        "rss_one_source": before,
        "rss_with_sources": after,
        "service_kib_per_source": round((after["service_mib"] - before["service_mib"]) * 1024 / (count - 1), 2),
    }, sources


def fill(hw: Headwater, sources: list[dict[str, Any]], per_source: int) -> dict[str, Any]:
    """Gives each source `per_source` events through its HTTP endpoint (a request emits up to 100)
    and waits until the runs have committed."""
    batches: list[tuple[str, str, dict[str, Any] | None]] = [
        ("POST", s["configured_props"]["http"]["endpoint_url"], {"n": min(100, per_source - done), "payload": "x" * 99})
        for s in sources for done in range(0, per_source, 100)]
    started = time.perf_counter()
    send_all(hw, batches, 8)
    hw.drain()
    elapsed = time.perf_counter() - started
    return {"sources": len(sources), "events_per_source": per_source, "fill_s": round(elapsed, 1),
            "events_committed_per_s": round(len(sources) * per_source / elapsed)}


def event_summaries(hw: Headwater, sources: list[dict[str, Any]], per_source: int, samples: int) -> dict[str, Any]:
    """GET /v1/sources/{id}/event_summaries (default page) over a spread sample of the filled sources,
    one request at a time on a keep-alive connection."""
    picked = [sources[(i * 7919) % len(sources)]["id"] for i in range(samples)]
    page = min(100, per_source)
    latencies = []
    with hw.api() as api:
        for source_id in picked[:20]:  # warm the connection and the caches a user would have warm
            api.get(f"/sources/{source_id}/event_summaries").raise_for_status()
        for source_id in picked:
            started = time.perf_counter()
            response = api.get(f"/sources/{source_id}/event_summaries")
            latencies.append(time.perf_counter() - started)
            response.raise_for_status()
            if len(response.json()["data"]) != page:
                raise RuntimeError(f"{source_id}: {len(response.json()['data'])} event summaries, expected {page}")
    return {"sources": len(sources), "events_per_source": per_source, "page_size": page,
            "get_event_summaries": percentiles(latencies)}


def deploy_timers(hw: Headwater, count: int, interval_s: int) -> list[dict[str, Any]]:
    """`count` headwater-schedule sources, deployed inactive (activated by timer_lateness)."""
    return deploy(hw, [{"component_key": "headwater-schedule", "name": f"timer-{i}", "active": False,
                        "configured_props": {"timer": {"intervalSeconds": interval_s}}} for i in range(count)])


def _due_times(db: Path) -> dict[str, float]:
    """Each timer's next fire time, exact (the service's own timers table): the event's `timestamp`
    is whole seconds, so the due time of a tick is found on this grid instead."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT source_id, next_at FROM timers").fetchall())
    finally:
        conn.close()


def timer_lateness(hw: Headwater, sources: list[dict[str, Any]], interval_s: int, window_s: float,
                   grace_s: float) -> dict[str, Any]:
    """Activates the timer sources; for the ticks due inside a window that opens once all are active,
    lateness = the event's indexed_at_ms - the tick's due time. Ticks due in the window whose event is
    not there `grace_s` after it closes count as not run (late beyond that, or skipped: the service
    skips a tick while the previous run of that source is still pending)."""
    started = time.perf_counter()
    send_all(hw, [("PUT", f"/v1/sources/{s['id']}", {"active": True}) for s in sources])
    activate_s = time.perf_counter() - started
    opened = time.time()
    time.sleep(window_s)
    closed = time.time()
    due = _due_times(hw.server.data_dir / "headwater.db")
    backlog_at_close = backlog(hw.server.data_dir)
    time.sleep(grace_s)
    pages = send_all(hw, [("GET", f"/v1/sources/{s['id']}/event_summaries", None) for s in sources])
    lateness, coarse, expected, unscheduled = [], [], 0, 0
    for source, page in zip(sources, pages, strict=True):
        grid = due.get(source["id"])
        if grid is None:  # its schedule was not written yet when the window closed
            unscheduled += 1
            continue
        ticks = (grid - k * interval_s for k in range(int(window_s / interval_s) + 3))
        expected += sum(1 for tick in ticks if opened <= tick < closed)
        for item in page["data"]:
            stamp = item["event"]["timestamp"]
            exact = grid - math.floor((grid - stamp) / interval_s) * interval_s  # on the grid, in [stamp, stamp+1)
            if opened <= exact < closed:
                lateness.append(item["indexed_at_ms"] / 1000 - exact)
                coarse.append(item["indexed_at_ms"] / 1000 - stamp)
    return {
        "sources": len(sources),
        "interval_s": interval_s,
        "window_s": window_s,
        "grace_s": grace_s,
        "activate_s": round(activate_s, 1),
        "unscheduled_at_close": unscheduled,
        "queued_tasks_at_close": backlog_at_close,
        "ticks_expected": expected,
        "ticks_run": len(lateness),
        "lateness": percentiles(lateness) if lateness else None,
        "lateness_vs_whole_second_timestamp": percentiles(coarse) if coarse else None,
    }
