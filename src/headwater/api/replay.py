"""Replay: a retained event sent again to the source's current subscribers (DECISIONS Extensions)."""

from __future__ import annotations

from fastapi import Query, Response
from starlette.concurrency import run_in_threadpool

from headwater.api.deps import PrincipalDep, ServicesDep
from headwater.api.routing import Router
from headwater.api.schemas import ACCEPTED_EMPTY

router = Router(tags=["events"])


@router.post("/sources/{source_id}/events/{event_id}/redeliver", status_code=202, response_class=Response,
             responses=ACCEPTED_EMPTY)
async def redeliver(source_id: str, event_id: str, svc: ServicesDep, caller: PrincipalDep,
                    event_name: str = Query("")) -> Response:
    await run_in_threadpool(svc.routing.redeliver, caller, source_id, event_id, event_name)
    return Response(status_code=202)
