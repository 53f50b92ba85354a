"""Request dependencies: the services, the caller, pagination and response shaping."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import Depends, Query, Request, Security
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BeforeValidator, Field

from headwater.bootstrap import Services
from headwater.domain.events import RETAINED_PER_CHANNEL
from headwater.domain.models import Principal
from headwater.domain.pagination import DEFAULT_LIMIT, MAX_LIMIT, Page, PageRequest, page_request


def services(request: Request) -> Services:
    return request.app.state.services


BEARER = HTTPBearer(scheme_name="bearer", auto_error=False,
                    description="An API key (`hw_...`): `Authorization: Bearer <key>`.")


def bearer_key(request: Request) -> str | None:
    """The API key of `Authorization: Bearer <key>`, if the request has one."""
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    return key.strip() if scheme.lower() == "bearer" else None


def principal(request: Request, svc: Annotated[Services, Depends(services)],
              bearer: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]) -> Principal:
    """The caller. The key is read here, not by BEARER (which only declares the scheme in OpenAPI),
    so that a missing or malformed header is the same 401 with `WWW-Authenticate: Bearer`."""
    caller = svc.accounts.authenticate(bearer_key(request))
    request.state.principal = caller
    return caller


def _blank_is_none(value: Any) -> Any:
    return None if value == "" else value


PageLimit = Annotated[Annotated[int, Field(ge=1, le=MAX_LIMIT)] | None, BeforeValidator(_blank_is_none),
                     Query(description=f"1..{MAX_LIMIT}, default {DEFAULT_LIMIT}")]
"""`limit` of lists: an integer, or absent (`?limit=` too, as it always was)."""

SummaryLimit = Annotated[Annotated[int, Field(ge=1, le=RETAINED_PER_CHANNEL)] | None, BeforeValidator(_blank_is_none),
                         Query(description=f"1..{RETAINED_PER_CHANNEL}, default {RETAINED_PER_CHANNEL}")]
"""`limit` of event summaries (DECISIONS Events): default and maximum are the retained count."""


def paging(
    limit: PageLimit = None,
    after: Annotated[str | None, Query()] = None,
    before: Annotated[str | None, Query()] = None,
) -> PageRequest:
    return page_request(limit, after, before)


class Shape:
    """SPEC common parameters `include` / `exclude`: top-level fields of each resource in `data`."""

    def __init__(
        self,
        include: Annotated[str | None, Query(description=(
            "Top-level fields of each resource in `data` to keep, comma-separated: the others are left out, "
            "required ones too (the answer's `...Fields` schema requires none)."))] = None,
        exclude: Annotated[str | None, Query(description=(
            "Top-level fields of each resource in `data` to leave out, comma-separated."))] = None,
    ) -> None:
        self.include = _fields(include)
        self.exclude = _fields(exclude)

    def with_body(self, body: Any) -> Shape:
        """POST bodies may carry include/exclude too; the query string wins when both do."""
        self.include = self.include or _fields(getattr(body, "include", None))
        self.exclude = self.exclude or _fields(getattr(body, "exclude", None))
        return self

    def one(self, item: dict[str, Any]) -> dict[str, Any]:
        if self.include:
            item = {k: v for k, v in item.items() if k in self.include}
        if self.exclude:
            item = {k: v for k, v in item.items() if k not in self.exclude}
        return item

    def data(self, item: dict[str, Any] | list[dict[str, Any]]) -> dict[str, Any]:
        return {"data": [self.one(i) for i in item] if isinstance(item, list) else self.one(item)}

    def page(self, page: Page, items: list[dict[str, Any]]) -> dict[str, Any]:
        return {"page_info": page.page_info(), "data": [self.one(i) for i in items]}


class EventsJSON(JSONResponse):
    """For answers that carry events. Events are component output, which the API's input checks do
    not bound: rendered by the stdlib encoder (about 1000 levels deep, where pydantic stops at 255)
    and ASCII-escaped (a JavaScript string may hold a lone surrogate, which UTF-8 cannot encode)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":"), allow_nan=False).encode("ascii")


def _fields(value: str | None) -> set[str]:
    return {f.strip() for f in value.split(",") if f.strip()} if value else set()


ServicesDep = Annotated[Services, Depends(services)]
PrincipalDep = Annotated[Principal, Depends(principal)]
PagingDep = Annotated[PageRequest, Depends(paging)]
ShapeDep = Annotated[Shape, Depends()]
