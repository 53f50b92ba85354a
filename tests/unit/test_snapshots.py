"""domain.snapshots: the JSON merge patch (RFC 7396, its appendix A examples) and which
snapshots a ring keeps."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.domain.snapshots import SNAPSHOTS_KEPT, StateSnapshot, merge_patch, newest


@pytest.mark.parametrize(("target", "patch", "result"), [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_merge_patch_follows_rfc_7396(target: Any, patch: Any, result: Any) -> None:
    before = repr(target)
    assert merge_patch(target, patch) == result
    assert repr(target) == before  # the target is not changed in place


def test_a_ring_keeps_the_newest_ten_newest_first() -> None:
    def snap(seq: int) -> StateSnapshot:
        return StateSnapshot(f"ss_{seq}", seq, seq, "update", "sc_1", "1")

    # slots overwritten in place: seqs 11..15 took the slots of 1..5; a store may still hold a stale one
    held = [snap(s) for s in (*range(6, 16), 3)]
    assert [s.seq for s in newest(held)] == list(range(15, 15 - SNAPSHOTS_KEPT, -1))
    assert newest([]) == []
