"""Request dependencies: the services, the caller, pagination and response shaping."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request

from headwater.bootstrap import Services
from headwater.domain.models import Principal
from headwater.domain.pagination import Page, PageRequest, page_request


def services(request: Request) -> Services:
    return request.app.state.services


def principal(request: Request, svc: Annotated[Services, Depends(services)]) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    caller = svc.accounts.authenticate(key.strip() if scheme.lower() == "bearer" else None)
    request.state.principal = caller
    return caller


def paging(
    limit: Annotated[str | None, Query()] = None,
    after: Annotated[str | None, Query()] = None,
    before: Annotated[str | None, Query()] = None,
) -> PageRequest:
    return page_request(limit, after, before)


class Shape:
    """SPEC common parameters `include` / `exclude`: top-level fields of each resource in `data`."""

    def __init__(
        self,
        include: Annotated[str | None, Query()] = None,
        exclude: Annotated[str | None, Query()] = None,
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


def _fields(value: str | None) -> set[str]:
    return {f.strip() for f in value.split(",") if f.strip()} if value else set()


ServicesDep = Annotated[Services, Depends(services)]
PrincipalDep = Annotated[Principal, Depends(principal)]
PagingDep = Annotated[PageRequest, Depends(paging)]
ShapeDep = Annotated[Shape, Depends()]
