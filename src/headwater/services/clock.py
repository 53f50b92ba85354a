"""Time, in one place so that tests and services agree on the scales (SPEC: s and ms)."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now_s() -> int:
    return int(time.time())


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def utc_day(ts: int | None = None) -> str:
    return datetime.fromtimestamp(now_s() if ts is None else ts, UTC).strftime("%Y-%m-%d")
