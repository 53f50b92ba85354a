"""Runs on record (DECISIONS, Extensions): listed, read and run again by their owner.

A re-run is a new run of the same input against the code the source or workflow has now: it is
queued like a manual run and kept on record as a run of kind `rerun`, naming the run it repeats.
"""

from __future__ import annotations

from typing import Any

from headwater.domain.commands import Command, RunSource, RunWorkflow
from headwater.domain.errors import Conflict, NotFound
from headwater.domain.models import Principal
from headwater.domain.pagination import Page, PageRequest
from headwater.domain.run_records import RUNS_KEPT, RunRecord, seq_of
from headwater.ports import UnitOfWorkFactory
from headwater.services.sources import Sources
from headwater.services.workflows import Workflows
from headwater.settings import Settings


class RunRecords:
    def __init__(self, uow: UnitOfWorkFactory, sources: Sources, workflows: Workflows, settings: Settings) -> None:
        self.uow = uow
        self.sources = sources
        self.workflows = workflows
        self.settings = settings

    def _owner(self, principal: Principal, kind: str, owner_id: str) -> None:
        """NotFound unless the caller may see the source (or workflow)."""
        if kind == "source":
            self.sources.get(principal, owner_id)
        else:
            self.workflows.get(principal, owner_id)

    def list(self, principal: Principal, kind: str, owner_id: str, page: PageRequest) -> Page[RunRecord]:
        self._owner(principal, kind, owner_id)
        with self.uow(readonly=True) as uow:
            floor = _floor(uow.state.get(owner_id).runs)
            return uow.runs.list(owner_id, page, floor)

    def get(self, principal: Principal, kind: str, owner_id: str, run_id: str) -> RunRecord:
        self._owner(principal, kind, owner_id)
        seq = seq_of(run_id)
        record = None
        if seq is not None:
            with self.uow(readonly=True) as uow:
                record = uow.runs.get(owner_id, seq, _floor(uow.state.get(owner_id).runs))
        if record is None or record.id != run_id:
            raise NotFound(f"No run {run_id} of {owner_id} on record (the newest {RUNS_KEPT} are kept).")
        return record

    def rerun(self, principal: Principal, kind: str, owner_id: str, run_id: str) -> None:
        """Queues the run's input again (202). Conflict when it cannot be: a hook (update the source
        to run its hooks), an input too large to have been kept, an inactive source."""
        record = self.get(principal, kind, owner_id, run_id)
        if record.kind == "hook":
            raise Conflict(f"Run {run_id} is the source's {record.hook} hook: hooks run again when the source is "
                           "updated, not on their own.")
        if not record.trigger_kept:
            raise Conflict(f"Run {run_id}'s input ({record.trigger_bytes} bytes) was too large to keep, so it "
                           "cannot be run again.")
        command: Command
        if kind == "source":
            source = self.sources.get(principal, owner_id)
            if not source.active:
                raise Conflict(f"Source {owner_id} is inactive; activate it to run it.")
            timer = record.kind == "timer" or (record.kind in ("rerun", "manual") and _is_tick(record.trigger))
            timeout = self.settings.timer_timeout_ms if timer else self.settings.http_timeout_ms
            command = RunSource(owner_id, record.trigger, timeout, "manual", namespace=source.namespace,
                                rerun_of=run_id)
        else:
            workflow = self.workflows.get(principal, owner_id)
            command = RunWorkflow(owner_id, record.trigger, namespace=workflow.namespace, rerun_of=run_id)
        with self.uow() as uow:
            uow.outbox.add(command)
            uow.commit()


def _floor(runs: int) -> int:
    """The lowest seq still on record when `runs` have been recorded."""
    return max(1, runs - RUNS_KEPT + 1)


def _is_tick(trigger: Any) -> bool:
    return isinstance(trigger, dict) and "timestamp" in trigger and ("interval_seconds" in trigger or "cron" in trigger)
