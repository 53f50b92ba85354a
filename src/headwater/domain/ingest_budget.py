"""A tenant's ingest budget (issue 21): requests to its HTTP sources per fixed window of time.

A budget of `rate` requests a second with a `burst` is a fixed window of `burst / rate` seconds
in which the tenant (the namespace owning the source: a user or an org) may send `burst`
requests: on average `rate` a second, at most `burst` at once (twice that across a window's edge,
the price of fixed windows, which need one counter and no clock agreement between instances).

The count of a window is shared by every instance of the service through the store (the
IngestCounts port). An instance takes a *lease* of several requests from it with one atomic add
and spends it in memory, so most requests cost no store call; leases grow from 1 by doubling
within a window, up to an eighth of the window's allowance, so a trickle takes no more than it
uses and a flood few store calls. What an instance leased and did not spend by the window's end is
lost to its tenant: instances together never admit more than `burst` in a window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LEASE_SHARE = 8  # the largest lease is this fraction of a window's allowance
KEEP_S = 3600  # a window's count is kept (TTL) this long after the window ends


@dataclass(frozen=True)
class Budget:
    rate: int  # requests a second on average; 0: no budget
    burst: int  # requests a window

    def __post_init__(self) -> None:
        problem = budget_problem(self.rate, self.burst) if self.rate else "A budget needs a positive rate."
        if problem:
            raise ValueError(problem)

    @property
    def window_s(self) -> float:
        return self.burst / self.rate

    def window_of(self, now: float) -> int:
        """The number of the fixed window `now` (Unix seconds) is in."""
        return math.floor(now / self.window_s)

    def window_end(self, window: int) -> float:
        return (window + 1) * self.window_s

    def retry_after(self, now: float) -> int:
        """Whole seconds until the window `now` is in ends (at least 1): `Retry-After`."""
        return max(1, math.ceil(self.window_end(self.window_of(now)) - now))

    def expires_at(self, window: int) -> int:
        """When the store may forget the window's count (a TTL attribute)."""
        return math.ceil(self.window_end(window)) + KEEP_S

    @property
    def largest_lease(self) -> int:
        return max(1, self.burst // LEASE_SHARE)

    def next_lease(self, previous: int) -> int:
        """The size of a lease after one of `previous` in the same window (0: the window's first)."""
        return max(1, min(2 * previous, self.largest_lease))


def budget_problem(rate: int, burst: int) -> str | None:
    """Why a rate and burst make no budget (None when they do; rate 0 is no budget at all)."""
    if rate < 0:
        return f"HEADWATER_INGEST_RATE must be 0 (no budget) or a positive number of requests a second, not {rate}."
    if rate == 0:
        return None
    if burst < 1:
        return f"HEADWATER_INGEST_BURST must be a positive number of requests, not {burst}."
    if burst < rate:
        return (f"HEADWATER_INGEST_BURST ({burst}) must be at least HEADWATER_INGEST_RATE ({rate}): "
                "a burst below the rate would make windows under a second.")
    return None


def granted(count_before: int, wanted: int, allowance: int) -> int:
    """How much of a lease of `wanted` the shared count grants when it stood at `count_before`."""
    return max(0, min(wanted, allowance - count_before))
