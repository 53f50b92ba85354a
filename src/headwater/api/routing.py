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
import copy
import functools
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.datastructures import DefaultPlaceholder
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.responses import Response
from starlette.routing import compile_path


class Router(APIRouter):
    def add_api_route(self, path: str, endpoint: Any, **kwargs: Any) -> None:
        endpoint = encoded_where_it_runs(endpoint, kwargs)
        super().add_api_route(path, endpoint, **kwargs)
        route = self.routes[-1]
        aliases = [path[:-1] if path.endswith("/") else path + "/"]
        if path.startswith("/orgs/"):
            workspaces = "/workspaces/" + path.removeprefix("/orgs/")
            aliases += [workspaces, workspaces[:-1] if workspaces.endswith("/") else workspaces + "/"]
        for alias in aliases:
            self.routes.append(alias_of(route, alias))


def alias_of(route: Any, path: str) -> APIRoute:
    """The route served at another path too, undocumented. A copy, not a route declared again:
    FastAPI analyses a declared route's signature and builds its models (for the 75 aliases, about
    0.4 s of a core at every server start); an alias has the same endpoint, so the same of both."""
    assert isinstance(route, APIRoute)
    alias = copy.copy(route)
    alias.path = path
    alias.path_regex, alias.path_format, alias.param_convertors = compile_path(path)
    alias.include_in_schema = False
    return alias


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
