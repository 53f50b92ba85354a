"""GET /v1/users/me: the caller's record with its orgs and usage (SPEC Users)."""

from __future__ import annotations

from typing import Any

from headwater.api.deps import PrincipalDep, ServicesDep, ShapeDep
from headwater.api.routing import Router

router = Router(tags=["users"])


@router.get("/users/me")
def me(svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    return shape.data(svc.accounts.profile(caller))
