"""The storage contract, the ingest budget's shared counts (IngestCounts) on SQLite and DynamoDB,
and budgets of several instances over one store never admitting more than the budget."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from headwater.adapters.aws.dynamodb import DynamoStore
from headwater.domain.ingest_budget import Budget, granted
from headwater.services.ingest_budget import IngestBudgets
from tests.contract.conftest import RESOURCES, Backend


def test_a_count_grows_by_each_add_until_the_allowance_and_then_not_at_all(store: Backend) -> None:
    counts = store.raw.ingest_counts
    assert counts.add("u_ada", 7, 4, 10, 9999) == 0
    assert counts.add("u_ada", 7, 4, 10, 9999) == 4
    assert counts.add("u_ada", 7, 4, 10, 9999) == 8  # passes (8 < 10): granted 2 of the 4
    assert counts.add("u_ada", 7, 4, 10, 9999) >= 10  # full: nothing added
    assert counts.add("u_ada", 7, 1, 10, 9999) >= 10
    assert counts.add("u_ada", 8, 1, 10, 9999) == 0  # the next window
    assert counts.add("o_acme", 7, 1, 10, 9999) == 0  # another tenant


def test_concurrent_adds_grant_exactly_the_allowance(store: Backend) -> None:
    counts = store.raw.ingest_counts
    lock, grants = threading.Lock(), []

    def take(_: int) -> None:
        got = granted(counts.add("u_ada", 1, 3, 100, 9999), 3, 100)
        with lock:
            grants.append(got)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(take, range(60)))
    assert sum(grants) == 100
    assert grants.count(3) == 33 and grants.count(1) == 1  # one partial grant; the rest found it full


def test_four_budget_instances_over_one_store_admit_the_budget_and_no_more(store: Backend) -> None:
    budget = Budget(rate=20, burst=200)
    clock = lambda: 5_000.0  # noqa: E731 - one window for the whole test
    instances = [IngestBudgets(store.raw.ingest_counts, budget, clock) for _ in range(4)]
    admitted = [0] * 8
    start = threading.Barrier(8)

    def spend(i: int) -> None:
        start.wait()
        while admitted[i] <= 200 and instances[i % 4].spend("o_acme"):
            admitted[i] += 1

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(spend, range(8)))
    assert sum(admitted) == 200  # every lease spent by its instance, none over the budget
    assert instances[0].spend("o_acme") is False
    assert IngestBudgets(store.raw.ingest_counts, budget, clock).spend("u_bob") is True  # another tenant's own


def test_a_dynamodb_count_is_an_item_of_the_tenant_with_a_ttl(dynamo: DynamoStore) -> None:
    dynamo.ingest_counts.add("o_acme", 42, 5, 10, 123456)
    item = dynamo.tables.client.get_item(TableName=RESOURCES, Key={"pk": {"S": "o_acme"}, "sk": {"S": "ingest#42"}},
                                         ConsistentRead=True)["Item"]
    assert item["n"] == {"N": "5"} and item["expires_at"] == {"N": "123456"}


def test_sqlite_drops_a_tenants_expired_windows_when_it_starts_a_new_one(tmp_path: Path) -> None:
    from headwater.adapters.local.sqlite.store import SqliteStore

    store = SqliteStore(tmp_path / "headwater.db")
    store.ingest_counts.clock = lambda: 1000.0
    store.ingest_counts.add("u_ada", 1, 1, 10, 900)  # expired already
    store.ingest_counts.add("u_bob", 1, 1, 10, 900)
    store.ingest_counts.add("u_ada", 2, 1, 10, 2000)
    rows = store.db.connection().execute("SELECT tenant, win FROM ingest_counts ORDER BY tenant, win").fetchall()
    assert [tuple(r) for r in rows] == [("u_ada", 2), ("u_bob", 1)]
