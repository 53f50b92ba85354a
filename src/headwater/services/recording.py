"""Committing what runs did: the pure `domain.runs.record`, saved conditionally, retried on conflict.

A run's outcome is its emits, logs, error and `db_writes`; applied to whatever state is current,
it gives the same result whoever committed in between. So on a version conflict the outcome is
simply applied again to the fresh state: two concurrent runs keep both their events, both their
dedupe ids and both their `this.db` writes (the later write of one key wins).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from headwater.domain.commands import Command
from headwater.domain.events import RETAINED_PER_CHANNEL
from headwater.domain.health import RECOVERED
from headwater.domain.models import SourceState, StoredEvent
from headwater.domain.routing import Delivery, Routed
from headwater.domain.run_records import NOT_RUN, RUNS_KEPT, RunInfo, RunRecord, make_record
from headwater.domain.runs import ERRORS, LOGS, RunContext, RunResult, Tally, record
from headwater.ports import UnitOfWork, UnitOfWorkFactory
from headwater.services.contention import retry_on_conflict

MAX_ATTEMPTS = 20
# Records past the newest 100 are let go every this many runs, not at each commit: a delete in every
# commit dirtied a second part of the table's pages each time (reads never show them meanwhile).
RUNS_TRIMMED_EVERY = 32
_OTHER_WRITES = 8  # the state, usage, and what `extra` writes (a source record and its claims)


class StateConflict(Exception):
    """Still losing the race for a source's state after MAX_ATTEMPTS: the caller retries later."""


@dataclass
class Outcome:
    """One run or hook to record: its result, what triggered it, the task it finishes, and how it
    started when it is a run to keep on record (`run`)."""

    ctx: RunContext
    result: RunResult
    trigger: Any = None
    task_id: str | None = None
    run: RunInfo | None = None
    trigger_text: str | None = None  # `trigger` as compact JSON, when it was encoded already


def commit_outcomes(
    uow_factory: UnitOfWorkFactory,
    source_id: str,
    outcomes: list[Outcome],
    now_ms: Callable[[], int],
    extra: Callable[[UnitOfWork, SourceState], None] | None = None,
    commands: Iterable[Command] = (),
    route: Callable[[UnitOfWork, list[StoredEvent]], Routed] | None = None,
    known: SourceState | None = None,
) -> tuple[SourceState, set[str]]:
    """Records `outcomes` in order on the source's current state and commits the new state (on its
    version), the events and `commands`, plus what `route` makes of the events (their fan-out, or
    their webhook deliveries).
    `extra` writes more in the same unit of work (a source record, say) and may change the state.
    `known`: the state as the caller last committed it, tried first (not read again; a stale one
    only loses the conditional save, and the next attempt reads). Returns the committed state and
    the channels written."""
    def attempt(n: int) -> tuple[SourceState, list[StoredEvent], list[StoredEvent]]:
        # Everything but the writes happens on a snapshot, so the write transaction holds the store
        # (SQLite's one writer) for its writes alone; the conditional save catches what changed since.
        with uow_factory(readonly=True) as reading:
            current = replace(known) if known is not None and n == 0 else reading.state.get(source_id)
            state, events, runs, tally = current, [], [], Tally()
            # delivered again after their results were committed (asked of the state read, once: each
            # run's record makes a new `applied`, whose index `took` would build again)
            taken = {o.task_id for o in outcomes if o.task_id is not None and current.took(o.task_id)}
            for outcome in outcomes:
                if outcome.task_id is not None:
                    if outcome.task_id in taken:
                        continue
                    taken.add(outcome.task_id)  # twice in one batch: its first outcome counts
                ms = now_ms()
                before = state.db
                recorded = record(state, outcome.ctx, outcome.result, outcome.trigger, ms, outcome.task_id, tally)
                state = recorded.state
                events += recorded.events
                if outcome.run is not None:
                    state.runs += 1
                    runs.append(_run_record(state.runs, outcome, recorded.events, ms, before))
            tally.count_into(state)
            routed = route(reading, events) if route and events else Routed()
        with uow_factory() as uow:
            if extra is not None:
                extra(uow, state)
            rest = _write(uow, source_id, current.version, state, events, [*commands, *routed.commands],
                          routed.deliveries, runs)
        state.version = current.version + 1
        return state, events, rest

    state, events, rest = retry_on_conflict(
        attempt, MAX_ATTEMPTS,
        lambda: StateConflict(f"source {source_id}: state kept changing under {MAX_ATTEMPTS} attempts"))
    channels = {e.channel for e in events}
    if rest:
        _put_rest(uow_factory, source_id, rest, channels)
    if ERRORS in channels:
        _tell_notices(source_id, events)
    return state, channels


def _run_record(seq: int, outcome: Outcome, events: list[StoredEvent], ms: int, db: dict[str, Any]) -> RunRecord:
    """`db`: the state the run started from (its record keeps the written keys' values before it)."""
    assert outcome.run is not None
    result = outcome.result
    return make_record(seq, outcome.run, result.error, result.error_code in NOT_RUN, result.duration_ms,
                       result.cpu_ms, outcome.trigger, (e for e in events if e.channel != LOGS), result.db_writes,
                       result.logs, result.response, ms, trigger_text=outcome.trigger_text, db=db)


# Told of each stall that ended (domain.health), after its commit: the composition root counts them.
on_recovered: list[Callable[[str], None]] = []


def _tell_notices(source_id: str, events: list[StoredEvent]) -> None:
    if any(e.channel == ERRORS and e.event["error"]["code"] == RECOVERED for e in events):
        for tell in on_recovered:
            tell(source_id)


def _write(uow: UnitOfWork, source_id: str, version: int, state: SourceState, events: list[StoredEvent],
           commands: list[Command], deliveries: list[Delivery], runs: list[RunRecord]) -> list[StoredEvent]:
    """The state, its runs on record and as many events as one commit takes; returns the events left
    over, which go in further commits (idempotent puts under the ids the committed state reserved
    for them). The deliveries carry their events, so they all go in the first commit."""
    room = (None if uow.max_writes is None
            else max(1, uow.max_writes - _OTHER_WRITES - len(commands) - len(deliveries) - len(runs)))
    first, rest = (events, []) if room is None else (events[:room], events[room:])
    uow.state.save(source_id, state, version)
    for run in runs:
        uow.runs.put(source_id, run)
    if runs and state.runs // RUNS_TRIMMED_EVERY != (state.runs - len(runs)) // RUNS_TRIMMED_EVERY:
        uow.runs.trim(source_id, state.runs - RUNS_KEPT + 1)
    for event in first:
        uow.events.put(source_id, event)
    for delivery in deliveries:
        uow.deliveries.add(delivery)
    for command in commands:
        uow.outbox.add(command)
    channels = {e.channel for e in events}
    if not rest:
        _trim(uow, source_id, channels)
    uow.commit()
    return rest


def _put_rest(uow_factory: UnitOfWorkFactory, source_id: str, rest: list[StoredEvent], channels: set[str]) -> None:
    start = 0
    while start < len(rest):
        with uow_factory() as uow:
            size = uow.max_writes or len(rest)
            for event in rest[start:start + size]:
                uow.events.put(source_id, event)
            start += size
            if start >= len(rest):
                _trim(uow, source_id, channels)
            uow.commit()


def _trim(uow: UnitOfWork, source_id: str, channels: set[str]) -> None:
    for channel in channels:
        uow.events.trim(source_id, channel, RETAINED_PER_CHANNEL)
