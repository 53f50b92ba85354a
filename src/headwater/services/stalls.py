"""Stalls (DECISIONS, Extensions): a source that stopped doing its job says so, once.

A stall ends in the commit of the run that shows the source working again (domain.runs.record:
free and exact). That it started must be looked for while nothing happens: `check`, called
periodically (a thread of each serving process locally, the sweep on AWS), reads the sources
the StallWatch says are due (not every source's state), and for each one now stalled commits
one SOURCE_STALLED `$errors` event together with the state's `stalled` mark, conditionally on
the state's version: of several processes or sweeps looking at once, one emits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from headwater.domain import health
from headwater.domain.models import Source, SourceState
from headwater.domain.runs import RunResult
from headwater.ports import StallWatch, UnitOfWork
from headwater.services.clock import now_ms
from headwater.services.recording import Outcome, StateConflict, commit_outcomes
from headwater.services.sources import Sources

log = logging.getLogger("headwater.stalls")

PASS_LIMIT = 200  # sources looked at per pass: bounded work; the rest are next pass's
RECHECK_S = 300.0  # a stalled source is looked at again at most this long after (its end is seen in its commit)
# The least time between two looks at a source: a look reads its state, and a healthy source's
# deadline moves on with every run (a 1-second timer's, every second). A stall is seen at most
# this long after it starts (on AWS the sweep's minute is the floor anyway). The setting
# HEADWATER_STALL_MIN_LOOK_S (tests) changes it.
MIN_LOOK_S = 30.0


class _Settled(Exception):
    """Between the look and the commit, another looker marked the stall, or the source ran."""


@dataclass
class Counts:
    started: int = 0
    looked: int = 0


def watch_of(sources: Sources, source: Source) -> health.Watch:
    """What the source is watched for: its timer while active, its expected cadence."""
    timer = sources.timer(source)
    expect = source.expect_events_within if source.active else None
    return health.Watch(timer, expect, float(source.updated_at), sources.settings.tick_grace_s)


def verdict(state: SourceState, watch: health.Watch, now: float) -> health.Verdict:
    return health.verdict(state.ran_tick, state.last_event_ms / 1000, watch, now)


class Stalls:
    def __init__(self, sources: Sources, watch: StallWatch,
                 on_stalled: Callable[[Source, str], None] = lambda source, why: None) -> None:
        """`on_stalled`: told of each stall started here (a metric)."""
        self.sources = sources
        self.uow = sources.uow
        self.watch = watch
        self.on_stalled = on_stalled
        self.min_look_s = sources.settings.stall_min_look_s

    def sync(self, source: Source | None, source_id: str, now: float) -> None:
        """The source as committed is watched (from its next deadline) or not (SyncSchedule). A
        stall of what it is no longer watched for (its expectation cleared, its timer removed)
        ends here, as no run would end it."""
        watch = watch_of(self.sources, source) if source else None
        with self.uow(readonly=True) as uow:
            state = uow.state.get(source_id)
        if source is not None and watch is not None and state.stalled and source.active and not (
                watch.timer if state.stalled.get("why") == "timer" else watch.expect_s):
            self._end(source, now)
        if watch is None or not watch.any:
            self.watch.disarm(source_id)
            return
        self.watch.arm(source_id, verdict(state, watch, now).next_check or now)

    def _end(self, source: Source, now: float) -> None:
        runs = self.sources.runs
        component = runs.component(source.component_id)
        if component is None:
            return

        def clear(_: UnitOfWork, new: SourceState) -> None:
            if not new.stalled:
                raise _Settled
            new.stalled = None

        with self.uow(readonly=True) as uow:
            stalled = uow.state.get(source.id).stalled or {}
        message = (f"The source is no longer watched for what stalled it (stalled since "
                   f"{health.iso(float(stalled.get('since') or now))}): its settings changed.")
        outcome = Outcome(runs.context(source, component), RunResult.failed(health.RECOVERED, message))
        try:
            _, channels = commit_outcomes(
                self.uow, source.id, [outcome], now_ms, extra=clear,
                route=lambda uow, events: runs.routes(uow, source.id, source.namespace, source.created_at, events, 0))
        except (_Settled, StateConflict):
            return
        runs.announce(source.id, channels)

    def check(self, now: float, limit: int = PASS_LIMIT) -> Counts:
        """One pass: each due source is looked at once; how many stalls started."""
        counts = Counts()
        for source_id, seen in self.watch.due(now, limit):
            counts.looked += 1
            try:
                next_check = self._look(source_id, now, counts)
            except Exception:  # one source's failure must not stop the others' looks
                log.exception("looking for a stall of %s failed", source_id)
                next_check = now + RECHECK_S
            if next_check is None:
                self.watch.disarm(source_id)
            else:
                self.watch.move(source_id, seen, next_check)
        return counts

    def _look(self, source_id: str, now: float, counts: Counts) -> float | None:
        with self.uow(readonly=True) as uow:
            source = uow.sources.get(source_id)
            state = uow.state.get(source_id)
        watch = watch_of(self.sources, source) if source else None
        if source is None or watch is None or not watch.any:
            return None
        found = verdict(state, watch, now)
        again = now + max(self.min_look_s, min(RECHECK_S, watch.span))
        if found.why is None or state.stalled:
            return max(found.next_check, now + self.min_look_s) if found.next_check else again
        assert found.since is not None
        if self._start(source, state, watch, found.why, found.since, now):
            counts.started += 1
            self.on_stalled(source, found.why)
        return again

    def _start(self, source: Source, state: SourceState, watch: health.Watch, why: str, since: float,
               now: float) -> bool:
        """Commits the stall's mark and its event, unless it is settled meanwhile (see _Settled)."""
        runs = self.sources.runs
        component = runs.component(source.component_id)
        if component is None:
            return False
        message = health.stall_message(why, since, watch)
        outcome = Outcome(runs.context(source, component), RunResult.failed(health.STALLED, message))

        def mark(_: UnitOfWork, new: SourceState) -> None:
            if new.stalled or verdict(new, watch, now).why is None:
                raise _Settled
            new.stalled = {"why": why, "since": since, "tick": new.ran_tick}

        try:
            _, channels = commit_outcomes(
                self.uow, source.id, [outcome], now_ms, extra=mark,
                route=lambda uow, events: runs.routes(uow, source.id, source.namespace, source.created_at, events, 0))
        except (_Settled, StateConflict):
            return False
        runs.announce(source.id, channels)
        log.info("source %s stalled (%s) since %s", source.id, why, since)
        return True
