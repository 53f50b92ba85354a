"""Subscriptions and auto-subscriptions (SPEC Subscriptions). Parameters come in the query
string (SPEC), or in a JSON body, which existing clients also send."""

from __future__ import annotations

from typing import Any

from fastapi import Query, Request, Response

from headwater.api.deps import PrincipalDep, ServicesDep, ShapeDep
from headwater.api.errors import UNKNOWN_FIELD, error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Data, Subscription, answers
from headwater.domain.errors import BadRequest

router = Router(tags=["subscriptions"])


async def _params(request: Request, names: tuple[str, ...]) -> dict[str, str | None]:
    """Query parameters, with a JSON object body's values for those the query lacks."""
    body: dict[str, Any] = {}
    raw = await request.body()
    if raw.strip():
        try:
            parsed = await request.json()
        except ValueError:
            raise BadRequest("The request body is not valid JSON.") from None
        if not isinstance(parsed, dict):
            raise BadRequest("The request body must be a JSON object.")
        body = parsed
    unknown = [name for name in body if name not in names]
    if unknown:
        raise BadRequest(f"The request has unknown fields: {', '.join(unknown)}.",
                         {name: [UNKNOWN_FIELD] for name in unknown})
    values: dict[str, str | None] = {}
    for name in names:
        value = request.query_params.get(name, body.get(name))
        if value is not None and not isinstance(value, str):
            raise BadRequest(f"`{name}` must be a string.", {name: ["must be a string"]})
        values[name] = value
    return values


REPLAY = Query(None, description="`retained`: the emitter's retained events of the channel (the newest 100) are "
               "delivered to the listener first, once, oldest first, before any new one. Only when the "
               "subscription is new (made again, it replays nothing); one emitter, not a glob.")


@router.post("/subscriptions", response_model=None,
             responses={**answers(Data[Subscription]), **error_responses(404, 422)})
async def subscribe(request: Request, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep,
                    emitter_id: str | None = Query(None), listener_id: str | None = Query(None),
                    event_name: str | None = Query(None), org_id: str | None = Query(None),
                    replay: str | None = REPLAY) -> dict[str, Any]:
    p = await _params(request, ("emitter_id", "listener_id", "event_name", "org_id", "replay"))
    sub = svc.subscriptions.subscribe(caller, p["emitter_id"], p["listener_id"], p["event_name"], p["org_id"],
                                      p["replay"])
    return shape.data(sub.to_api())


@router.post("/auto_subscriptions", response_model=None,
             responses={**answers(Data[Subscription]), **error_responses(404)})
async def auto_subscribe(request: Request, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep,
                         event_name: str | None = Query(None), listener_id: str | None = Query(None),
                         org_id: str | None = Query(None)) -> dict[str, Any]:
    p = await _params(request, ("event_name", "listener_id", "org_id"))
    sub = svc.subscriptions.auto_subscribe(caller, p["event_name"], p["listener_id"], p["org_id"])
    return shape.data(sub.to_api())


@router.delete("/subscriptions", status_code=204, response_class=Response, responses=error_responses(404))
async def unsubscribe(request: Request, svc: ServicesDep, caller: PrincipalDep,
                      emitter_id: str | None = Query(None), listener_id: str | None = Query(None),
                      event_name: str | None = Query(None), org_id: str | None = Query(None)) -> Response:
    p = await _params(request, ("emitter_id", "listener_id", "event_name", "org_id"))
    svc.subscriptions.unsubscribe(caller, p["emitter_id"], p["listener_id"], p["event_name"], p["org_id"])
    return Response(status_code=204)


@router.get("/users/me/subscriptions", response_model=None, responses=answers(Data[list[Subscription]]))
def my_subscriptions(svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    return shape.data([s.to_api() for s in svc.subscriptions.listing(caller, None)])


@router.get("/orgs/{org_id}/subscriptions", response_model=None, responses=answers(Data[list[Subscription]]))
def org_subscriptions(org_id: str, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    return shape.data([s.to_api() for s in svc.subscriptions.listing(caller, org_id)])
