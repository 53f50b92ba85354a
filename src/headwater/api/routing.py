"""A router that serves every path with and without a trailing slash, and `/orgs/` paths also as
`/workspaces/` (DECISIONS: HTTP basics), without redirects. Only the plain form is documented."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter


class Router(APIRouter):
    def add_api_route(self, path: str, endpoint: Any, **kwargs: Any) -> None:
        variants = [path]
        if path.startswith("/orgs/"):
            variants.append("/workspaces/" + path.removeprefix("/orgs/"))
        for i, variant in enumerate(variants):
            documented = kwargs.get("include_in_schema", True) and i == 0
            super().add_api_route(variant, endpoint, **{**kwargs, "include_in_schema": documented})
            alias = variant[:-1] if variant.endswith("/") else variant + "/"
            super().add_api_route(alias, endpoint, **{**kwargs, "include_in_schema": False})
