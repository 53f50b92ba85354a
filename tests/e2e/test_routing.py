"""Routing end to end: subscriptions, signed webhook deliveries with retries, chaining, loops.

Webhook receivers are real HTTP servers on loopback; a test waits on what a receiver got (a
threading.Condition), never on a fixed sleep.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook as Verifier

from tests.conftest import BOTH_MODES, Server, client_for, new_user, running_server
from tests.e2e.test_runs import component, deploy, wait_events, wait_until

EMITTER = component("this.$emit(event.body, {summary: 'hit', name: event.body && event.body.channel})",
                    name="Emitter")
RELAY = component("this.$emit({relayed: event}, {summary: 'relayed'})", name="Relay")
THROWER = component("throw new Error('boom ' + JSON.stringify(event.body))", name="Thrower")


class Receiver:
    """A webhook endpoint on loopback that answers each request with the next scripted status."""

    def __init__(self, statuses: list[int] | None = None, headers: dict[str, str] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.extra_headers = headers or {}
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver.cond:
                    receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.cond.notify_all()
                self.send_response(status)
                for name, value in receiver.extra_headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, count: int, timeout: float = 60) -> list[tuple[dict[str, str], bytes]]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.requests) >= count, timeout=timeout):
                raise AssertionError(f"receiver got {len(self.requests)} requests, expected {count}")
            return list(self.requests)

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module", params=BOTH_MODES)
def routing_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    mode = {} if request.param == "local" else {"HEADWATER_BACKEND": request.param}
    with running_server(tmp_path_factory.mktemp("routing"), HEADWATER_WEBHOOK_RETRY_SCHEDULE="0,0,0", **mode) as srv:
        yield srv


@pytest.fixture
def api(routing_server: Server) -> Iterator[httpx.Client]:
    user = new_user(routing_server, tier="paid")
    with client_for(routing_server, user.api_key) as client:
        yield client


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def webhook(api: httpx.Client, url: str) -> dict[str, Any]:
    r = api.post("/webhooks", params={"url": url, "name": "hook"})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def subscribe(api: httpx.Client, emitter: str, listener: str, event_name: str | None = None) -> dict[str, Any]:
    params = {"emitter_id": emitter, "listener_id": listener, **({"event_name": event_name} if event_name else {})}
    r = api.post("/subscriptions", params=params)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_a_source_event_reaches_a_webhook_signed_per_standard_webhooks(api: httpx.Client,
                                                                       receiver: Receiver) -> None:
    source_id, url = deploy(api, EMITTER)
    hook = webhook(api, receiver.url)
    assert hook["id"].startswith("wh_") and hook["signing_secret"].startswith("whsec_")
    sub = subscribe(api, source_id, hook["id"])
    assert sub == {"id": sub["id"], "emitter_id": source_id, "listener_id": hook["id"], "event_name": ""}
    assert subscribe(api, source_id, hook["id"])["id"] == sub["id"]  # idempotent
    assert httpx.post(url, json={"order": 7}).status_code == 200
    [(headers, body)] = receiver.wait(1)
    payload = Verifier(hook["signing_secret"]).verify(body, headers)
    assert payload["event"] == {"order": 7}
    assert payload["metadata"]["emitter_id"] == source_id
    assert headers["content-type"] == "application/json"
    # the receiver has the request before the service has recorded its answer
    deliveries = wait_delivery(api, hook["id"], lambda d: d["status"] == "succeeded")
    assert deliveries[0]["attempts"][0]["status"] == 200
    listed = api.get("/users/me/subscriptions").json()["data"]
    assert sub in listed
    hooks = api.get("/users/me/webhooks").json()
    assert hooks["data"][0]["id"] == hook["id"] and "user_id" not in hooks["data"][0]
    assert "signing_secret" not in hooks["data"][0]


def test_a_failing_receiver_is_retried_with_the_same_webhook_id(api: httpx.Client) -> None:
    receiver = Receiver([500, 503, 200])
    try:
        source_id, url = deploy(api, EMITTER)
        hook = webhook(api, receiver.url)
        subscribe(api, source_id, hook["id"])
        httpx.post(url, json={"n": 1})
        got = receiver.wait(3)
        assert len({h["webhook-id"] for h, _ in got}) == 1
        [delivery] = wait_delivery(api, hook["id"], lambda d: d["status"] == "succeeded")
        assert [a["status"] for a in delivery["attempts"]] == [500, 503, 200]
    finally:
        receiver.close()


def wait_delivery(api: httpx.Client, webhook_id: str, done: Any, timeout: float = 60) -> list[dict[str, Any]]:
    import time
    end = time.monotonic() + timeout
    data: list[dict[str, Any]] = []
    while time.monotonic() < end:
        data = api.get(f"/webhooks/{webhook_id}/deliveries").json()["data"]
        if data and all(done(d) for d in data):
            return data
        time.sleep(0.05)
    raise AssertionError(f"deliveries never settled: {data}")


def test_410_gone_disables_the_webhook(api: httpx.Client) -> None:
    receiver = Receiver([410])
    try:
        source_id, url = deploy(api, EMITTER)
        hook = webhook(api, receiver.url)
        subscribe(api, source_id, hook["id"])
        httpx.post(url, json={"n": 1})
        receiver.wait(1)
        [delivery] = wait_delivery(api, hook["id"], lambda d: d["status"] == "dead")
        assert [a["status"] for a in delivery["attempts"]] == [410]
        hooks = {h["id"]: h for h in api.get("/users/me/webhooks").json()["data"]}
        assert hooks[hook["id"]]["active"] is False
        retried = api.post(f"/webhooks/{hook['id']}/deliveries/{delivery['id']}/retry")
        assert retried.status_code == 202
        receiver.wait(2)  # a manual retry goes out even to a disabled webhook's dead delivery
    finally:
        receiver.close()


def test_glob_subscription_covers_sources_created_later(api: httpx.Client, receiver: Receiver) -> None:
    hook = webhook(api, receiver.url)
    subscribe(api, "dc_*", hook["id"])
    _, url = deploy(api, EMITTER)
    httpx.post(url, json={"later": True})
    [(_, body)] = receiver.wait(1)
    assert json.loads(body)["event"] == {"later": True}


def test_auto_subscription_gets_errors_of_new_sources(api: httpx.Client, receiver: Receiver) -> None:
    hook = webhook(api, receiver.url)
    r = api.post("/auto_subscriptions", params={"event_name": "$errors", "listener_id": hook["id"]})
    assert r.status_code == 200, r.text
    _, url = deploy(api, THROWER)
    httpx.post(url, json={"x": 1})
    [(_, body)] = receiver.wait(1)
    error = json.loads(body)
    assert error["metadata"]["name"] == "$errors"
    assert error["event"]["error"]["code"] == "RUNTIME_ERROR" and "boom" in error["event"]["error"]["message"]


def test_source_to_source_chaining(api: httpx.Client) -> None:
    first, url = deploy(api, EMITTER)
    second, _ = deploy(api, RELAY)
    subscribe(api, first, second)
    httpx.post(url, json={"hop": 1})
    [item] = wait_events(api, second, 1)
    assert item["event"] == {"relayed": {"hop": 1}}


def test_a_loop_is_stopped_with_an_error_event(api: httpx.Client) -> None:
    a, url = deploy(api, RELAY.replace("Relay", "Relay A"))
    b, _ = deploy(api, RELAY.replace("Relay", "Relay B"))
    subscribe(api, a, b)
    subscribe(api, b, a)
    api.post(f"/sources/{a}/run", json={"start": True})
    errors = wait_until(api, a, lambda items: bool(items), "a HOP_LIMIT error", event_name="$errors")
    errors += wait_until(api, b, lambda items: True, "b's errors", event_name="$errors")
    assert [e["event"]["error"]["code"] for e in errors] == ["HOP_LIMIT"]


def test_deleting_a_listener_removes_its_subscriptions(api: httpx.Client, receiver: Receiver) -> None:
    source_id, _ = deploy(api, EMITTER)
    hook = webhook(api, receiver.url)
    subscribe(api, source_id, hook["id"])
    assert api.delete(f"/webhooks/{hook['id']}").status_code == 204
    assert all(s["listener_id"] != hook["id"] for s in api.get("/users/me/subscriptions").json()["data"])
    assert api.delete(f"/webhooks/{hook['id']}").status_code == 404


def test_redeliver_sends_a_retained_event_again(api: httpx.Client, receiver: Receiver) -> None:
    source_id, url = deploy(api, EMITTER)
    hook = webhook(api, receiver.url)
    subscribe(api, source_id, hook["id"])
    httpx.post(url, json={"again": 1})
    [(first, _)] = receiver.wait(1)
    [event] = wait_events(api, source_id, 1)
    assert api.post(f"/sources/{source_id}/events/{event['id']}/redeliver").status_code == 202
    got = receiver.wait(2)
    assert got[1][0]["webhook-id"] != first["webhook-id"]
    assert json.loads(got[1][1])["id"] == event["id"]
    assert api.post(f"/sources/{source_id}/events/1-1/redeliver").status_code == 404


def test_a_pending_retry_survives_a_restart(tmp_path: Path) -> None:
    receiver = Receiver([500, 200])
    try:
        with running_server(tmp_path, HEADWATER_WEBHOOK_RETRY_SCHEDULE="2") as srv:
            user = new_user(srv, tier="paid")
            with client_for(srv, user.api_key) as client:
                source_id, url = deploy(client, EMITTER)
                hook = webhook(client, receiver.url)
                subscribe(client, source_id, hook["id"])
                httpx.post(url, json={"n": 1})
                receiver.wait(1)
                srv.restart()
                got = receiver.wait(2)
                assert got[0][0]["webhook-id"] == got[1][0]["webhook-id"]
                [delivery] = wait_delivery(client, hook["id"], lambda d: d["status"] == "succeeded")
                assert [a["status"] for a in delivery["attempts"]] == [500, 200]
    finally:
        receiver.close()
