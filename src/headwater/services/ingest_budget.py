"""Each tenant's ingest budget, spent by this instance from leases of the shared count
(domain/ingest_budget.py): a request mostly costs a step in memory, a lease one atomic add."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from headwater.domain.errors import QuotaExceeded
from headwater.domain.ingest_budget import Budget, granted
from headwater.ports import IngestCounts

_FORGET_AT = 1024  # tenants' leases kept before those of past windows are dropped


@dataclass
class _Lease:
    window: int
    left: int = 0  # requests leased and not spent
    size: int = 0  # the last lease asked for
    full: bool = False  # the shared count had no more to give this window


class IngestBudgets:
    """Thread-safe: the store call is made outside the lock, so two requests that both find the
    lease spent may both take one (both grants are kept)."""

    def __init__(self, counts: IngestCounts, budget: Budget, clock: Callable[[], float] = time.time) -> None:
        self.counts = counts
        self.budget = budget
        self.clock = clock
        self._leases: dict[str, _Lease] = {}
        self._lock = threading.Lock()

    def spend_leased(self, tenant: str) -> bool | None:
        """Spends one request of the tenant's lease in memory: True when it could, False when the
        window is known to be full, None when it takes a store call (`spend`)."""
        window = self.budget.window_of(self.clock())
        with self._lock:
            lease = self._leases.get(tenant)
            if lease is None or lease.window != window:
                return None
            if lease.left > 0:
                lease.left -= 1
                return True
            return False if lease.full else None

    def spend(self, tenant: str) -> bool:
        """Spends one request, taking a new lease from the shared count when this one is spent."""
        spent = self.spend_leased(tenant)
        if spent is not None:
            return spent
        window = self.budget.window_of(self.clock())
        with self._lock:
            lease = self._leases.get(tenant)
            size = self.budget.next_lease(lease.size if lease and lease.window == window else 0)
        before = self.counts.add(tenant, window, size, self.budget.burst, self.budget.expires_at(window))
        got = granted(before, size, self.budget.burst)
        with self._lock:
            lease = self._leases.get(tenant)
            if lease is None or lease.window < window:
                self._forget_before(window)
                lease = self._leases[tenant] = _Lease(window)  # the old window's lease is lost
            elif lease.window > window:
                return got > 0  # the window rolled meanwhile: spend one of this grant, drop the rest
            lease.left += got
            lease.size = max(lease.size, size)
            lease.full = lease.full or got < size
            if lease.left > 0:
                lease.left -= 1
                return True
            return False

    def _forget_before(self, window: int) -> None:
        if len(self._leases) >= _FORGET_AT:
            self._leases = {t: lease for t, lease in self._leases.items() if lease.window >= window}

    def refusal(self) -> QuotaExceeded:
        rate, burst = self.budget.rate, self.budget.burst
        return QuotaExceeded("Too many requests to this account's sources: its ingest budget of "
                             f"{rate} request{'s' if rate != 1 else ''} a second (bursts of {burst}) is spent.",
                             self.budget.retry_after(self.clock()))
