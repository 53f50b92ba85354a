"""A workflow's events: its emits, its errors, and their live stream (SPEC Workflows, DECISIONS SSE).
Workflows themselves are managed with `headwater workflows` (SPEC: not over HTTP)."""

from __future__ import annotations

from typing import Any

from fastapi import Query, Request

from headwater.api.deps import EventsJSON, PrincipalDep, ServicesDep, SummaryLimit
from headwater.api.routing import Router
from headwater.api.schemas import Data, EventSummary, Page, Workflow, answers
from headwater.api.sse import STREAM_DOC, EventStream, sse_response
from headwater.domain.errors import NotFound
from headwater.domain.events import RESERVED_CHANNELS, RETAINED_PER_CHANNEL

router = Router(tags=["workflows"])


@router.get("/users/me/workflows", response_model=None, responses=answers(Data[list[Workflow]]))
def my_workflows(svc: ServicesDep, caller: PrincipalDep) -> dict[str, Any]:
    """Read-only (SPEC: workflows are managed with the CLI): what the console lists."""
    return {"data": [w.to_api() for w in svc.workflows.listing(caller.user.id, None)]}


@router.get("/orgs/{org_id}/workflows", response_model=None, responses=answers(Data[list[Workflow]]))
def org_workflows(org_id: str, svc: ServicesDep, caller: PrincipalDep) -> dict[str, Any]:
    return {"data": [w.to_api() for w in svc.workflows.listing(caller.user.id, org_id)]}


@router.get("/workflows/{workflow_id}/event_summaries", response_class=EventsJSON,
            responses=answers(Page[EventSummary]))
def workflow_event_summaries(workflow_id: str, svc: ServicesDep, caller: PrincipalDep,
                             limit: SummaryLimit = None, expand: str | None = Query(None),
                             event_name: str = Query("")) -> EventsJSON:
    return EventsJSON(svc.events.summaries(caller, workflow_id, limit or RETAINED_PER_CHANNEL, expand == "event",
                                           event_name))


@router.get("/workflows/{workflow_id}/{channel}/event_summaries", response_class=EventsJSON,
            responses=answers(Page[EventSummary]))
def workflow_error_summaries(workflow_id: str, channel: str, svc: ServicesDep, caller: PrincipalDep,
                             limit: SummaryLimit = None, expand: str | None = Query(None)) -> EventsJSON:
    """`/$errors/event_summaries` and `/$logs/event_summaries` (a route key cannot hold `$errors`
    literally on API Gateway)."""
    if channel not in RESERVED_CHANNELS:
        raise NotFound(f"No route /workflows/{workflow_id}/{channel}/event_summaries.")
    return EventsJSON(svc.events.summaries(caller, workflow_id, limit or RETAINED_PER_CHANNEL, expand == "event",
                                           channel))


@router.get("/workflows/{workflow_id}/sse", response_class=EventStream, responses=STREAM_DOC)
def workflow_sse(workflow_id: str, request: Request, svc: ServicesDep, caller: PrincipalDep,
                 event_name: str = Query("")) -> EventStream:
    return sse_response(svc, request, caller, workflow_id, event_name)
