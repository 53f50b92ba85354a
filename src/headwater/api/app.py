"""The FastAPI application: the same app serves locally (uvicorn) and on Lambda (Mangum)."""

from __future__ import annotations

from fastapi import FastAPI

from headwater import __version__
from headwater.api import components, errors, events, health, ingest, sources, users
from headwater.api.middleware import RequestGuard
from headwater.bootstrap import Services

V1_ROUTERS = [users.router, components.router, sources.router, events.router]


def create_app(services: Services) -> FastAPI:
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
    app.include_router(ingest.router)
    for router in V1_ROUTERS:
        app.include_router(router, prefix="/v1")
    app.add_middleware(RequestGuard, max_body_bytes=services.settings.max_body_bytes)
    return app
