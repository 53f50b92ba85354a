"""Every outbound exchange a tenant can point somewhere ends by a deadline on the whole exchange,
from connecting to the last byte (issue 31): a receiver that sends one byte every half second, in
its headers or in its body, never lets a read time out, so a per-read timeout alone never ends
the exchange. Each one here must end by its deadline plus a margin; the waits are capped, so an
exchange that hangs fails the test rather than hanging it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from headwater.adapters.oauth_client import HttpOAuthClient
from headwater.adapters.url_fetcher import HttpUrlFetcher
from headwater.adapters.webhook_sender import HttpWebhookSender
from headwater.domain.errors import Invalid
from headwater.ports import OAuthEndpoints, OAuthUnavailable
from headwater.settings import Settings
from tests.security.drip import BODY, HEADERS, Drip, dripping

MARGIN_S = 5.0  # generous: the deadline is what is shown, not how promptly it fires


@pytest.fixture(params=[HEADERS, BODY])
def drips(request: pytest.FixtureRequest) -> Iterator[Drip]:
    with dripping(request.param) as drip:
        yield drip


def ended_within(bound_s: float, *calls: Callable[[], Any]) -> list[Any]:
    """Each call's result (or what it raised), all made at once; fails if any runs past `bound_s`."""
    outcomes: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            outcomes[i] = calls[i]()
        except Exception as e:  # noqa: BLE001 - the outcome asserted on
            outcomes[i] = e
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, started + bound_s - time.monotonic()))
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"exchanges {hung} still had no end {bound_s:g} s after they started"
    return outcomes


def test_a_component_url_fetch_ends_by_its_timeout(drips: Drip) -> None:
    fetcher = HttpUrlFetcher(Settings(url_fetch_timeout_s=2))
    [outcome] = ended_within(2 + MARGIN_S, lambda: asyncio.run(fetcher.fetch_text(drips.url)))
    assert isinstance(outcome, Invalid) and "no answer within 2 s" in outcome.message, repr(outcome)


def test_a_webhook_delivery_and_a_send_http_end_by_their_deadline(drips: Drip) -> None:
    """The deadline is 15 s (DECISIONS); the exchange here has one of 3 s, so it takes 3 s, not 15."""
    assert Settings().delivery_timeout_s == 15
    sender = HttpWebhookSender(Settings(delivery_timeout_s=3))
    delivery, send = ended_within(3 + MARGIN_S, lambda: sender.post(drips.url, b"{}", {}),
                                  lambda: sender.request("PUT", drips.url, b"{}", {}))
    for result in (delivery, send):
        if drips.mode == HEADERS:
            assert result.status is None and result.error == "no answer within 3 s", result
        else:  # the status came at once: it is the outcome, whatever the body does after it
            assert result.status == 200 and result.error is None, result
        assert result.duration_ms < (3 + MARGIN_S) * 1000


def test_oauth_token_requests_end_by_their_deadline(drips: Drip) -> None:
    client = HttpOAuthClient(Settings(oauth_token_timeout_s=3))
    endpoints = OAuthEndpoints("client", "secret", "http://127.0.0.1:9/authorize", drips.url)
    outcomes = ended_within(
        3 + MARGIN_S, lambda: asyncio.run(client.exchange(endpoints, "code", "http://127.0.0.1:9/cb", "v" * 43)),
        lambda: client.refresh(endpoints, "refresh"))
    for outcome in outcomes:
        assert isinstance(outcome, OAuthUnavailable) and "within 3 s" in str(outcome), repr(outcome)
