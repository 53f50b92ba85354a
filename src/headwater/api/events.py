"""A source's retained events: summaries, and asynchronous deletion (SPEC Source events)."""

from __future__ import annotations

from fastapi import Query, Response

from headwater.api.deps import EventsJSON, PrincipalDep, ServicesDep, SummaryLimit
from headwater.api.routing import Router
from headwater.api.schemas import ACCEPTED_EMPTY, EventSummary, Page, answers
from headwater.domain.events import RETAINED_PER_CHANNEL

router = Router(tags=["events"])


@router.get("/sources/{source_id}/event_summaries", response_class=EventsJSON, responses=answers(Page[EventSummary]))
def source_event_summaries(
    source_id: str,
    svc: ServicesDep,
    caller: PrincipalDep,
    limit: SummaryLimit = None,
    expand: str | None = Query(None),
    event_name: str = Query(""),
) -> EventsJSON:
    return EventsJSON(svc.events.summaries(caller, source_id, limit or RETAINED_PER_CHANNEL, expand == "event",
                                           event_name))


@router.delete("/sources/{source_id}/events", status_code=202, response_class=Response, responses=ACCEPTED_EMPTY)
def delete_source_events(
    source_id: str,
    svc: ServicesDep,
    caller: PrincipalDep,
    start_id: str | None = Query(None),
    end_id: str | None = Query(None),
    event_name: str | None = Query(None),
) -> Response:
    svc.events.request_delete(caller, source_id, start_id, end_id, event_name)
    return Response(status_code=202)
