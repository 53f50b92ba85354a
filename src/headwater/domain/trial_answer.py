"""The answer of `POST /v1/components/run`, bounded whatever the run did (issue 31): a component can
emit, log and return as much as its time and memory allow (500,000 emits made an 18 MB answer),
and the answer is made, sent and read by others' shared machinery.

At most MAX_EMITS emits, MAX_LOGS log lines and MAX_BYTES bytes of JSON are answered. `error` is
always answered, its message and stack cut to MAX_ERROR_TEXT characters each. The other fields go
in the order of FILL_ORDER: one that does not fit in what is left of MAX_BYTES is answered as null;
then the emits, then the logs, each list cut at the first item that does not fit. Anything cut is
said in `truncated`: a sentence, how many emits and log lines the run made, and the fields
answered as null.
"""

from __future__ import annotations

import json
from typing import Any

MAX_EMITS = 1000
MAX_LOGS = 1000
MAX_BYTES = 4 * 1024 * 1024
MAX_ERROR_TEXT = 64 * 1024
_ROOM = 4096  # the answer's own keys, separators and `truncated`
FILL_ORDER = ("type", "name", "duration_ms", "error", "db_error", "flow_exit", "response", "return_value",
              "exports", "sends", "event", "db", "db_writes")


def size(value: Any) -> int:
    """Bytes of `value` as the answer encodes it (ASCII JSON, api/deps.EventsJSON)."""
    return len(json.dumps(value, separators=(",", ":"), allow_nan=False))


def bounded(data: dict[str, Any], emitted: int, logged: int) -> dict[str, Any]:
    """The answer's data within the bounds, in the order of `data`, with `truncated` (None when
    nothing was cut). `data["emits"]` and `data["logs"]` are the first of the `emitted` and
    `logged` the run made: at least MAX_EMITS and MAX_LOGS of them when it made as many."""
    left = MAX_BYTES - _ROOM
    answer: dict[str, Any] = dict(data)
    if isinstance(answer.get("error"), dict):
        answer["error"] = {k: _cut(v) if k in ("message", "stack") else v for k, v in answer["error"].items()}
    nulled: list[str] = []
    for name in sorted(set(answer) - {"emits", "logs"}, key=_fill_rank):
        needed = size(answer[name]) + len(name) + 4
        if needed > left and name != "error":
            answer[name] = None
            nulled.append(name)
        else:
            left -= needed
    answer["emits"], left = _fitting(answer["emits"], MAX_EMITS, left)
    answer["logs"], left = _fitting(answer["logs"], MAX_LOGS, left)
    cut = len(answer["emits"]) < emitted or len(answer["logs"]) < logged or nulled
    answer["truncated"] = None if not cut else {
        "message": _said(emitted, len(answer["emits"]), logged, len(answer["logs"]), nulled),
        "emits": emitted, "logs": logged, "fields": sorted(nulled, key=list(data).index)}
    return answer


def _fill_rank(name: str) -> int:
    return FILL_ORDER.index(name) if name in FILL_ORDER else len(FILL_ORDER)


def _fitting(items: list[Any], most: int, left: int) -> tuple[list[Any], int]:
    """The first items, at most `most` of them, that fit in `left` bytes; and what is left."""
    kept: list[Any] = []
    for item in items[:most]:
        needed = size(item) + 1
        if needed > left:
            break
        kept.append(item)
        left -= needed
    return kept, left


def _cut(text: Any) -> Any:
    if not isinstance(text, str) or len(text) <= MAX_ERROR_TEXT:
        return text
    return text[:MAX_ERROR_TEXT] + f"... ({len(text) - MAX_ERROR_TEXT} more characters cut)"


def _said(emitted: int, emits: int, logged: int, logs: int, nulled: list[str]) -> str:
    parts = []
    if emits < emitted:
        parts.append(f"the first {emits:,} of its {emitted:,} emits")
    if logs < logged:
        parts.append(f"the first {logs:,} of its {logged:,} log lines")
    if nulled:
        parts.append(f"null for {', '.join(nulled)}")
    return (f"The run's answer is cut to its bounds ({MAX_EMITS:,} emits, {MAX_LOGS:,} log lines, "
            f"{MAX_BYTES // (1024 * 1024)} MB): it carries {' and '.join(parts)}.")
