"""The ingest budget's arithmetic (domain/ingest_budget.py) and its settings."""

from __future__ import annotations

import pytest

from headwater.domain.ingest_budget import KEEP_S, Budget, budget_problem, granted
from headwater.settings import Settings


def test_a_window_lasts_burst_over_rate_seconds_and_windows_are_fixed() -> None:
    budget = Budget(rate=100, burst=200)
    assert budget.window_s == 2.0
    assert budget.window_of(1000.0) == budget.window_of(1001.999) == 500
    assert budget.window_of(1002.0) == 501
    assert budget.window_end(500) == 1002.0
    assert Budget(rate=5, burst=10).window_of(7.5) == 3


def test_retry_after_is_the_whole_seconds_left_in_the_window_and_at_least_one() -> None:
    budget = Budget(rate=1, burst=10)
    assert budget.retry_after(100.0) == 10
    assert budget.retry_after(104.2) == 6
    assert budget.retry_after(109.99) == 1
    assert Budget(rate=100, burst=100).retry_after(5.0) == 1


def test_a_count_expires_a_while_after_its_window() -> None:
    assert Budget(rate=5, burst=10).expires_at(3) == 8 + KEEP_S


def test_leases_double_within_a_window_up_to_an_eighth_of_the_allowance() -> None:
    budget = Budget(rate=100, burst=200)
    sizes = [budget.next_lease(0)]
    while len(sizes) < 8:
        sizes.append(budget.next_lease(sizes[-1]))
    assert sizes == [1, 2, 4, 8, 16, 25, 25, 25]
    assert Budget(rate=1, burst=3).next_lease(1) == 1  # a small allowance: one at a time


def test_a_lease_gets_what_the_count_has_left() -> None:
    assert granted(0, 4, 10) == 4
    assert granted(8, 4, 10) == 2
    assert granted(10, 4, 10) == 0
    assert granted(15, 4, 10) == 0


@pytest.mark.parametrize(("rate", "burst", "problem"), [
    (-1, 200, "HEADWATER_INGEST_RATE must be 0"),
    (100, 0, "HEADWATER_INGEST_BURST must be a positive"),
    (100, 50, "HEADWATER_INGEST_BURST (50) must be at least HEADWATER_INGEST_RATE (100)"),
])
def test_a_rate_and_burst_that_make_no_budget_are_named(rate: int, burst: int, problem: str) -> None:
    assert (budget_problem(rate, burst) or "").startswith(problem)
    with pytest.raises(ValueError, match="HEADWATER_INGEST"):
        Budget(rate, burst)


def test_rate_zero_is_no_budget() -> None:
    assert budget_problem(0, 0) is None
    with pytest.raises(ValueError):
        Budget(0, 200)


def test_settings_default_to_100_a_second_bursts_of_200(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADWATER_INGEST_RATE", raising=False)
    monkeypatch.delenv("HEADWATER_INGEST_BURST", raising=False)
    settings = Settings()
    assert (settings.ingest_rate, settings.ingest_burst) == (100, 200)
    monkeypatch.setenv("HEADWATER_INGEST_RATE", "0")
    assert Settings().ingest_rate == 0


@pytest.mark.parametrize(("rate", "burst", "message"), [
    ("fast", "200", "HEADWATER_INGEST_RATE must be a whole number of 0 or more, not 'fast'"),
    ("-5", "200", "HEADWATER_INGEST_RATE must be a whole number of 0 or more, not '-5'"),
    ("2.5", "200", "HEADWATER_INGEST_RATE must be a whole number"),
    ("100", "", "HEADWATER_INGEST_BURST must be a whole number"),
    ("100", "0", "HEADWATER_INGEST_BURST must be a positive number of requests, not 0"),
    ("300", "200", "HEADWATER_INGEST_BURST (200) must be at least HEADWATER_INGEST_RATE (300)"),
])
def test_bad_budget_settings_fail_with_the_variable_named(monkeypatch: pytest.MonkeyPatch, rate: str, burst: str,
                                                          message: str) -> None:
    monkeypatch.setenv("HEADWATER_INGEST_RATE", rate)
    monkeypatch.setenv("HEADWATER_INGEST_BURST", burst)
    with pytest.raises(ValueError) as caught:
        Settings()
    assert str(caught.value).startswith(message)
