"""Subscriptions and webhooks over /v1 in-process over the fakes: the requests they refuse. Deliveries,
retries, chaining and loops (real receivers on loopback) are tests/e2e/test_routing.py."""

from __future__ import annotations

import httpx

from tests.api.test_events import deploy


def test_bad_subscription_and_webhook_requests(api: httpx.Client) -> None:
    source_id = deploy(api)
    assert api.post("/webhooks", params={"url": "ftp://example.com"}).status_code == 400
    assert api.post("/webhooks", params={"url": "example.com/x"}).status_code == 400
    assert api.post("/webhooks").status_code == 400
    assert api.post("/subscriptions", params={"emitter_id": source_id}).status_code == 400
    assert api.post("/subscriptions", params={"emitter_id": source_id, "listener_id": "x_1"}).status_code == 400
    assert api.post("/subscriptions", params={"emitter_id": source_id, "listener_id": "wh_nope"}).status_code == 404
    assert api.post("/auto_subscriptions", params={"event_name": "", "listener_id": source_id}).status_code == 400
    assert api.delete("/subscriptions", params={"emitter_id": source_id, "listener_id": "wh_x"}).status_code == 404
