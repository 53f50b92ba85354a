"""Event ids, ordering by ts, the three dedupe strategies and truncation."""

from __future__ import annotations

import pytest

from headwater.domain.events import Emit, EventId, dedupe, order_by_ts, summary_event


def ids(emits: list[Emit]) -> list:
    return [e.meta.get("id") for e in emits]


def batch(*values: object, **meta: object) -> list[Emit]:
    return [Emit(event={"v": v}, meta={"id": v, **meta}) for v in values]


def test_event_ids_compare_as_numbers() -> None:
    assert EventId.parse("999-9") < EventId.parse("1000-0")
    assert EventId.parse("1000-9") < EventId.parse("1000-10")
    assert str(EventId.parse("1700000000000-12")) == "1700000000000-12"
    for bad in ("", "12", "a-1", "1-", "-1", "1-2-3"):
        with pytest.raises(ValueError):
            EventId.parse(bad)


def test_order_by_ts_is_stable_and_keeps_untimed_in_place() -> None:
    emits = [Emit(1, {"ts": 30}), Emit(2, {}), Emit(3, {"ts": 10}), Emit(4, {"ts": 20}), Emit(5, {"ts": 10})]
    assert [e.event for e in order_by_ts(emits)] == [3, 2, 5, 4, 1]


def test_unique_drops_repeats_within_and_across_runs() -> None:
    first = dedupe("unique", {}, batch(1, 2, 2, 3))
    assert ids(first.kept) == [1, 2, 3]
    second = dedupe("unique", first.state, batch(3, 4, 1))
    assert ids(second.kept) == [4]


def test_unique_cache_is_fifo_of_100() -> None:
    state = dedupe("unique", {}, batch(*range(101))).state  # ids 0..100: 0 is pushed out
    assert len(state["ids"]) == 100
    again = dedupe("unique", state, batch(0, 1, 100))
    assert ids(again.kept) == [0]


def test_unique_keeps_string_and_number_ids_apart() -> None:
    assert ids(dedupe("unique", {}, batch(1, "1")).kept) == [1, "1"]


def test_greatest_needs_numeric_ids() -> None:
    first = dedupe("greatest", {}, batch(5, 3, 7, "8", 7))
    assert ids(first.kept) == [5, 7, "8"]
    second = dedupe("greatest", first.state, batch(8, 9, "x"))
    assert ids(second.kept) == [9]
    assert "not numeric" in second.refused[0]


def test_last_emits_only_after_the_cached_id() -> None:
    first = dedupe("last", {}, batch("a", "b", "c"))
    assert ids(first.kept) == ["a", "b", "c"]
    assert ids(dedupe("last", first.state, batch("b", "c", "d", "e")).kept) == ["d", "e"]
    assert ids(dedupe("last", first.state, batch("x", "y")).kept) == ["x", "y"]
    nothing_new = dedupe("last", first.state, batch("a", "b", "c"))
    assert nothing_new.kept == [] and nothing_new.state == first.state


def test_last_caches_the_newest_ts_after_ordering() -> None:
    emits = order_by_ts([Emit(0, {"id": "new", "ts": 2}), Emit(0, {"id": "old", "ts": 1})])
    assert dedupe("last", {}, emits).state == {"last": '"new"'}


def test_missing_ids_are_refused_with_a_reason() -> None:
    result = dedupe("unique", {}, [Emit({"a": 1}, {})])
    assert result.kept == [] and "no `id`" in result.refused[0]
    assert dedupe(None, {}, [Emit({"a": 1}, {})]).kept[0].event == {"a": 1}


def test_truncation_over_1kb() -> None:
    small = {"x": "y" * 100}
    assert summary_event(small, expand=False) is small
    big = {"x": "y" * 2000}
    cut = summary_event(big, expand=False)
    assert cut["$truncated"] is True and cut["size"] > 2000 and len(cut["preview"]) == 1024
    assert summary_event(big, expand=True) is big
