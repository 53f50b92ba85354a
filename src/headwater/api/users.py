"""GET /v1/users/me: the caller's record with its orgs and usage (SPEC Users)."""

from __future__ import annotations

from typing import Any

from headwater.api.deps import PrincipalDep, ServicesDep, ShapeDep
from headwater.api.routing import Router
from headwater.api.schemas import Data, User, answers

router = Router(tags=["users"])


@router.get("/users/me", response_model=None, responses=answers(Data[User]))
def me(svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    return shape.data(svc.accounts.profile(caller))
