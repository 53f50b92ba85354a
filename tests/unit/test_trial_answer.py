"""The bounds of a components/run answer (domain/trial_answer.py): counts, bytes, the fields
answered as null, the error always answered, and `truncated` saying what was cut."""

from __future__ import annotations

import json
from typing import Any

from headwater.domain.trial_answer import MAX_BYTES, MAX_ERROR_TEXT, bounded


def data(emits: int = 0, logs: int = 0, emit_bytes: int = 10, **fields: Any) -> dict[str, Any]:
    return {"type": "source", "name": "n", "event": {}, "emits": [{"event": {"s": "x" * emit_bytes}, "metadata": {}}
                                                                 for _ in range(emits)],
            "logs": [{"level": "log", "message": "m"} for _ in range(logs)], "db_writes": {}, "db": {},
            "response": None, "error": None, "duration_ms": 1.0, **fields}


def test_within_the_bounds_nothing_is_cut() -> None:
    given = data(emits=1000, logs=1000)
    assert bounded(given, 1000, 1000) == {**given, "truncated": None}


def test_past_the_counts_the_first_ones_are_answered_and_the_totals_said() -> None:
    answer = bounded(data(emits=1000, logs=10), 500_000, 10)
    assert len(answer["emits"]) == 1000 and len(answer["logs"]) == 10
    assert answer["truncated"]["emits"] == 500_000 and answer["truncated"]["logs"] == 10
    assert "first 1,000 of its 500,000 emits" in answer["truncated"]["message"]


def test_past_the_bytes_emits_stop_at_the_first_that_does_not_fit() -> None:
    answer = bounded(data(emits=1000, emit_bytes=10_000), 1000, 0)
    encoded = json.dumps({"data": answer}, separators=(",", ":"))
    assert len(encoded) <= MAX_BYTES and 380 < len(answer["emits"]) < 420
    assert answer["truncated"]["emits"] == 1000 and answer["truncated"]["fields"] == []


def test_a_field_that_does_not_fit_is_null_and_named_and_the_error_is_always_there() -> None:
    huge = {"k": "x" * (5 * 1024 * 1024)}
    error = {"code": "RUNTIME_ERROR", "name": "Error", "message": "m" * (MAX_ERROR_TEXT * 2), "stack": "s"}
    answer = bounded(data(emits=3, db_writes=huge, error=error), 3, 0)
    assert answer["db_writes"] is None and answer["truncated"]["fields"] == ["db_writes"]
    assert len(answer["emits"]) == 3 and answer["error"]["code"] == "RUNTIME_ERROR"
    assert answer["error"]["message"].endswith(f"({MAX_ERROR_TEXT} more characters cut)")
    assert "null for db_writes" in answer["truncated"]["message"]
    assert len(json.dumps(answer)) <= MAX_BYTES
