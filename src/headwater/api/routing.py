"""A router that serves every path with and without a trailing slash, and `/orgs/` paths also as
`/workspaces/` (DECISIONS: HTTP basics), without redirects. Only the plain form is documented.

A sync route's JSON answer is encoded where the route ran, on its worker thread: FastAPI would
encode what it returns on the event loop (`jsonable_encoder`, then the response's render), and an
answer's size is its data's (a page of sources with 64 KB props each, a run's output), so one
tenant's large answer would stall every other request. Routes that answer a Response of their own
(events, errors, pages, streams) are left as they are.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.datastructures import DefaultPlaceholder
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from starlette.responses import Response


class Router(APIRouter):
    def add_api_route(self, path: str, endpoint: Any, **kwargs: Any) -> None:
        endpoint = encoded_where_it_runs(endpoint, kwargs)
        variants = [path]
        if path.startswith("/orgs/"):
            variants.append("/workspaces/" + path.removeprefix("/orgs/"))
        for i, variant in enumerate(variants):
            documented = kwargs.get("include_in_schema", True) and i == 0
            super().add_api_route(variant, endpoint, **{**kwargs, "include_in_schema": documented})
            alias = variant[:-1] if variant.endswith("/") else variant + "/"
            super().add_api_route(alias, endpoint, **{**kwargs, "include_in_schema": False})


def encoded_where_it_runs(endpoint: Callable[..., Any], route: dict[str, Any]) -> Callable[..., Any]:
    """A sync JSON route whose answer (not a Response already) is encoded and rendered by the
    function itself, as FastAPI would have (no response model: `jsonable_encoder`, then the
    route's response class with its status code). Its signature is the endpoint's (`wraps`)."""
    response_class = route.get("response_class")
    if isinstance(response_class, DefaultPlaceholder):
        response_class = response_class.value
    if (asyncio.iscoroutinefunction(endpoint) or route.get("response_model") is not None
            or not isinstance(response_class, type) or not issubclass(response_class, JSONResponse)):
        return endpoint
    status_code = route.get("status_code") or 200

    @functools.wraps(endpoint)
    def encoded(*args: Any, **kwargs: Any) -> Any:
        answer = endpoint(*args, **kwargs)
        if isinstance(answer, Response):
            return answer
        return response_class(jsonable_encoder(answer), status_code=status_code)
    return encoded
