"""Per-source metrics of runs (`GET /metrics`): runs by outcome, their duration, errors and events
emitted, labelled `source`, with a bounded label set.

A source id is its own label value for the first `limit` sources this process finishes a run of
(HEADWATER_METRICS_SOURCES); any source after those is counted under `source="other"`. The
default is 0, every source under `other`: /metrics then names no tenant's source (issue 31); an
operator who wants per-source series turns them on, best with HEADWATER_METRICS_TOKEN set. A
source keeps its label for the life of the process, so a series never moves from one label to
another and counters stay monotonic; each metric has at most `limit + 1` `source` values per
process (times the few outcomes of `runs`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from prometheus_client import Counter, Summary

from headwater.domain.commands import RunSource
from headwater.domain.runs import RunResult
from headwater.metrics import REGISTRY
from headwater.ports import Task

OTHER = "other"
DEFAULT_LIMIT = 0
# The error codes the platform gives a run (the runner's own, the supervisor's, the service's). A
# runner's pipe may say anything (trust ends at the process): any other code counts as RUNTIME_ERROR,
# so the outcomes stay a fixed set.
OUTCOMES = frozenset({
    "ok", "RUNTIME_ERROR", "TIMEOUT", "OUT_OF_MEMORY", "RUNNER_CRASHED", "LOAD_ERROR", "BUNDLE_MISSING",
    "CONFIGURATION_ERROR", "QUOTA_EXCEEDED", "ACCOUNT_NOT_FOUND", "ACCOUNT_NEEDS_RECONNECT", "ACCOUNT_REFRESH_FAILED",
})

SOURCE_RUNS = Counter("headwater_source_runs",
                      "Runs of a source finished, by outcome (ok or the platform's error code)",
                      ["source", "outcome"], registry=REGISTRY)
SOURCE_RUN_SECONDS = Summary("headwater_source_run_seconds", "Time a source's runs took in the runner",
                             ["source"], registry=REGISTRY)
SOURCE_ERRORS = Counter("headwater_source_errors", "Runs of a source that ended in an error", ["source"],
                        registry=REGISTRY)
SOURCE_EMITTED = Counter("headwater_source_events_emitted", "Events a source's runs emitted", ["source"],
                         registry=REGISTRY)


def outcome_of(result: RunResult) -> str:
    """`ok`, or the run's error code if it is one of the platform's, else RUNTIME_ERROR."""
    outcome = result.error_code or "ok"
    return outcome if outcome in OUTCOMES else "RUNTIME_ERROR"


class SourceLabels:
    """The `source` label of a source id: its own id while there is room, else `other`."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self._own: dict[str, str] = {}
        self._lock = threading.Lock()

    def of(self, source_id: str) -> str:
        label = self._own.get(source_id)
        if label is not None:
            return label
        with self._lock:  # only a source not seen yet gets here
            if source_id not in self._own and len(self._own) >= self.limit:
                return OTHER
            return self._own.setdefault(source_id, source_id)


class _Meters:
    """The metric children one (source label, outcome) counts into, looked up once."""

    __slots__ = ("runs", "seconds", "errors", "emitted")

    def __init__(self, label: str, outcome: str) -> None:
        self.runs = SOURCE_RUNS.labels(label, outcome)
        self.seconds = SOURCE_RUN_SECONDS.labels(label)
        self.errors = SOURCE_ERRORS.labels(label) if outcome != "ok" else None
        self.emitted = SOURCE_EMITTED.labels(label)

    def count(self, result: RunResult) -> None:
        self.runs.inc()
        self.seconds.observe(result.duration_ms / 1000)
        if self.errors is not None:
            self.errors.inc()
        if result.emits:
            self.emitted.inc(len(result.emits))


class SourceMeters:
    """Counts finished runs per source; bounded: (limit + 1) labels times the outcomes."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.labels = SourceLabels(limit)
        self._meters: dict[tuple[str, str], _Meters] = {}

    def count(self, tasks: Sequence[Task], results: Sequence[Any]) -> None:
        for task, result in zip(tasks, results, strict=False):
            if isinstance(result, RunResult) and isinstance(task.command, RunSource):
                self._meters_of(self.labels.of(task.command.source_id), outcome_of(result)).count(result)

    def _meters_of(self, label: str, outcome: str) -> _Meters:
        key = (label, outcome)
        found = self._meters.get(key)
        if found is None:
            found = self._meters.setdefault(key, _Meters(label, outcome))
        return found


SOURCES = SourceMeters()


def limit_source_labels(limit: int) -> None:
    """The composition root's setting (HEADWATER_METRICS_SOURCES), before any run is counted."""
    SOURCES.labels = SourceLabels(limit)
