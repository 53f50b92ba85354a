"""The floor of the comparison: a bare Starlette app under uvicorn, started the way `headwater serve`
starts uvicorn (same defaults, access log off), so the ratio to it is what Headwater's work costs.

    .venv/bin/python bench/baseline_app.py --port 8123
"""

from __future__ import annotations

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def default_response(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse({"success": True})


async def echo(request: Request) -> JSONResponse:
    return JSONResponse(await request.json())


app = Starlette(routes=[Route("/bench", default_response, methods=["POST"]), Route("/echo", echo, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)


if __name__ == "__main__":
    main()
