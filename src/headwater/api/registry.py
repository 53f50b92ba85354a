"""The registry: every published component, and a search by key, name and description
(DECISIONS Extensions). Mounted before the components routes, whose `/components/{key}` would
otherwise take `registry` and `search` for keys."""

from __future__ import annotations

from typing import Any

from fastapi import Query

from headwater.api.deps import PagingDep, PrincipalDep, ServicesDep, ShapeDep
from headwater.api.routing import Router
from headwater.api.schemas import Component, Page, SearchResult, answers
from headwater.domain.pagination import MAX_LIMIT

router = Router(tags=["components"])


@router.get("/components/registry", response_model=None, responses=answers(Page[Component]))
def list_registry(svc: ServicesDep, caller: PrincipalDep, paging: PagingDep, shape: ShapeDep) -> dict[str, Any]:
    page = svc.registry_search.page(paging)
    return shape.page(page, [c.to_api() for c in page.items])


@router.get("/components/search", response_model=None, responses=answers(SearchResult))
def search_registry(svc: ServicesDep, caller: PrincipalDep, query: str = Query(""), app: str | None = Query(None),
                    type: str | None = Query(None), limit: int = Query(MAX_LIMIT, ge=1, le=MAX_LIMIT)
                    ) -> dict[str, list[str]]:
    """`{"sources": [keys], "actions": [keys]}`, best matches first, as the original service answers."""
    return svc.registry_search.search(query, app, type, limit)
