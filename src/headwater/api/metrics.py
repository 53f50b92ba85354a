"""`GET /metrics`: this process's metrics in Prometheus text (no auth, like /healthz)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from headwater.metrics import REGISTRY

router = APIRouter(tags=["health"])


@router.get("/metrics", response_class=Response, responses={
    200: {"description": "Prometheus text exposition format.",
          "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}})
def metrics() -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
