"""`/docs`: Swagger UI over /openapi.json, its assets served by the service itself (no CDN):
they are the npm package `swagger-ui-dist`, pinned in web/package-lock.json and installed by
`make setup`."""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from headwater.settings import REPO_ROOT

ASSETS = Path(os.environ.get("HEADWATER_WEB_DIR", REPO_ROOT / "web")) / "node_modules" / "swagger-ui-dist"


def install(app: FastAPI) -> None:
    if ASSETS.is_dir():
        app.mount("/docs/assets", StaticFiles(directory=ASSETS), name="docs-assets")

    @app.get("/docs", include_in_schema=False, response_model=None)
    def docs() -> HTMLResponse | JSONResponse:
        if not ASSETS.is_dir():
            return JSONResponse({"error": f"The API page's assets are not installed ({ASSETS}): run `make setup`."},
                                status_code=503)
        return get_swagger_ui_html(openapi_url="/openapi.json", title="Headwater API",
                                   swagger_js_url="/docs/assets/swagger-ui-bundle.js",
                                   swagger_css_url="/docs/assets/swagger-ui.css",
                                   swagger_favicon_url="/docs/assets/favicon-32x32.png")
