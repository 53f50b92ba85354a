"""A prop's async options, for forms that deploy a component (the console's): the component's
own `options({page, prevContext, query})`, run in the runner (DECISIONS Extensions)."""

from __future__ import annotations

from typing import Any

from fastapi import Query
from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr

from headwater.api.deps import PrincipalDep, ServicesDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Data, PropOptions, answers

router = Router(tags=["components"])


class OptionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    configured_props: dict[str, Any] = {}
    page: StrictInt = 0
    prev_context: Any = None
    query: StrictStr | None = None
    org_id: StrictStr | None = None


@router.post("/components/{key_or_id}/props/{prop}/options", response_model=None,
             responses={**answers(Data[PropOptions]), **error_responses(422, 429, 503)})
async def prop_options(key_or_id: str, prop: str, body: OptionsRequest, svc: ServicesDep,
                       caller: PrincipalDep, org_id: str | None = Query(None)) -> dict[str, Any]:
    """`{"data": {"options": [...], "context": ...}}`; `registry:<key>` names a published component.
    The code runs in the runner of the namespace the form deploys into: `org_id` when given, else
    the org whose component it is, else the caller's own; the connected accounts named in
    `configured_props` must be ones the caller may use there. `options()` is the caller's compute:
    429, and it does not run, past a free user's daily quota. It waits holding no thread, in a turn of
    the namespace's share of such calls (503 with `Retry-After` when none comes in time)."""
    result = await svc.components.options(caller, key_or_id, prop, body.configured_props, body.page,
                                          body.prev_context, body.query, org_id or body.org_id)
    return {"data": result}
