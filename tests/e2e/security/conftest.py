"""The escape suite: hostile components (tests/components/hostile/) against real services.

Two services: `guarded`, with loopback URLs refused (as a production deployment would have them)
and a small runner memory cap, for the package, and `lenient`, the session's local service with the
local default (loopback allowed), for the tests that need a network target of their own (a loopback
listener the test starts). Every test checks that the attack failed and that /healthz still answers 200.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import COMPONENTS, Server, client_for, new_user, running_server

HOSTILE = COMPONENTS / "hostile"
DEADLINE_S = 60.0
POLL_S = 0.05


@pytest.fixture(scope="package")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("guarded"), HEADWATER_ALLOW_LOOPBACK_URLS="0",
                        HEADWATER_ALLOW_PRIVATE_URLS="0", HEADWATER_RUNNER_MEMORY_MB="512") as srv:
        yield srv


@pytest.fixture(scope="package")
def lenient(local_server: Server) -> Server:
    return local_server


class Account:
    """One user of a service, with an API client."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.user = new_user(server, tier="paid")
        self.api = client_for(server, self.user.api_key)

    def deploy(self, name: str, **replace: str) -> Source:
        code = source_code(name, **replace)
        r = self.api.post("/sources", json={"component_code": code})
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        return Source(self, data["id"], data["configured_props"]["http"]["endpoint_url"])


class Source:
    def __init__(self, account: Account, id: str, url: str) -> None:
        self.account, self.id, self.url = account, id, url

    def send(self, body: Any) -> None:
        r = httpx.post(self.url, json=body, timeout=30)
        assert r.status_code == 200, r.text

    def events(self, channel: str = "") -> list[dict]:
        r = self.account.api.get(f"/sources/{self.id}/event_summaries",
                                 params={"event_name": channel, "expand": "event"})
        assert r.status_code == 200, r.text
        return [item["event"] for item in r.json()["data"]]

    def wait(self, done: Callable[[list[dict]], bool], what: str, channel: str = "",
             deadline_s: float = DEADLINE_S) -> list[dict]:
        """Polls the channel until `done(events)` (newest first), with a deadline."""
        end = time.monotonic() + deadline_s
        events: list[dict] = []
        while time.monotonic() < end:
            events = self.events(channel)
            if done(events):
                return events
            time.sleep(POLL_S)
        raise AssertionError(f"timed out waiting for {what}; last {channel or 'default'} events: "
                             f"{json.dumps(events)[:2000]}; $errors: {json.dumps(self.events('$errors'))[:2000]}")

    def first_event(self) -> dict:
        return self.wait(lambda events: len(events) >= 1, "an event")[-1]

    def first_error(self) -> dict:
        return self.wait(lambda events: len(events) >= 1, "an error event", "$errors")[-1]["error"]

    def run(self, body: Any) -> dict:
        """Sends one request and returns the run's first emitted event."""
        before = len(self.events())
        self.send(body)
        return self.wait(lambda events: len(events) > before, "the run's event")[0]


def source_code(name: str, **replace: str) -> str:
    code = (HOSTILE / name).read_text()
    for placeholder, value in replace.items():
        code = code.replace(placeholder, value)
    return code


def assert_healthy(server: Server) -> None:
    assert server.process is not None and server.process.poll() is None, "the service died"
    assert httpx.get(server.base_url + "/healthz", timeout=10).status_code == 200


def data_path(server: Server, name: str) -> Path:
    return server.data_dir / name
