"""The FastAPI application: the same app serves locally (uvicorn) and on Lambda (Mangum)."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp

from headwater import __version__
from headwater.api import (
    components,
    console,
    docs,
    errors,
    events,
    health,
    metrics,
    props,
    registry,
    replay,
    sources,
    sse,
    subscriptions,
    users,
    webhooks,
    workflows,
)
from headwater.api.ingest import IngestApp
from headwater.api.middleware import RequestGuard
from headwater.bootstrap import Services
from headwater.metrics import MetricsMiddleware

V1_ROUTERS = [
    users.router, registry.router, props.router, components.router, sources.router, events.router, replay.router,
    sse.router, subscriptions.router, webhooks.router, workflows.router,
]


def create_app(services: Services) -> ASGIApp:
    """The HTTP interface of sources in front of the FastAPI app that serves everything else, and
    every answer counted for /metrics."""
    return MetricsMiddleware(IngestApp(services.ingest, services.settings.http_max_body_bytes, create_api(services)))


def create_api(services: Services) -> FastAPI:
    app = FastAPI(
        title="Headwater",
        version=__version__,
        description="Event sources: components that receive HTTP requests or run on timers and emit events.",
        redirect_slashes=False,
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    errors.install(app)
    app.include_router(health.router)
    app.include_router(metrics.router)
    console.install(app)
    docs.install(app)
    for router in V1_ROUTERS:
        app.include_router(router, prefix="/v1")
    app.add_middleware(RequestGuard, max_body_bytes=services.settings.max_body_bytes)
    _document_http_interface(app)
    return app


def _document_http_interface(app: FastAPI) -> None:
    """The HTTP interface of sources is served by IngestApp, outside FastAPI; documented here."""
    default_openapi = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = default_openapi()
            operation = {
                "tags": ["http interface"],
                "summary": "Send a request to an HTTP source",
                "description": "Any method and sub-path. 200 {\"success\": true} once the event is durably "
                "queued, or the source's own response when it uses customResponse.",
                "parameters": [{"name": "endpoint_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "accepted"}, "404": {"description": "no active source"},
                              "413": {"description": "body too large"}, "429": {"description": "quota used up"}},
            }
            schema["paths"]["/http/{endpoint_id}"] = {
                method: {**operation, "operationId": f"http_interface_{method}"}
                for method in ("get", "post", "put", "patch", "delete")
            }
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
