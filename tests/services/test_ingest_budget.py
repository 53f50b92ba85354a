"""Per-tenant ingest budgets (issue 21) on the fakes: the HTTP interface's 429 and the leases."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from headwater.domain.commands import RunSource
from headwater.domain.errors import QuotaExceeded
from headwater.domain.ingest_budget import Budget
from headwater.domain.models import Principal
from headwater.domain.runs import RunResult
from headwater.services.ingest_budget import IngestBudgets
from headwater.services.sources import SourceRequest
from tests.fakes import FakeIngestCounts, World, to_end, world

HTTP = [{"name": "http", "type": "$.interface.http"}]
CUSTOM = [{"name": "http", "type": "$.interface.http", "customResponse": True}]


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def budgeted(rate: int = 5, burst: int = 10) -> tuple[World, Clock]:
    w = world(ingest_rate=rate, ingest_burst=burst)
    clock = Clock()
    assert w.services.ingest.budgets is not None
    w.services.ingest.budgets.clock = clock
    return w, clock


def tenant(w: World, name: str) -> Principal:
    user, _ = w.services.accounts.create_user(name, f"{name}@example.com", "paid")
    return Principal(user)


def deploy(w: World, who: Principal, props: list[dict[str, Any]] = HTTP) -> Any:
    code = repr({"name": "Orders", "version": "1", "type": "source", "key": None, "dedupe": None, "hooks": [],
                 "configurable_props": props})
    return to_end(w.services.sources.create(who, SourceRequest(component_code=code), None))


def send(w: World, source: Any, body: Any = 1) -> int:
    try:
        return asyncio.run(w.services.ingest.receive(source.endpoint_id, {"body": body})).status
    except QuotaExceeded as refused:
        return refused.status


def test_a_tenant_under_its_budget_is_admitted_and_over_it_refused_with_retry_after_nothing_queued() -> None:
    w, clock = budgeted(rate=5, burst=10)
    source = deploy(w, tenant(w, "ada"))
    assert [send(w, source, i) for i in range(10)] == [200] * 10  # the burst, at once
    clock.now += 0.5
    with pytest.raises(QuotaExceeded) as refused:
        asyncio.run(w.services.ingest.receive(source.endpoint_id, {"body": "over"}))
    assert refused.value.status == 429
    assert refused.value.retry_after == 2  # the 2 s window started 0.5 s ago: 1.5 s left, rounded up
    assert "ingest budget of 5 requests a second" in refused.value.message
    assert [c.event["body"] for c in w.queue.of(RunSource)] == list(range(10))  # the refused one is not queued


def test_a_custom_response_source_is_refused_before_it_runs() -> None:
    w, _ = budgeted(rate=1, burst=2)
    source = deploy(w, tenant(w, "ada"), CUSTOM)
    w.runner.script = lambda instance, event: RunResult(response={"status": 201, "headers": {}, "body": ""})
    assert [send(w, source) for _ in range(3)] == [201, 201, 429]
    assert len(w.queue.results) == 2  # the refused one never ran


def test_the_window_rolls_and_the_budget_is_whole_again() -> None:
    w, clock = budgeted(rate=5, burst=10)
    source = deploy(w, tenant(w, "ada"))
    statuses = [send(w, source) for _ in range(12)]
    assert statuses == [200] * 10 + [429] * 2
    clock.now += 2.0  # the next 2 s window
    assert [send(w, source) for _ in range(11)] == [200] * 10 + [429]


def test_one_tenant_cannot_spend_another_tenants_budget() -> None:
    w, _ = budgeted(rate=5, burst=10)
    ada, bob = deploy(w, tenant(w, "ada")), deploy(w, tenant(w, "bob"))
    flood = [send(w, ada) for _ in range(40)]
    assert flood.count(200) == 10 and flood.count(429) == 30
    assert [send(w, bob) for _ in range(10)] == [200] * 10


def test_a_tenants_sources_share_its_budget() -> None:
    w, _ = budgeted(rate=5, burst=10)
    ada = tenant(w, "ada")
    first, second = deploy(w, ada), deploy(w, ada)
    assert [send(w, first) for _ in range(6)] == [200] * 6
    assert [send(w, second) for _ in range(5)] == [200] * 4 + [429]


def test_rate_zero_turns_the_budget_off() -> None:
    w = world(ingest_rate=0)
    assert w.services.ingest.budgets is None
    source = deploy(w, tenant(w, "ada"))
    assert {send(w, source) for _ in range(300)} == {200}
    assert w.ingest_counts.adds == 0


def test_a_busy_tenant_costs_few_store_calls() -> None:
    """Leases double up to an eighth of the allowance: a window's 200 requests take a dozen adds,
    and the refusals after it none (the window is known to be full)."""
    w, _ = budgeted(rate=100, burst=200)
    source = deploy(w, tenant(w, "ada"))
    statuses = [send(w, source) for _ in range(400)]
    assert statuses == [200] * 200 + [429] * 200
    assert w.ingest_counts.adds <= 13


def test_two_instances_over_one_store_never_admit_more_than_the_budget() -> None:
    counts, clock = FakeIngestCounts(), Clock()
    budget = Budget(rate=50, burst=100)
    instances = [IngestBudgets(counts, budget, clock), IngestBudgets(counts, budget, clock)]
    rng = random.Random(7)
    for _window in range(3):
        admitted = sum(rng.choice(instances).spend("o_acme") for _ in range(400))
        # the leases an instance holds are the others' loss, never an excess
        assert admitted <= 100
        assert admitted >= 100 - budget.largest_lease
        clock.now += budget.window_s
    both = [i.spend("o_acme") for _ in range(60) for i in instances]
    assert sum(both) == 100  # each spends all it leased until the count is full: nothing lost


def test_a_grant_for_a_window_that_ended_meanwhile_is_not_spent_in_the_next() -> None:
    counts, clock = FakeIngestCounts(), Clock(0.0)
    budgets = IngestBudgets(counts, Budget(rate=20, burst=40), clock)  # 2 s windows, leases up to 5
    assert budgets.spend("u_ada") is True  # window 0's first lease (1), spent: the next one is of 2
    real_add, meanwhile = counts.add, []

    def slow_add(tenant: str, window: int, n: int, allowance: int, expires_at: int) -> int:
        before = real_add(tenant, window, n, allowance, expires_at)
        counts.add = real_add  # type: ignore[method-assign]
        clock.now = 2.0  # the store answered after window 0 ended; another request came in window 1
        meanwhile.append(budgets.spend("u_ada"))
        return before

    counts.add = slow_add  # type: ignore[method-assign]
    assert budgets.spend("u_ada") is True  # admitted on window 0's count; the rest of its lease is dropped
    assert meanwhile == [True]
    assert sum(budgets.spend("u_ada") for _ in range(60)) == 39  # window 1: 40 in all, never more
