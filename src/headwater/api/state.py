"""A source's `this.db` (issue 34, DECISIONS Extensions): read it, patch keys (a JSON merge patch,
RFC 7396), list its snapshots, restore one. Owner only: to anyone who cannot see the source's
namespace it does not exist (404)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Body
from fastapi.concurrency import run_in_threadpool
from pydantic import Field

from headwater.api.deps import PrincipalDep, ServicesDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Data, Shape, answers

router = Router(tags=["state"])


class State(Shape):
    db: dict[str, Any] = Field(description="`this.db`: its keys and values, as the component stored them, but the "
                               "values of the source's secret props, shown as `[secret]`.")
    size: int = Field(description="Bytes of its compact JSON, what `max_bytes` bounds.")
    max_bytes: int = Field(description="The bound on `this.db` (HEADWATER_DB_MAX_BYTES).")
    version: int = Field(description="The state's version: it grows with each commit of runs, hooks, patches.")


class Restored(State):
    undo_snapshot_id: str = Field(description="The snapshot taken of the state the restore replaced: "
                                  "restore it to undo the restore.")


class Snapshot(Shape):
    id: str = Field(examples=["ss_4bQ0V2uS3jXq1cGv8nYwZt9a"])
    created_at: int = Field(description="When it was taken (Unix seconds).")
    reason: Literal["deploy", "update", "restore"] = Field(
        description="What took it: a deploy (the state the deploy left), an update or a restore (the state each "
        "replaced).")
    component_id: str = Field(description="The code that ran on this state when it was taken.")
    component_version: str = Field(description="That component's `version`.")
    size: int = Field(description="Bytes of its `this.db`'s compact JSON.")


class Snapshots(Shape):
    data: list[Snapshot] = Field(description="The newest 10, newest first.")


MergePatch = Annotated[dict[str, Any], Body(
    description="A JSON merge patch (RFC 7396) of `this.db`: each key's new value, null to remove the key, an "
    "object merged into an object.")]


class RestoreBody(Shape):
    snapshot_id: str = Field(min_length=1, description="One of the source's snapshots.")


@router.get("/sources/{source_id}/state", response_model=None, responses=answers(Data[State]))
def get_source_state(source_id: str, svc: ServicesDep, caller: PrincipalDep) -> dict[str, Any]:
    """The source's `this.db`: its keys and values (what the component stored there, secrets included)."""
    states = svc.states
    return {"data": states.to_api(source_id, states.get(caller, source_id))}


@router.patch("/sources/{source_id}/state", response_model=None,
              responses={**answers(Data[State]), **error_responses(409, 422)})
async def patch_source_state(source_id: str, patch: MergePatch, svc: ServicesDep,
                             caller: PrincipalDep) -> dict[str, Any]:
    """Changes keys of the source's `this.db`, between its runs (a run's own writes, before or after, are kept:
    the later write of a key wins). 422, and nothing changed, when `this.db` would be over its bound; 409 only
    when the state kept changing under many attempts. Takes no snapshot."""
    states = svc.states
    state = await states.patch(caller, source_id, patch)
    return await run_in_threadpool(lambda: {"data": states.to_api(source_id, state)})


@router.get("/sources/{source_id}/state/snapshots", response_model=None, responses=answers(Snapshots))
def list_source_state_snapshots(source_id: str, svc: ServicesDep, caller: PrincipalDep) -> dict[str, Any]:
    """The snapshots of the source's `this.db` kept: one per deploy, update and restore, the newest 10."""
    states = svc.states
    return {"data": [states.snapshot_to_api(s) for s in states.snapshots(caller, source_id)]}


@router.post("/sources/{source_id}/state/restore", response_model=None,
             responses={**answers(Data[Restored]), **error_responses(409, 422, 429, 503)})
async def restore_source_state(source_id: str, body: RestoreBody, svc: ServicesDep,
                               caller: PrincipalDep) -> dict[str, Any]:
    """Puts a snapshot's `this.db` back. It is an update of the source: its deactivate hook runs on the current
    state and its activate hook on the restored one (when it is active; 422 when a hook fails, and nothing
    changes), and a snapshot of the state it replaces is taken (`undo_snapshot_id`). 404 for a snapshot the
    source does not keep; 422 for one over the current `this.db` bound."""
    states = svc.states
    state, undo = await states.restore(caller, source_id, body.snapshot_id)
    return await run_in_threadpool(lambda: {"data": {**states.to_api(source_id, state), "undo_snapshot_id": undo}})
