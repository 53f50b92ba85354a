"""A share per tenant (a user or an org) of waits on things outside the service: at most
`per_tenant` of one tenant's at once; more wait their turn as coroutines (holding no thread) for
at most `wait_s`, then are refused with a 503 and Retry-After. So the waits a tenant causes count
against its own share, and never against what other tenants need."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from headwater.domain.errors import Unavailable


class TenantBusy(Unavailable):
    """Too many of the tenant's requests of this kind were in flight for this one to get a turn."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class _Share:
    turns: asyncio.Semaphore
    holders: int = 0  # in flight or waiting; the share is dropped when none is left


class TenantSlots:
    """Used on one event loop (the server's): no lock is needed between its coroutines."""

    def __init__(self, per_tenant: int, wait_s: float, what: str) -> None:
        self.per_tenant = per_tenant
        self.wait_s = wait_s
        self.what = what  # "token requests": named in the refusal
        self._shares: dict[str, _Share] = {}

    @asynccontextmanager
    async def hold(self, tenant: str) -> AsyncIterator[None]:
        """A turn of the tenant's, for the block; TenantBusy when none came within `wait_s`."""
        if self.per_tenant <= 0:
            yield
            return
        share = self._shares.get(tenant)
        if share is None:
            share = self._shares[tenant] = _Share(asyncio.Semaphore(self.per_tenant))
        share.holders += 1
        try:
            try:
                async with asyncio.timeout(self.wait_s):
                    await share.turns.acquire()
            except TimeoutError:
                raise TenantBusy(f"Too many {self.what} of one user or org are under way ({self.per_tenant} at once): "
                                 f"try again in a few seconds.", math.ceil(self.wait_s)) from None
            try:
                yield
            finally:
                share.turns.release()
        finally:
            share.holders -= 1
            if share.holders == 0:
                del self._shares[tenant]

    def in_use(self) -> int:
        """Tenants with a turn held or awaited (what the table holds)."""
        return len(self._shares)


class TenantLimits:
    """Each namespace's shares of the calls a request can make it wait on, one TenantSlots per
    kind, so one kind's waits never take another's turns: `runner_calls` (describes, a prop's
    `options()`, `additionalProps`, trials: code run for a form, a save or a try), `hooks` (deploy,
    activate, deactivate) and `url_fetches` (a component's `component_url`). `per_tenant` 0: no
    limit."""

    def __init__(self, per_tenant: int, wait_s: float) -> None:
        self.runner_calls = TenantSlots(per_tenant, wait_s, "describes, options(), additionalProps calls and trials")
        self.hooks = TenantSlots(per_tenant, wait_s, "hooks")
        self.url_fetches = TenantSlots(per_tenant, wait_s, "component URL fetches")
