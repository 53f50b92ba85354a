"""Records for the storage contract tests (the SQL store checks references, so users and
components exist before what points at them)."""

from __future__ import annotations

import itertools
from typing import Any

from headwater.domain import ids
from headwater.domain.models import Component, ComponentDefinition, Org, Source, User

_clock = itertools.count(1_700_000_000)


def user(store: Any, username: str | None = None) -> User:
    u = User(ids.new_id("user"), username or f"user{next(_clock)}", "a@example.com", "free", next(_clock))
    with store.uow() as uow:
        uow.users.add(u)
        uow.commit()
    return u


def org(store: Any, owner: User, orgname: str | None = None) -> Org:
    o = Org(ids.new_id("org"), "Acme", orgname or f"org{next(_clock)}", "o@example.com", owner.id, next(_clock))
    with store.uow() as uow:
        uow.orgs.add(o)
        uow.commit()
    return o


def component(store: Any, namespace: str, key: str | None = "my-source", code: str = "export default {}",
              file_name: str | None = None) -> Component:
    now = next(_clock)
    c = Component(ids.new_id("component"), namespace, namespace, code, ids.code_hash(code),
                  ComponentDefinition("My source", "0.1.0", "source", key, configurable_props=[{"name": "x"}]),
                  None, now, now, file_name=file_name)
    with store.uow() as uow:
        uow.components.add(c)
        uow.commit()
    return c


def source(owner: User, component_id: str, slug: str, endpoint_id: str | None = None,
           namespace: str | None = None, **props: Any) -> Source:
    now = next(_clock)
    return Source(ids.new_id("source"), namespace or owner.id, owner.id, component_id, slug.title(), slug,
                  {"x": 1.5, **props}, [{"name": "x", "type": "string"}], endpoint_id, True, now, now)


def add_source(store: Any, s: Source) -> Source:
    with store.uow() as uow:
        uow.sources.add(s)
        uow.commit()
    return s
