"""`make bench`: Headwater side by side with Node-RED, n8n and a bare Starlette app on this machine,
then the platform figures (runner overhead, emit-to-webhook, timer lateness, idle memory with many
sources, event_summaries latency). Writes bench/results/latest.json and prints a markdown table.

Every server runs on 127.0.0.1 and is started (and stopped) by this script. Ingest rounds are
interleaved (round 1 of every server, then round 2, ...; the order rotates each round) and the
figures are medians of the rounds, so a slow minute of the machine does not land on one server.

    .venv/bin/python bench/run.py [--skip-n8n] [--rounds 3] [--duration 5]   # needs `make bench`'s npm peers
    .venv/bin/python bench/run.py --smoke    # ~30 s, Headwater and Starlette only, no npm peers (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
PROCESSES = str(os.cpu_count() or 1)  # the service as it runs by default: a serving process per core
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench import measures  # noqa: E402
from bench.load import AsyncioClient, Autocannon, LoadGenerator, Shot  # noqa: E402
from bench.proc import machine_busy_s, wait_idle  # noqa: E402
from bench.report import markdown, problems  # noqa: E402
from bench.targets import (  # noqa: E402
    BODY,
    INSTALLED_PEERS,
    NODE,
    Headwater,
    Target,
    autocannon,
    start_n8n,
    start_node_red,
    start_starlette,
)

N8N = INSTALLED_PEERS / "n8n"  # `npm ci` of bench/peers/n8n


@dataclass(frozen=True)
class Plan:
    """The sizes of one run: the full benchmark, or the CI smoke of the same code."""

    rounds: int
    duration_s: float
    connections: tuple[int, ...]
    runner_calls: int
    webhook_events: int
    rss_sources: int
    summary_sources: int
    events_per_source: int
    summary_samples: int
    timer_sources: int
    timer_interval_s: int
    timer_window_s: float
    timer_grace_s: float  # how long after the window its ticks may still run and count
    settle_s: float
    idle_window_s: float  # a server counts as idle after this long under 0.1 core
    warmup_requests: int  # per server and scenario, before the first round


FULL = Plan(rounds=3, duration_s=5, connections=(1, 10, 64), runner_calls=2000, webhook_events=1000,
            rss_sources=10_000, summary_sources=1000, events_per_source=100, summary_samples=500,
            timer_sources=1000, timer_interval_s=5, timer_window_s=20, timer_grace_s=10, settle_s=3, idle_window_s=0.3,
            warmup_requests=30)
SMOKE = Plan(rounds=1, duration_s=0.5, connections=(1, 10, 64), runner_calls=100, webhook_events=50,
             rss_sources=200, summary_sources=20, events_per_source=100, summary_samples=40,
             timer_sources=20, timer_interval_s=1, timer_window_s=2, timer_grace_s=1, settle_s=0.3, idle_window_s=0.2,
             warmup_requests=5)


def say(message: str) -> None:
    """Progress on stderr: stdout carries only the markdown table."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Platform:
    """Server "b", prepared while the others start: what the platform figures need in place."""

    hw: Headwater
    idle_rss: dict[str, Any]
    fill: dict[str, Any]
    filled: list[dict[str, Any]]  # sources holding events_per_source events each
    timers: list[dict[str, Any]]  # inactive timer sources

    @classmethod
    def prepare(cls, data_dir: Path, plan: Plan) -> Platform:
        hw = Headwater.start(data_dir, HEADWATER_PROCESSES=PROCESSES)
        try:
            idle_rss, sources = measures.idle_rss(hw, plan.rss_sources, plan.settle_s)
            filled = sources[:plan.summary_sources]
            fill = measures.fill(hw, filled, plan.events_per_source)
            timers = measures.deploy_timers(hw, plan.timer_sources, plan.timer_interval_s)
            hw.drain()
        except BaseException:
            hw.stop()
            raise
        return cls(hw, idle_rss, fill, filled, timers)

    def stop(self) -> None:
        self.hw.stop()


