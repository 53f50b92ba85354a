"""`GET /metrics`: this process's metrics in Prometheus text. It names no tenant by default
(HEADWATER_METRICS_SOURCES=0); with HEADWATER_METRICS_TOKEN set it answers only
`Authorization: Bearer <token>` (401 otherwise), else nobody's key is asked for (like /healthz)."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from headwater.api.deps import ServicesDep, bearer_key
from headwater.api.errors import error_responses
from headwater.domain.errors import Unauthorized
from headwater.metrics import REGISTRY

router = APIRouter(tags=["health"])


def presents(request: Request, token: str) -> bool:
    """The request carries `Bearer <token>`, compared in constant time."""
    given = bearer_key(request) or ""
    return hmac.compare_digest(given.encode(), token.encode())


@router.get("/metrics", response_class=Response, responses={
    200: {"description": "Prometheus text exposition format.",
          "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}},
    401: {**error_responses(401)[401],
          "description": "HEADWATER_METRICS_TOKEN is set and the request does not carry it as its bearer token."}})
def metrics(request: Request, svc: ServicesDep) -> Response:
    """With HEADWATER_METRICS_TOKEN set, `Authorization: Bearer <that token>` (not an API key) is required."""
    token = svc.settings.metrics_token
    if token and not presents(request, token):
        raise Unauthorized("`Authorization: Bearer <HEADWATER_METRICS_TOKEN>` is required.")
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
