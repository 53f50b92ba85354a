"""Per-source metrics: each run counted under its source's label, the label set bounded."""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.domain.commands import RunSource
from headwater.domain.events import Emit
from headwater.domain.runs import RunResult
from headwater.metrics import REGISTRY, metered_runs
from headwater.ports import Task
from headwater.source_metrics import DEFAULT_LIMIT, OTHER, SourceLabels, limit_source_labels


def task(source_id: str) -> Task:
    return Task(id=f"t-{source_id}", command=RunSource(source_id=source_id, event={}, timeout_ms=1000, trigger="http"))


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_the_first_sources_get_their_own_label_and_keep_it_the_rest_are_other() -> None:
    labels = SourceLabels(2)
    assert [labels.of(s) for s in ("dc_a", "dc_b", "dc_c", "dc_a", "dc_d", "dc_b")] == \
        ["dc_a", "dc_b", OTHER, "dc_a", OTHER, "dc_b"]
    assert SourceLabels(0).of("dc_a") == OTHER


def test_runs_durations_errors_and_emits_are_counted_per_source_through_the_run_handler() -> None:
    limit_source_labels(1)
    try:
        ok = RunResult(emits=[Emit({"n": 1}), Emit({"n": 2})], duration_ms=250)
        failed = RunResult(error={"code": "TIMEOUT"}, duration_ms=1000)
        other_runs = sample("headwater_source_runs_total", source=OTHER, outcome="ok")

        async def handler(tasks: list[Task], on_respond: Any) -> list[Any]:
            return [ok, failed, ok][:len(tasks)]

        asyncio.run(metered_runs(handler)([task("dc_metered"), task("dc_metered"), task("dc_unlabelled")],
                                          lambda t, p: None))
        assert sample("headwater_source_runs_total", source="dc_metered", outcome="ok") == 1
        assert sample("headwater_source_runs_total", source="dc_metered", outcome="TIMEOUT") == 1
        assert sample("headwater_source_errors_total", source="dc_metered") == 1
        assert sample("headwater_source_events_emitted_total", source="dc_metered") == 2
        assert sample("headwater_source_run_seconds_count", source="dc_metered") == 2
        assert sample("headwater_source_run_seconds_sum", source="dc_metered") == 1.25
        # the second source found the one label taken: counted under `other`
        assert sample("headwater_source_runs_total", source=OTHER, outcome="ok") == other_runs + 1
        assert sample("headwater_source_runs_total", source="dc_unlabelled", outcome="ok") == 0
    finally:
        limit_source_labels(DEFAULT_LIMIT)


def test_an_error_code_a_runner_forges_adds_no_label_value() -> None:
    """Trust ends at the runner process: the code of a run's error is whatever its pipe says, so
    only the codes the platform gives are label values, and any other counts as RUNTIME_ERROR."""
    forged = [RunResult(error={"code": f"FORGED_{i}"}) for i in range(20)]
    async def forging(tasks: list[Task], on_respond: Any) -> list[Any]:
        return forged

    asyncio.run(metered_runs(forging)([task("dc_forger")] * len(forged), lambda t, p: None))
    outcomes = {s.labels["outcome"] for metric in REGISTRY.collect() if metric.name == "headwater_source_runs"
                for s in metric.samples if s.labels.get("source") in ("dc_forger", OTHER)}
    assert not any(o.startswith("FORGED_") for o in outcomes), outcomes
    assert "RUNTIME_ERROR" in outcomes
    # the runs of all sources alike
    all_outcomes = {s.labels["outcome"] for metric in REGISTRY.collect() if metric.name == "headwater_runs"
                    for s in metric.samples}
    assert not any(o.startswith("FORGED_") for o in all_outcomes), all_outcomes
    assert sample("headwater_runs_total", outcome="RUNTIME_ERROR") >= len(forged)


def test_by_default_no_source_has_a_label_of_its_own() -> None:
    """HEADWATER_METRICS_SOURCES is 0 unless the operator sets it: /metrics names no source."""
    assert DEFAULT_LIMIT == 0 and SourceLabels(DEFAULT_LIMIT).of("dc_someone") == OTHER


def test_a_made_up_http_method_adds_no_label_value() -> None:
    from headwater.metrics import _answered

    _answered("unmatched", "DC_MADEUP", 404).count(0.001)
    methods = {s.labels["method"] for metric in REGISTRY.collect() if metric.name == "headwater_http_requests"
               for s in metric.samples}
    assert "DC_MADEUP" not in methods and "other" in methods
