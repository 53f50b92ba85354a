"""Prometheus metrics of this process (`GET /metrics`, DECISIONS Extensions).

Services stay free of instrumentation: HTTP traffic is counted by an ASGI middleware, runs and
deliveries by wrapping their task handlers in the composition root, and what adapters know (the
queue, the runner processes) is read at scrape time through collectors they provide.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from headwater.domain.runs import RunResult
from headwater.ports import AsyncTaskHandler, NowHandler, OnRespond, Task, TaskHandler, results_of

REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter("headwater_http_requests", "HTTP requests answered, by route template, method and status",
                   ["route", "method", "status"], registry=REGISTRY)
REQUEST_SECONDS = Histogram("headwater_http_request_seconds", "Time to answer an HTTP request, by route template",
                            ["route"], registry=REGISTRY,
                            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30))
INGEST = Counter("headwater_ingest_requests", "Requests to source endpoints: accepted (2xx) or refused, by status",
                 ["outcome", "status"], registry=REGISTRY)
RUNS = Counter("headwater_runs", "Source runs finished, by outcome (ok or the error code)", ["outcome"],
               registry=REGISTRY)
RUN_SECONDS = Histogram("headwater_run_seconds", "Time a source run took in the runner", registry=REGISTRY,
                        buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60))
DELIVERIES = Counter("headwater_webhook_deliveries", "Webhook delivery attempts, by the delivery's state after it",
                     ["outcome"], registry=REGISTRY)


STALLS = Counter("headwater_source_stalls", "Source stalls started (one SOURCE_STALLED event each), by cause: "
                 "timer or events", ["why"], registry=REGISTRY)
RECOVERIES = Counter("headwater_source_recoveries", "Source stalls ended (one SOURCE_RECOVERED event each)",
                     registry=REGISTRY)




def count_recovery(source_id: str) -> None:
    RECOVERIES.inc()


_Handler = TypeVar("_Handler", TaskHandler, NowHandler)


def metered_runs(handler: AsyncTaskHandler) -> AsyncTaskHandler:
    """Counts each run's outcome and duration as the RunSource handler returns them, in all and
    per source (source_metrics.py)."""
    from headwater.source_metrics import SOURCES, outcome_of

    async def handle(tasks: list[Task], on_respond: OnRespond) -> list[Any]:
        results = list(await handler(tasks, on_respond))
        for result in results:
            if isinstance(result, RunResult):
                RUNS.labels(outcome_of(result)).inc()
                RUN_SECONDS.observe(result.duration_ms / 1000)
        SOURCES.count(tasks, results)
        return results

    return handle


def metered_deliveries(handler: _Handler) -> _Handler:
    def handle(tasks: list[Task], on_partial: Callable[[Task, dict[str, Any]], None]) -> list[Any] | None:
        answered = handler(tasks, on_partial)
        if answered is None:  # the `now` form left them to the queue
            return None
        results = results_of(answered)
        for result in results:  # a status, or a list of them (a commit's first attempts)
            for status in result if isinstance(result, list) else [result]:
                if status is not None:
                    DELIVERIES.labels(str(status)).inc()
        return results

    return handle  # type: ignore[return-value]


class GaugesFrom(Collector):
    """Gauges read at scrape time from a function of the adapters: [(name, help, labels, value)]."""

    def __init__(self, read: Callable[[], Iterable[tuple[str, str, dict[str, str], float]]]) -> None:
        self.read = read

    def collect(self) -> Iterable[GaugeMetricFamily]:
        families: dict[str, GaugeMetricFamily] = {}
        for name, documentation, labels, value in self.read():
            family = families.get(name)
            if family is None:
                family = families[name] = GaugeMetricFamily(name, documentation, labels=list(labels))
            family.add_metric(list(labels.values()), value)
        return list(families.values())


def register_gauges(read: Callable[[], Iterable[tuple[str, str, dict[str, str], float]]]) -> None:
    REGISTRY.register(GaugesFrom(read))


class MetricsMiddleware:
    """Pure ASGI: counts every answer by the route template that served it (never the raw path,
    whose ids would make the label set unbounded)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = route_of(scope)
            _answered(route, scope["method"], status).count(time.perf_counter() - started)


class _Answered:
    """The metric children one kind of answer counts into, looked up once: `labels()` validates and
    locks on every call, a cost each request paid three times."""

    __slots__ = ("requests", "seconds", "ingest")

    def __init__(self, route: str, method: str, status: int) -> None:
        self.requests = REQUESTS.labels(route, method, str(status))
        self.seconds = REQUEST_SECONDS.labels(route)
        self.ingest = (INGEST.labels("accepted" if 200 <= status < 300 else "refused", str(status))
                       if route == "/http/{endpoint_id}" else None)

    def count(self, seconds: float) -> None:
        self.requests.inc()
        self.seconds.observe(seconds)
        if self.ingest is not None:
            self.ingest.inc()


# A client may send any method token: others count as "other", so the label set stays bounded.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_ANSWERED: dict[tuple[str, str, int], _Answered] = {}


def _answered(route: str, method: str, status: int) -> _Answered:
    key = (route, method if method in METHODS else "other", status)
    found = _ANSWERED.get(key)
    if found is None:  # bounded: routes are templates, methods and statuses few
        found = _ANSWERED[key] = _Answered(*key)
    return found


def route_of(scope: Scope) -> str:
    if scope["path"].startswith("/http/"):
        return "/http/{endpoint_id}"
    path = getattr(scope.get("route"), "path", None)
    if not isinstance(path, str):
        return "unmatched"
    # An included router's routes keep their own path; the /v1 prefix is the app's.
    return "/v1" + path if scope["path"].startswith("/v1/") and not path.startswith("/v1") else path


def node_descendants(root_pid: int) -> list[tuple[int, int]]:
    """(pid, RSS bytes) of every `node` process below `root_pid`: the runner processes, however the
    sandbox nests them (read from /proc, so no adapter has to report them)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in _proc_entries():
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        names[entry] = name
        children.setdefault(ppid, []).append(entry)
    found: list[tuple[int, int]] = []
    stack = list(children.get(root_pid, []))
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        if names.get(pid) == "node":
            found.append((pid, _rss(pid)))
    return found


def _proc_entries() -> list[int]:
    import os
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
