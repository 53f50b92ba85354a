"""`/console`: the browser console, static files served by the service itself (no CDN, no build).
The page needs no auth; everything it shows comes from the API with the key the user types."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

CONSOLE_DIR = Path(__file__).resolve().parents[1] / "console"


def install(app: FastAPI) -> None:
    @app.get("/console", include_in_schema=False)
    def console_root() -> RedirectResponse:
        return RedirectResponse("/console/", status_code=307)  # its assets are relative to /console/

    app.mount("/console/", StaticFiles(directory=CONSOLE_DIR, html=True), name="console")
