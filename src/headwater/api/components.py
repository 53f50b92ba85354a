"""Components: save code (run through the Node runner) and read saved or published ones."""

from __future__ import annotations

from typing import Any

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from headwater.api.deps import PagingDep, PrincipalDep, ServicesDep, ShapeDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Component, Data, Page, answers

router = Router(tags=["components"])


class ComponentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is a 400, not silently dropped

    component_code: StrictStr | None = Field(None, description="The component's code; wins over `component_url`.",
                                             examples=['export default {name: "hello", version: "1", run() {}}'])
    component_url: StrictStr | None = Field(None, description="Where to fetch the code from.")
    component_file: StrictStr | None = Field(
        None, description="The base name of the file the code came from (letters, digits, `._-`, ending in .js, "
        ".mjs, .cjs, .ts, .mts or .cts): error stacks name it in place of `component.js`.",
        examples=["my-source.mjs"])
    org_id: StrictStr | None = Field(None, description="The owning org (also a query parameter).")
    include: StrictStr | None = Field(None, description="Top-level fields of the answer to keep, comma-separated.")
    exclude: StrictStr | None = Field(None, description="Top-level fields of the answer to drop, comma-separated.")


@router.post("/components", response_model=None,
             responses={**answers(Data[Component]), **error_responses(422, 429, 503)})
async def create_component(
    body: ComponentCreate,
    svc: ServicesDep,
    caller: PrincipalDep,
    shape: ShapeDep,
    org_id: str | None = Query(None),
) -> dict[str, Any]:
    """Saves a component once its code loads. Loading it runs its module code: the caller's compute
    (429 past a free user's daily quota, and the code is not loaded). It waits for the code to
    load holding no thread, in a turn of its namespace's share of such calls (503 with
    `Retry-After` when none comes in time)."""
    component = await svc.components.create(caller, body.component_code, body.component_url,
                                             org_id or body.org_id, body.component_file)
    return shape.with_body(body).data(component.to_api())


@router.get("/components/registry/{key}", response_model=None, responses=answers(Data[Component]))
def get_registry_component(key: str, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    return shape.data(svc.components.get_registry(key).to_api())


@router.get("/components/{key_or_id}", response_model=None, responses=answers(Data[Component]))
def get_component(
    key_or_id: str, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep, org_id: str | None = Query(None)
) -> dict[str, Any]:
    return shape.data(svc.components.get(caller, key_or_id, org_id).to_api())


@router.get("/users/me/components", response_model=None, responses=answers(Page[Component]))
def list_my_components(svc: ServicesDep, caller: PrincipalDep, paging: PagingDep, shape: ShapeDep) -> dict[str, Any]:
    page = svc.components.list(caller, None, paging)
    return shape.page(page, [c.to_api() for c in page.items])


@router.get("/orgs/{org_id}/components", response_model=None, responses=answers(Page[Component]))
def list_org_components(
    org_id: str, svc: ServicesDep, caller: PrincipalDep, paging: PagingDep, shape: ShapeDep
) -> dict[str, Any]:
    page = svc.components.list(caller, org_id, paging)
    return shape.page(page, [c.to_api() for c in page.items])
