"""Workflows deployed and deleted with the caller's key (DECISIONS Workflows, the CLI's extension):
`POST /v1/workflows` takes the workflow file as JSON, `DELETE /v1/workflows/{id}` removes one.
SPEC's routes are unchanged; `headwater workflows ... --user` stays the operator's form."""

from __future__ import annotations

from typing import Any

from fastapi import Query, Response
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from headwater.api.deps import PrincipalDep, ServicesDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Data, Workflow, answers

router = Router(tags=["workflows"])


class WorkflowStepBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(description="An identifier, unique in the workflow (not `trigger`).", examples=["double"])
    component: StrictStr | None = Field(None, description="A registry key or a saved component's `sc_` id.",
                                        examples=["headwater-emit"])
    component_code: StrictStr | None = Field(None, description="The action's code, instead of `component`.")
    props: dict[str, Any] = Field(default_factory=dict, description="Prop values; `{{ expression }}` is "
                                  "evaluated at run time over `steps`.", examples=[{"n": "{{steps.trigger.event.n}}"}])


class WorkflowBody(BaseModel):
    """A workflow file's content (YAML parsed), each step's component as code, key or `sc_` id."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(description="Deploying a name the namespace has replaces that workflow's steps "
                            "(same `p_` id, new `d_` id).", examples=["enrich-orders"])
    trigger: StrictStr | None = Field(None, description="A `dc_` or `p_` emitter: the same as subscribing the "
                                      "workflow to it.")
    steps: list[WorkflowStepBody]
    org_id: StrictStr | None = Field(None, description="The owning org (also a query parameter).")


@router.post("/workflows", response_model=None,
             responses={**answers(Data[Workflow]), **error_responses(403, 404, 422, 429, 503)})
async def deploy_workflow(body: WorkflowBody, svc: ServicesDep, caller: PrincipalDep,
                          org_id: str | None = Query(None)) -> dict[str, Any]:
    """Deploys a workflow as `headwater workflows deploy FILE` does with the logged-in key. Loading a
    step's code is the caller's compute: 429 past a free user's daily quota. It waits for the code
    to load holding no thread, in a turn of its namespace's share of such calls (503 with
    `Retry-After` when none comes in time)."""
    data = body.model_dump(exclude={"org_id"}, exclude_none=True)
    workflow = await svc.workflows.deploy_data(caller, org_id or body.org_id, data)
    return {"data": workflow.to_api()}


@router.delete("/workflows/{workflow_id}", status_code=204, response_class=Response)
def delete_workflow(workflow_id: str, svc: ServicesDep, caller: PrincipalDep) -> Response:
    """Deletes a workflow, its subscriptions and its events."""
    svc.workflows.remove(caller, workflow_id)
    return Response(status_code=204)
