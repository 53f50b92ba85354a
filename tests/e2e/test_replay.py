"""Late listeners backfilled end to end (POST /subscriptions?replay=retained), on both backends:
the emitter's retained events reach the new listener first, once, oldest first, then new ones.

Receivers are real HTTP servers on loopback (tests/e2e/test_routing.py); a test waits on what a
receiver got, never on a fixed sleep.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook as Verifier

from tests.conftest import BOTH_MODES, Server, client_for, new_user, running_server
from tests.e2e.test_routing import EMITTER, RELAY, Receiver, wait_delivery, webhook
from tests.e2e.test_runs import deploy, wait_events


# local with two serving processes over one data dir too: nothing of a backfill is in one's memory
@pytest.fixture(scope="module", params=[*BOTH_MODES, "local-2-processes"])
def replay_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    mode = ({} if request.param == "local" else {"HEADWATER_PROCESSES": "2"} if request.param == "local-2-processes"
            else {"HEADWATER_BACKEND": request.param})
    with running_server(tmp_path_factory.mktemp("replay"), HEADWATER_WEBHOOK_RETRY_SCHEDULE="0,0,0", **mode) as srv:
        yield srv


def user_api(server: Server) -> httpx.Client:
    return client_for(server, new_user(server, tier="paid").api_key)


@pytest.fixture
def api(replay_server: Server) -> Iterator[httpx.Client]:
    with user_api(replay_server) as client:
        yield client


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def subscribe(api: httpx.Client, emitter: str, listener: str, **params: str) -> httpx.Response:
    return api.post("/subscriptions", params={"emitter_id": emitter, "listener_id": listener, **params})


def emitted(url: str, *numbers: int) -> None:
    for n in numbers:
        assert httpx.post(url, json={"n": n}).status_code == 200


def numbers(requests: list[tuple[dict[str, str], bytes]], secret: str) -> list[int]:
    return [Verifier(secret).verify(body, headers)["event"]["n"] for headers, body in requests]


def test_a_webhook_subscribed_late_gets_the_retained_events_in_order_once_then_new_ones(
        api: httpx.Client, receiver: Receiver) -> None:
    source_id, url = deploy(api, EMITTER)
    emitted(url, 1, 2, 3)
    wait_events(api, source_id, 3)
    hook = webhook(api, receiver.url)
    r = subscribe(api, source_id, hook["id"], replay="retained")
    assert r.status_code == 200, r.text
    sub = r.json()["data"]
    emitted(url, 4)  # while the backfill may still be going: after the retained ones all the same
    assert numbers(receiver.wait(4), hook["signing_secret"]) == [1, 2, 3, 4]
    again = subscribe(api, source_id, hook["id"], replay="retained")  # the same subscription: no replay
    assert again.status_code == 200 and again.json()["data"]["id"] == sub["id"]
    emitted(url, 5)
    got = receiver.wait(5)
    assert numbers(got, hook["signing_secret"]) == [1, 2, 3, 4, 5]
    deliveries = wait_delivery(api, hook["id"], lambda d: d["status"] == "succeeded")
    assert len(deliveries) == 5 and len({h["webhook-id"] for h, _ in got}) == 5
    emitted(url, 6)  # had the second subscribe replayed, its copies would have come before this
    assert numbers(receiver.wait(6), hook["signing_secret"]) == [1, 2, 3, 4, 5, 6]


class GatedReceiver(Receiver):
    """A receiver whose first request is held, unanswered, until `gate` is set (a backfill caught
    in progress: its next sends wait for this answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.arrived = threading.Event()
        handler = self.server.RequestHandlerClass
        receiver = self

        class Held(handler):  # type: ignore[valid-type,misc]
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                if not receiver.arrived.is_set():
                    receiver.arrived.set()
                    receiver.gate.wait(timeout=60)
                super().do_POST()

        self.server.RequestHandlerClass = Held


def test_an_event_emitted_while_the_backfill_is_sending_comes_after_the_retained_ones(api: httpx.Client) -> None:
    receiver = GatedReceiver()
    try:
        source_id, url = deploy(api, EMITTER)
        emitted(url, 1, 2, 3)
        wait_events(api, source_id, 3)
        hook = webhook(api, receiver.url)
        assert subscribe(api, source_id, hook["id"], replay="retained").status_code == 200
        assert receiver.arrived.wait(timeout=60)  # the backfill is sending the first retained event
        emitted(url, 4)
        wait_events(api, source_id, 4)  # committed while the backfill waits for its answer
        receiver.gate.set()
        assert numbers(receiver.wait(4), hook["signing_secret"]) == [1, 2, 3, 4]
        emitted(url, 5)
        assert numbers(receiver.wait(5), hook["signing_secret"]) == [1, 2, 3, 4, 5]
    finally:
        receiver.gate.set()
        receiver.close()


def test_a_source_subscribed_late_runs_on_the_retained_events_first(api: httpx.Client) -> None:
    source_id, url = deploy(api, EMITTER)
    emitted(url, 1, 2)
    wait_events(api, source_id, 2)
    relay, _ = deploy(api, RELAY)
    assert subscribe(api, source_id, relay, replay="retained").status_code == 200
    emitted(url, 3)
    relayed = wait_events(api, relay, 3)  # newest first
    assert [item["event"]["relayed"]["n"] for item in reversed(relayed)] == [1, 2, 3]


def test_replay_of_another_namespaces_emitter_is_a_404_and_sends_it_nothing(
        replay_server: Server, api: httpx.Client, receiver: Receiver) -> None:
    victim, url = deploy(api, EMITTER)
    emitted(url, 1)
    wait_events(api, victim, 1)
    with user_api(replay_server) as mallory:
        hook = webhook(mallory, receiver.url)
        r = subscribe(mallory, victim, hook["id"], replay="retained")
        assert r.status_code == 404, r.text
        assert r.json()["error"] == f"No emitter {victim}."  # as for any id not hers: nothing of its own
        own, own_url = deploy(mallory, EMITTER)
        emitted(own_url, 99)
        wait_events(mallory, own, 1)
        assert subscribe(mallory, own, hook["id"], replay="retained").status_code == 200
        got = receiver.wait(1)
        assert numbers(got, hook["signing_secret"]) == [99]  # her own event, none of the other's
        deliveries = wait_delivery(mallory, hook["id"], lambda d: d["status"] == "succeeded")
        assert [d["emitter_id"] for d in deliveries] == [own]


@pytest.mark.parametrize("params", [{"replay": "all"}, {"replay": ""}, {"replay": "retained", "glob": "dc_*"}])
def test_replay_other_than_retained_or_of_a_glob_is_a_422(api: httpx.Client, params: dict[str, Any]) -> None:
    source_id, _ = deploy(api, EMITTER)
    hook = webhook(api, "https://example.com/in")
    query = {k: v for k, v in params.items() if k != "glob"}  # the parameter is shared by every mode
    r = subscribe(api, params.get("glob", source_id), hook["id"], **query)
    assert r.status_code == 422, r.text
    error = r.json()
    assert "`replay`" in error["error"] and "replay" in error["details"]
    assert all(s["listener_id"] != hook["id"] for s in api.get("/users/me/subscriptions").json()["data"])
