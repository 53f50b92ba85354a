"""The API in-process: the real app (`create_app`) over the in-memory fakes (tests/fakes.py), driven
by starlette's TestClient. No server process, no Node (FakeRunner, FakeBundler), no sockets: the
rules of requests and answers, every answer checked against the app's own OpenAPI document."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from headwater.api.app import create_app
from tests.fakes import World, world
from tests.openapi_conformance import Conformance

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's note on its httpx dependency
    from starlette.testclient import TestClient

BASE = "http://testserver"


@dataclass
class App:
    world: World
    http: TestClient  # the app, no key, its lifespan run
    conformance: Conformance

    def client(self, tier: str = "paid", name: str | None = None) -> TestClient:
        """A new user's API client under /v1, each answer checked against /openapi.json."""
        name = name or f"u{len(self.world.store.data.users)}"
        _, key = self.world.services.accounts.create_user(name, f"{name}@example.com", tier)  # type: ignore[arg-type]
        client = TestClient(self.http.app, base_url=BASE + "/v1", headers={"Authorization": f"Bearer {key}"})
        client.event_hooks = {"request": [], "response": [self.conformance.check]}
        return client


def running_app(**settings: Any) -> Iterator[App]:
    w = world(**settings)
    with TestClient(create_app(w.services), base_url=BASE) as http:
        yield App(w, http, Conformance(http.get("/openapi.json").json()))


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    """One app (and world) for the tests of a module; each test has a user of its own (`api`)."""
    yield from running_app()


@pytest.fixture
def api(app: App) -> TestClient:
    return app.client()
