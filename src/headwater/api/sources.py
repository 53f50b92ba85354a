"""Sources: deploy, update, delete, list and run deployed components (SPEC Sources)."""

from __future__ import annotations

from typing import Any

from fastapi import Query, Request, Response
from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr
from starlette.concurrency import run_in_threadpool

from headwater.api.deps import PagingDep, PrincipalDep, ServicesDep, ShapeDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import ACCEPTED_EMPTY, Data, Page, Source, answers
from headwater.domain.errors import BadRequest
from headwater.services.sources import SourceRequest

router = Router(tags=["sources"])


class SourceBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    component_id: StrictStr | None = None
    component_code: StrictStr | None = None
    component_url: StrictStr | None = None
    component_key: StrictStr | None = None
    name: StrictStr | None = None
    configured_props: dict[str, Any] | None = None
    active: StrictBool | None = None
    org_id: StrictStr | None = None
    include: StrictStr | None = None
    exclude: StrictStr | None = None

    def request(self) -> SourceRequest:
        return SourceRequest(
            component_id=self.component_id,
            component_code=self.component_code,
            component_url=self.component_url,
            component_key=self.component_key,
            name=self.name,
            configured_props=self.configured_props,
            active=self.active,
        )


@router.post("/sources/", response_model=None,
             responses={**answers(Data[Source]), **error_responses(404, 409, 422, 503)})
def create_source(
    body: SourceBody, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep, org_id: str | None = Query(None)
) -> dict[str, Any]:
    source = svc.sources.create(caller, body.request(), org_id or body.org_id)
    return shape.with_body(body).data(svc.sources.to_api(source))


@router.put("/sources/{source_id}", response_model=None,
            responses={**answers(Data[Source]), **error_responses(409, 422, 503)})
def update_source(source_id: str, body: SourceBody, svc: ServicesDep, caller: PrincipalDep,
                  shape: ShapeDep) -> dict[str, Any]:
    source = svc.sources.update(caller, source_id, body.request())
    return shape.with_body(body).data(svc.sources.to_api(source))


@router.delete("/sources/{source_id}", status_code=204, response_class=Response)
def delete_source(source_id: str, svc: ServicesDep, caller: PrincipalDep) -> Response:
    svc.sources.delete(caller, source_id)
    return Response(status_code=204)


@router.get("/sources/{source_id}", response_model=None, responses=answers(Data[Source]))
def get_source(source_id: str, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    return shape.data(svc.sources.to_api(svc.sources.get(caller, source_id)))


@router.get("/users/me/sources/", response_model=None, responses=answers(Page[Source]))
def list_my_sources(svc: ServicesDep, caller: PrincipalDep, paging: PagingDep, shape: ShapeDep) -> dict[str, Any]:
    page = svc.sources.list(caller, None, paging)
    return shape.page(page, [svc.sources.to_api(s) for s in page.items])


@router.get("/orgs/{org_id}/sources", response_model=None, responses=answers(Page[Source]))
def list_org_sources(org_id: str, svc: ServicesDep, caller: PrincipalDep, paging: PagingDep,
                     shape: ShapeDep) -> dict[str, Any]:
    page = svc.sources.list(caller, org_id, paging)
    return shape.page(page, [svc.sources.to_api(s) for s in page.items])


@router.post("/sources/{source_id}/run", status_code=202, response_class=Response,
             responses={**ACCEPTED_EMPTY, **error_responses(409)})
async def run_source(source_id: str, request: Request, svc: ServicesDep, caller: PrincipalDep) -> Response:
    raw = await request.body()
    try:
        event = await request.json() if raw.strip() else None
    except ValueError:
        raise BadRequest("The request body is not valid JSON.") from None
    await run_in_threadpool(svc.sources.manual_run, caller, source_id, event)
    return Response(status_code=202)
