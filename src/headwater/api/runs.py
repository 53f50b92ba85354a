"""Runs on record (DECISIONS, Extensions): the newest 100 of a source or workflow, one run, a re-run."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import Response
from pydantic import Field

from headwater.api.deps import EventsJSON, PagingDep, PrincipalDep, ServicesDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import ACCEPTED_EMPTY, Data, Page, Shape, answers
from headwater.domain.run_records import RunRecord

router = Router(tags=["runs"])


class RunError(Shape):
    code: str = Field(examples=["RUNTIME_ERROR"])
    message: str
    stack: str | None = Field(None, description="Cut at 16 KB.")
    step: str | None = Field(None, description="A workflow's step that failed.")


class Emitted(Shape):
    count: int = Field(description="Events the run stored on the channel ($errors included).")
    ids: list[str] = Field(description="The first 20 of their ids.")


class LogLine(Shape):
    level: str
    message: str = Field(description="Values of the source's secrets appear as `[secret]`.")
    ts: Any = Field(None, description="When it was logged (ms), as the runner said.")


class RunSummary(Shape):
    id: str = Field(description="`<ms>-<seq>`: when the run was recorded, and its place among the owner's runs.")
    kind: Literal["http", "timer", "manual", "subscription", "rerun", "hook"] = Field(
        description="What started it: an HTTP request, a timer tick, a manual run, an event from a subscription, "
        "a re-run of another run, or a hook (`hook` names it).")
    hook: Literal["deploy", "activate", "deactivate"] | None = None
    rerun_of: str | None = Field(None, description="The run whose input a re-run took.")
    outcome: Literal["success", "error", "not_run"] = Field(
        description="`not_run`: refused before any code ran (the free quota spent, a connected account unusable).")
    ended_at_ms: int
    duration_ms: float = Field(description="Measured by the service, from outside the runner.")
    cpu_ms: float | None = Field(None, description="CPU the account's runner process used over the run's runner "
                                 "call, read from its cgroup and shared among the call's runs by their time (so it "
                                 "includes the account's other work at the same time); null where it is not "
                                 "measured (no cgroup, hooks, AWS).")
    error: RunError | None = None
    emitted: dict[str, Emitted] = Field(description="By channel, \"\" the default one (its `$logs` lines are under "
                                        "`logs`).")
    log_count: int
    rerunnable: bool = Field(description="False for hooks and for runs whose input was too large to keep.")


class Run(RunSummary):
    trigger: Any = Field(description="The input as the run got it (an HTTP request as received, bounded as bodies "
                         "are); null when it was over 256 KB of JSON (see `trigger_bytes`).")
    trigger_kept: bool
    trigger_bytes: int
    component_id: str | None = Field(None, description="The code that ran.")
    response_status: int | None = Field(None, description="The status an HTTP run answered with `respond()`.")
    db_keys_written: list[str] = Field(description="`this.db` keys the run wrote or deleted (the first 100).")
    db_keys_count: int
    logs: list[LogLine] = Field(description="Its log lines, up to 64 KB of them.")
    logs_dropped: int = Field(description="Lines past the 64 KB kept here (all are on the `$logs` channel).")


def summary(record: RunRecord) -> dict[str, Any]:
    return {"id": record.id, "kind": record.kind, "hook": record.hook, "rerun_of": record.rerun_of,
            "outcome": record.outcome, "ended_at_ms": record.ended_ms, "duration_ms": record.duration_ms,
            "cpu_ms": record.cpu_ms, "error": record.error, "emitted": record.emitted,
            "log_count": len(record.logs) + record.logs_dropped, "rerunnable": record.rerunnable}


def detail(record: RunRecord) -> dict[str, Any]:
    return {**summary(record), "trigger": record.trigger, "trigger_kept": record.trigger_kept,
            "trigger_bytes": record.trigger_bytes, "component_id": record.component_id,
            "response_status": record.response_status, "db_keys_written": record.db_keys_written,
            "db_keys_count": record.db_keys_count, "logs": record.logs, "logs_dropped": record.logs_dropped}


def _page(svc: Any, caller: Any, kind: str, owner_id: str, paging: Any) -> EventsJSON:
    page = svc.run_records.list(caller, kind, owner_id, paging)
    return EventsJSON({"page_info": page.page_info(), "data": [summary(r) for r in page.items]})


@router.get("/sources/{source_id}/runs", response_class=EventsJSON, responses=answers(Page[RunSummary]))
def list_source_runs(source_id: str, svc: ServicesDep, caller: PrincipalDep, paging: PagingDep) -> EventsJSON:
    """The source's newest 100 runs (hooks, timer ticks, HTTP requests, manual runs, re-runs), newest first."""
    return _page(svc, caller, "source", source_id, paging)


@router.get("/sources/{source_id}/runs/{run_id}", response_class=EventsJSON, responses=answers(Data[Run]))
def get_source_run(source_id: str, run_id: str, svc: ServicesDep, caller: PrincipalDep) -> EventsJSON:
    """One run on record: its input, outcome, error, time, events by channel, `this.db` keys written, logs."""
    return EventsJSON({"data": detail(svc.run_records.get(caller, "source", source_id, run_id))})


@router.post("/sources/{source_id}/runs/{run_id}/rerun", status_code=202, response_class=Response,
             responses={**ACCEPTED_EMPTY, **error_responses(409)})
def rerun_source_run(source_id: str, run_id: str, svc: ServicesDep, caller: PrincipalDep) -> Response:
    """Queues the run's input again against the source's current code: a new run of kind `rerun`. 409 for a
    hook, an input too large to have been kept, or an inactive source."""
    svc.run_records.rerun(caller, "source", source_id, run_id)
    return Response(status_code=202)


@router.get("/workflows/{workflow_id}/runs", response_class=EventsJSON, responses=answers(Page[RunSummary]))
def list_workflow_runs(workflow_id: str, svc: ServicesDep, caller: PrincipalDep, paging: PagingDep) -> EventsJSON:
    """The workflow's newest 100 runs, newest first."""
    return _page(svc, caller, "workflow", workflow_id, paging)


@router.get("/workflows/{workflow_id}/runs/{run_id}", response_class=EventsJSON, responses=answers(Data[Run]))
def get_workflow_run(workflow_id: str, run_id: str, svc: ServicesDep, caller: PrincipalDep) -> EventsJSON:
    """One run of the workflow: its trigger event, outcome, the step that failed, time, events, logs."""
    return EventsJSON({"data": detail(svc.run_records.get(caller, "workflow", workflow_id, run_id))})


@router.post("/workflows/{workflow_id}/runs/{run_id}/rerun", status_code=202, response_class=Response,
             responses={**ACCEPTED_EMPTY, **error_responses(409)})
def rerun_workflow_run(workflow_id: str, run_id: str, svc: ServicesDep, caller: PrincipalDep) -> Response:
    """Queues the run's trigger event again against the workflow's current steps."""
    svc.run_records.rerun(caller, "workflow", workflow_id, run_id)
    return Response(status_code=202)
