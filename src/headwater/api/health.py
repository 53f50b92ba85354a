"""Liveness: answers without auth while the process can serve."""

from __future__ import annotations

from headwater.api.routing import Router
from headwater.api.schemas import Health, answers

router = Router()


@router.get("/healthz", tags=["health"], response_model=None, responses=answers(Health))
def healthz() -> dict[str, str]:
    return {"status": "ok"}