def start_all(starters: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Starts the servers in parallel; all or none (what did start is stopped if one fails)."""
    with ThreadPoolExecutor(len(starters)) as pool:
        futures = {name: pool.submit(fn) for name, fn in starters.items()}
    started, errors = {}, []
    for name, future in futures.items():
        try:
            started[name] = future.result()
        except Exception as e:  # noqa: BLE001 - reported below, after stopping the others
            errors.append(f"{name}: {e}")
    if errors:
        for server in started.values():
            server.stop()
        raise RuntimeError("could not start: " + "; ".join(errors))
    return started


def median_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in rounds), 3) for key in rounds[0]}


def side_by_side(targets: list[Target], gen: LoadGenerator, plan: Plan) -> dict[str, Any]:
    """Interleaved rounds. After each round the target settles: Headwater drains the runs it queued
    and every server waits until its processes are idle (n8n works on after "respond immediately"),
    so no server is measured while another one is still busy; that busy time is reported too."""
    rounds: dict[str, dict[str, dict[str, list[dict[str, float]]]]] = {
        s: {str(c): {t.name: [] for t in targets} for c in plan.connections} for s in ("default", "echo")}
    drains: dict[str, list[tuple[Shot, float]]] = {str(c): [] for c in plan.connections}
    for target in targets:  # first requests (bundles, workers, JIT) stay out of the rounds
        with httpx.Client(headers={"content-type": "application/json"}, timeout=30) as client:
            for scenario in ("default", "echo"):
                for _ in range(plan.warmup_requests):
                    client.post(target.urls[scenario], content=BODY).raise_for_status()
        if target.drain:
            target.drain()
        wait_idle(target.pid, window=plan.idle_window_s)
    for index in range(plan.rounds):
        order = targets[index % len(targets):] + targets[:index % len(targets)]
        for scenario in ("default", "echo"):
            for conns in plan.connections:
                for target in order:
                    shot = gen.run(target.urls[scenario], BODY, conns, plan.duration_s, target.pid)
                    drain = target.drain() if target.drain else 0.0
                    busy = drain + wait_idle(target.pid, window=plan.idle_window_s)
                    if target.name == "headwater" and scenario == "default":
                        drains[str(conns)].append((shot, drain))
                    rounds[scenario][str(conns)][target.name].append(shot.as_dict() | {"busy_after_s": round(busy, 2)})
                    say(f"round {index + 1}/{plan.rounds} {scenario} c={conns} {target.name}: {shot.rps:,.0f} req/s "
                        f"p50 {shot.p50_ms:.2f} p99 {shot.p99_ms:.2f} ms, {shot.failed} failed; cores: load gen "
                        f"{shot.loadgen_cpu:.2f} server {shot.target_cpu:.2f} other {shot.other_cpu:.2f}; "
                        f"busy {busy:.1f} s after")
    ingest: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
        s: {c: {name: {"median": median_of(runs), "rounds": runs} for name, runs in by_target.items()}
            for c, by_target in by_conns.items()} for s, by_conns in rounds.items()}
    ratios = {s: {c: {name: {key: round(by_target["headwater"]["median"][key] / row["median"][key], 3)
                             for key in ("rps", "p50_ms", "p99_ms") if row["median"][key]}
                      for name, row in by_target.items() if name != "headwater"}
                  for c, by_target in by_conns.items()} for s, by_conns in ingest.items()}
    backlog = {c: {"acked_rps": statistics.median(s.rps for s, _ in rows),
                   "drain_s": round(statistics.median(d for _, d in rows), 2),
                   "sustained_rps": round(statistics.median(s.requests / (plan.duration_s + d) for s, d in rows), 1)}
               for c, rows in drains.items()}
    return {"ingest": ingest, "ratios": ratios, "headwater_backlog": backlog}


def versions(targets: list[Target]) -> dict[str, str]:
    node = subprocess.run([str(NODE), "--version"], capture_output=True, text=True).stdout.strip()
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout:
        commit += " + uncommitted changes"
    found = {"Python": platform.python_version(), "Node": node,
             "Headwater": f"{metadata.version('headwater')} ({commit or 'no git'})"}
    names = {"starlette": "bare", "node-red": "Node-RED", "n8n": "n8n"}
    found.update({names[t.name]: t.version for t in targets if t.name in names})
    return found


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def load_generator(args: argparse.Namespace) -> LoadGenerator:
    if args.smoke:
        return AsyncioClient()
    return autocannon()


def run(args: argparse.Namespace) -> dict[str, Any]:
    plan = SMOKE if args.smoke else FULL
    if args.rounds or args.duration:
        plan = Plan(**{**plan.__dict__, "rounds": args.rounds or plan.rounds,
                       "duration_s": args.duration or plan.duration_s})
    gen = load_generator(args)
    use_peers = not (args.smoke or args.skip_peers)
    with_n8n = use_peers and not args.skip_n8n
    if with_n8n and not (N8N / "node_modules" / "n8n").exists():
        raise SystemExit("n8n is not installed in bench/.peers/n8n: run `make bench`, or pass --skip-n8n")
    before, time_before = machine_busy_s(), time.perf_counter()
    time.sleep(1)
    background = (machine_busy_s() - before) / (time.perf_counter() - time_before)
    if background > 0.2:
        say(f"warning: other processes keep {background:.2f} cores busy: the figures will show it (other CPU)")
    started = time.perf_counter()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="headwater-bench-") as tmp:
        work = Path(tmp)
        for name in ("a", "b"):
            (work / name).mkdir()
        # Everything starts at once, before any measurement: n8n alone takes tens of seconds. Server
        # "a" takes the ingest rounds and the webhooks; "b" meanwhile gets its 10,000 sources (its
        # idle RSS measured then), the events of 1,000 of them and its timer sources (inactive),
        # then idles through the ingest rounds.
        starters: dict[str, Callable[[], Any]] = {"headwater": lambda: Headwater.start(
                                                      work / "a", HEADWATER_PROCESSES=PROCESSES),
                                                  "headwater-b": lambda: Platform.prepare(work / "b", plan),
                                                  "starlette": lambda: start_starlette(work)}
        if use_peers:  # the service as one process beside it: what the other processes add
            (work / "a1").mkdir()
            starters["headwater-1p"] = lambda: Headwater.start(work / "a1", HEADWATER_PROCESSES="1")
            starters["node-red"] = lambda: start_node_red(NODE, INSTALLED_PEERS, work)
        if with_n8n:
            starters["n8n"] = lambda: start_n8n(NODE, N8N, work, args.n8n_engine)
        say(f"starting {', '.join(starters)}")
        servers = start_all(starters)
        hw, platform_b = servers.pop("headwater"), servers.pop("headwater-b")
        if "headwater-1p" in servers:
            servers["headwater-1p"] = servers["headwater-1p"].target("headwater-1p")
        hw_b = platform_b.hw
        results["idle_rss"], results["fill"] = platform_b.idle_rss, platform_b.fill
        targets: list[Target] = []
        try:
            targets = [hw.target(), *servers.values()]
            results.update(side_by_side(targets, gen, plan))
            for target in targets[1:]:
                target.stop()
            say("emit-to-webhook")
            results["webhooks"] = measures.webhooks(hw, plan.webhook_events, 8)
            # again at half the deliveries per second it sustained: a load the service has room for,
            # where deliveries must not wait for the requests
            rate = max(1, round(results["webhooks"]["deliveries_per_s"] / 2))
            say(f"emit-to-webhook at {rate} events/s")
            results["webhooks_half_rate"] = measures.webhooks(hw, plan.webhook_events, 8, rate)
            hw.stop()
            say("runner call overhead")
            results["runner"] = measures.runner_overhead(plan.runner_calls)
            results["idle_rss"]["rss_after_fill_idle"] = measures.rss(hw_b)
            say(f"event_summaries, {plan.summary_sources:,} sources x {plan.events_per_source} events")
            results["event_summaries"] = measures.event_summaries(
                hw_b, platform_b.filled, plan.events_per_source, plan.summary_samples)
            say(f"timer lateness, {plan.timer_sources:,} sources every {plan.timer_interval_s} s")
            results["timers"] = measures.timer_lateness(hw_b, platform_b.timers, plan.timer_interval_s,
                                                        plan.timer_window_s, plan.timer_grace_s)
        finally:
            gen.close()
            for target in servers.values():
                target.stop()
            hw.stop()
            hw_b.stop()
    results["meta"] = {
        "smoke": args.smoke,
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "versions": versions(targets),
        "loadgen": gen.name + (f" {gen.version}" if isinstance(gen, Autocannon) else ""),
        "targets": [t.name for t in targets],
        "rounds": plan.rounds,
        "duration_s": plan.duration_s,
        "connections": list(plan.connections),
        "plan": plan.__dict__ | {"connections": list(plan.connections)},
        "background_cores_at_start": round(background, 2),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    return results


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="every measurement, briefly; Headwater and Starlette")
    parser.add_argument("--skip-n8n", action="store_true", help="leave n8n out (its install is large)")
    parser.add_argument("--skip-peers", action="store_true", help="Headwater and Starlette only, with autocannon")
    parser.add_argument("--rounds", type=int, help="rounds per server and concurrency (3)")
    parser.add_argument("--duration", type=float, help="seconds per round (5)")
    parser.add_argument("--n8n-engine", choices=["legacy", "vm"], default="legacy",
                        help="n8n's N8N_EXPRESSION_ENGINE (legacy; vm is n8n 1.123's default, ~10x slower here)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "latest.json")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _interrupted)  # so the `finally` blocks stop every server we started
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    found = problems(results)
    for problem in found:
        print(f"bench: {problem}", file=sys.stderr)
    say(f"wrote {args.out} in {results['meta']['elapsed_s']:.0f} s")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
