"""The free tier's daily quota over everything a user's code does (DECISIONS: Accounts, orgs, quotas).

A run (and a trial run) counts one invocation and its compute. Loading a component's code to
describe it, a prop's `options()`, `additionalProps()` and a source's hooks count their compute
only. Each is admitted before any code runs: a free user whose compute or invocations for the UTC
day are spent is refused (`QuotaExceeded`, 429 with Retry-After) and nothing reaches the runner.
Its time, as the runner's caller measured it (the runner's word is never taken), is then recorded
for the user who pays, whether the call succeeded or failed. Paid users are never refused, and
always recorded.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

from headwater.domain.errors import QuotaExceeded
from headwater.ports import Offload, RunnerError, UnitOfWorkFactory, UsageRepository
from headwater.services.cache import TtlCache
from headwater.services.clock import utc_day
from headwater.settings import Settings

_TIER_TTL_S = 5.0


class Measured(Protocol):
    """A runner call's answer with its measured time (a RunResult, a ports.Timed)."""

    @property
    def duration_ms(self) -> float: ...


M = TypeVar("M", bound=Measured)


@dataclass(frozen=True)
class Admission:
    """Whether one more run may start under the user's daily cap, and the refusal when not."""

    admitted: bool
    reserved_day: str | None = None  # set when a place was counted for it (free tier)
    refusal: QuotaExceeded | None = None


class Quota:
    def __init__(self, uow: UnitOfWorkFactory, usage: UsageRepository, settings: Settings) -> None:
        self.uow = uow
        self.usage = usage
        self.settings = settings
        self._tiers: TtlCache[str, str] = TtlCache(_TIER_TTL_S)

    def tier(self, user_id: str) -> str:
        hit, tier = self._tiers.get(user_id)
        if not hit or tier is None:
            with self.uow(readonly=True) as uow:
                user = uow.users.get(user_id)
            tier = user.tier if user else "paid"
            self._tiers.put(user_id, tier)
        return tier

    def cached_tier(self, user_id: str) -> str | None:
        """The tier if this process knows it already (no store read: the ingest hot path)."""
        hit, tier = self._tiers.get(user_id)
        return tier if hit else None

    def admit(self, user_id: str) -> Admission:
        """Counts one more run against the free tier's cap (atomically, in the store)."""
        if self.tier(user_id) != "free":
            return Admission(True)
        day = utc_day()
        _, compute_ms = self.usage.totals(user_id, day, day)
        if compute_ms < self.settings.free_daily_compute_ms and self.usage.admit(
            user_id, day, self.settings.free_daily_invocations
        ):
            return Admission(True, reserved_day=day)
        return Admission(False, refusal=refusal())

    def check(self, user_id: str) -> None:
        """QuotaExceeded when the user is free and today's compute or invocations are spent."""
        if self.tier(user_id) != "free":
            return
        day = utc_day()
        invocations, compute_ms = self.usage.totals(user_id, day, day)
        if compute_ms >= self.settings.free_daily_compute_ms or invocations >= self.settings.free_daily_invocations:
            raise refusal()

    def metered(self, user_id: str, call: Callable[[], M], invocation: bool = False) -> M:
        """Admits `call` (a runner call made for `user_id`), makes it and records its measured time
        as the user's compute, also when it fails with a RunnerError; with `invocation`, it is a
        run: admitted and counted as one. No user ("": the operator's registry publishing): the
        call is made and billed to nobody."""
        if not user_id:
            return call()
        reserved_day = None
        if invocation:
            admission = self.admit(user_id)
            if admission.refusal is not None:
                raise admission.refusal
            reserved_day = admission.reserved_day
        else:
            self.check(user_id)
        try:
            answer = call()
        except RunnerError as e:
            self.record(user_id, e.duration_ms, invocation)
            raise
        except BaseException:
            if reserved_day:  # nothing ran: the run's place is given back
                self.usage.release(user_id, reserved_day)
            raise
        self.record(user_id, answer.duration_ms, invocation)
        return answer

    async def metered_async(self, user_id: str, call: Callable[[], Awaitable[M]], offload: Offload,
                            invocation: bool = False) -> M:
        """`metered` for a coroutine: the admission's read and the record's write on `offload`, the
        call awaited holding no thread."""
        if not user_id:
            return await call()
        reserved_day = None
        if invocation:
            admission = await offload.call(lambda: self.admit(user_id))
            if admission.refusal is not None:
                raise admission.refusal
            reserved_day = admission.reserved_day
        else:
            await offload.call(lambda: self.check(user_id))
        try:
            answer = await call()
        except RunnerError as e:
            failed_ms = e.duration_ms
            await offload.call(lambda: self.record(user_id, failed_ms, invocation))
            raise
        except BaseException:
            if reserved_day:  # nothing ran: the run's place is given back
                day = reserved_day
                await offload.call(lambda: self.usage.release(user_id, day))
            raise
        await offload.call(lambda: self.record(user_id, answer.duration_ms, invocation))
        return answer

    def record(self, user_id: str, duration_ms: float, invocation: bool = False) -> None:
        compute_ms = math.ceil(duration_ms)
        if compute_ms or invocation:
            self.usage.record(user_id, utc_day(), 1 if invocation else 0, compute_ms)


def refusal() -> QuotaExceeded:
    now = datetime.now(UTC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return QuotaExceeded("The free tier's daily quota is used up; it resets at 00:00 UTC.",
                         retry_after=max(1, math.ceil((midnight - now).total_seconds())))
