"""Sources: deploy, update, delete, list and run deployed components (SPEC Sources)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from starlette.concurrency import run_in_threadpool

from headwater.api.deps import PagingDep, PrincipalDep, ServicesDep, ShapeDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import ACCEPTED_EMPTY, Data, Page, Shape, Source, SourceHealth, answers
from headwater.domain import health
from headwater.domain.errors import BadRequest
from headwater.services import schedules
from headwater.services.health import source_health
from headwater.services.sources import KEEP, SourceRequest

router = Router(tags=["sources"])


class SourceBody(BaseModel):
    """Unknown fields are refused (400): `props` for `configured_props` must not deploy a source
    without its props."""

    model_config = ConfigDict(extra="forbid")

    component_id: StrictStr | None = Field(None, description="A saved component (`sc_...`); wins over the others.",
                                           examples=["sc_..."])
    component_code: StrictStr | None = Field(
        None, description="The component's code (ESM, CommonJS or TypeScript).",
        examples=['export default {name: "hello", version: "1", props: {http: "$.interface.http"}, '
                  'run(e) { this.$emit(e.body) }}'])
    component_file: StrictStr | None = Field(
        None, description="The base name of the file `component_code` came from (letters, digits, `._-`, ending "
        "in .js, .mjs, .cjs, .ts, .mts or .cts): error stacks name it in place of `component.js`.",
        examples=["my-source.mjs"])
    component_url: StrictStr | None = Field(None, description="Where to fetch the code from (kept as metadata "
                                            "when `component_code` is given).")
    component_key: StrictStr | None = Field(None, description="A registry component's key.",
                                            examples=["headwater-http"])
    name: StrictStr | None = Field(None, description="Defaults to the component's name slug.", examples=["orders"])
    configured_props: dict[str, Any] | None = Field(
        None, description="Prop values by name; a timer as `{\"intervalSeconds\": N}` or `{\"cron\": \"...\"}`. "
        "On update, props not given keep their values.",
        examples=[{"timer": {"intervalSeconds": 300}}])
    active: StrictBool | None = Field(
        None, description="False disables the source, true (the default) enables it. A source created inactive "
        "runs its deploy hook; its activate hook runs when it is enabled.")
    expect_events_within: StrictInt | None = Field(
        None, ge=health.MIN_EXPECT_S, le=health.MAX_EXPECT_S,
        description="Seconds the source may go without emitting an event before it counts as stalled (a "
        "`SOURCE_STALLED` event on `$errors`); null: no expectation. On update, not given keeps it, null clears it.",
        examples=[3600])
    catch_up: Literal["skip", "all"] | None = Field(
        None, description="What the timer does with ticks missed while the service was down: `skip` (the default) "
        "runs once and counts the missed ones skipped; `all` runs each missed tick in order, at most "
        f"{health.MAX_CATCH_UP_RUNS} (older ones counted skipped). On update, not given keeps it.")
    org_id: StrictStr | None = Field(None, description="The owning org (also a query parameter).")
    include: StrictStr | None = Field(None, description="Top-level fields of the answer to keep, comma-separated.")
    exclude: StrictStr | None = Field(None, description="Top-level fields of the answer to drop, comma-separated.")

    def request(self) -> SourceRequest:
        return SourceRequest(
            component_id=self.component_id,
            component_code=self.component_code,
            component_url=self.component_url,
            component_key=self.component_key,
            name=self.name,
            configured_props=self.configured_props,
            active=self.active,
            component_file=self.component_file,
            expect_events_within=self.expect_events_within if "expect_events_within" in self.model_fields_set else KEEP,
            catch_up=self.catch_up if self.catch_up is not None else KEEP,
        )


@router.post("/sources/", response_model=None,
             responses={**answers(Data[Source]), **error_responses(404, 409, 422, 429, 503)})
async def create_source(
    body: SourceBody, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep, org_id: str | None = Query(None)
) -> dict[str, Any]:
    """Deploys a component. Loading code given here and `additionalProps()` are the caller's compute,
    the hooks the source owner's: 429, and no code runs, past the payer's free daily quota. The code
    runs awaited holding no thread, in a turn of the namespace's share of such calls (503 with
    `Retry-After` when none comes in time)."""
    source = await svc.sources.create(caller, body.request(), org_id or body.org_id)
    return shape.with_body(body).data(svc.sources.to_api(source))


@router.put("/sources/{source_id}", response_model=None,
            responses={**answers(Data[Source]), **error_responses(403, 409, 422, 429, 503)})
async def update_source(source_id: str, body: SourceBody, svc: ServicesDep, caller: PrincipalDep,
                        shape: ShapeDep) -> dict[str, Any]:
    """Changes a source's props, code or state. New code's loading and `additionalProps()` are the
    caller's compute, the hooks the source owner's: 429, and nothing changes, past the payer's quota.
    403 when the caller changes the code or props of a source that uses a connected account the
    caller may not use (another org member's personal account): `details` names those props."""
    source = await svc.sources.update(caller, source_id, body.request())
    return shape.with_body(body).data(svc.sources.to_api(source))


@router.delete("/sources/{source_id}", status_code=204, response_class=Response, responses=error_responses(503))
async def delete_source(source_id: str, svc: ServicesDep, caller: PrincipalDep) -> Response:
    """Deletes a source after its deactivate hook (not run past its owner's free daily quota; 503
    with `Retry-After`, and nothing deleted, when no turn of its namespace's share of hooks comes
    in time)."""
    await svc.sources.delete(caller, source_id)
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


class Schedule(Shape):
    cron: str | None = Field(description="The cron expression; null for an interval timer.")
    interval_seconds: int = Field(description="The interval; for a cron timer, the gap between its next two runs.")
    timezone: str = Field(description="The cron expression's IANA time zone.")
    active: bool = Field(description="False while the source is paused.")
    last_run_at: int | None = Field(description="The newest tick taken (Unix seconds); null before the first.")
    next_run_at: int | None = Field(description="When it runs next (Unix seconds); null while paused. An interval "
                                    "timer runs on the grid of its last tick, the first time one interval after "
                                    "the source was last saved.")


@router.get("/sources/{source_id}/schedule", response_model=None,
            responses={**answers(Data[Schedule]), **error_responses(404)})
def get_schedule(source_id: str, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    """A timer source's schedule and its next run (an extension; 404 for a source without a timer)."""
    return shape.data(schedules.schedule(svc.sources, caller, source_id))


@router.get("/sources/{source_id}/health", response_model=None,
            responses={**answers(Data[SourceHealth]), **error_responses(404)})
def get_source_health(source_id: str, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    """A source's health at a glance (an extension): its last run, event and tick, its next tick, its
    runs, events and errors over the last hour and day and as a series, whether it is stalled, and
    its timer's skipped ticks. 404 for a source the caller cannot see."""
    return shape.data(source_health(svc.sources, caller, source_id))
