"""Liveness: answers without auth while the process can serve."""

from __future__ import annotations

from headwater.api.routing import Router

router = Router()


@router.get("/healthz", tags=["health"])
def healthz() -> dict[str, str]:
    return {"status": "ok"}
