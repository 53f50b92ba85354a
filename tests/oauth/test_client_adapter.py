"""adapters.oauth_client against a real authorization server (oidc-provider on loopback): the
authorize URL with PKCE and state, the code exchange, refresh with rotation, and which failures
are for good (OAuthGrantError) and which are retried (OAuthUnavailable)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator

import httpx
import pytest

from headwater.adapters.oauth_client import HttpOAuthClient, code_challenge
from headwater.ports import OAuthEndpoints, OAuthGrantError, OAuthUnavailable
from headwater.settings import Settings
from tests.conftest import free_port
from tests.oauth.provider import CLIENT_ID, CLIENT_SECRET, SCOPES, Provider, authorize, query, running_provider

REDIRECT = "http://127.0.0.1:9/oauth/callback"


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with running_provider([REDIRECT]) as p:
        yield p


@pytest.fixture
def endpoints(provider: Provider) -> OAuthEndpoints:
    return OAuthEndpoints(CLIENT_ID, CLIENT_SECRET, provider.authorize_url, provider.token_url, tuple(SCOPES),
                          {"prompt": "consent"})


async def no_pause(_: float) -> None:
    """Retries without their pauses."""


@pytest.fixture
def client() -> HttpOAuthClient:
    return HttpOAuthClient(Settings(), sleep=no_pause)


def connect(client: HttpOAuthClient, endpoints: OAuthEndpoints):  # type: ignore[no-untyped-def]
    verifier, state = secrets.token_urlsafe(48), secrets.token_urlsafe(16)
    url = client.authorization_url(endpoints, REDIRECT, state, verifier)
    sent = query(url)
    assert sent["code_challenge"] == code_challenge(verifier) and sent["code_challenge_method"] == "S256"
    assert sent["state"] == state and sent["prompt"] == "consent" and sent["scope"] == "openid offline_access"
    back = query(authorize(url, REDIRECT))
    assert back["state"] == state
    return asyncio.run(client.exchange(endpoints, back["code"], REDIRECT, verifier))


def test_connect_and_refresh_with_rotation(client: HttpOAuthClient, endpoints: OAuthEndpoints,
                                           provider: Provider) -> None:
    tokens = connect(client, endpoints)
    assert tokens.refresh_token and tokens.uid == "test-user"
    assert tokens.expires_at is not None and 0 < tokens.expires_at - time.time() <= 3
    api = httpx.get(provider.api_url, headers={"Authorization": f"Bearer {tokens.access_token}"})
    assert api.status_code == 200, api.text

    renewed = client.refresh(endpoints, tokens.refresh_token)
    assert renewed.access_token != tokens.access_token
    assert renewed.refresh_token and renewed.refresh_token != tokens.refresh_token  # rotated
    with pytest.raises(OAuthGrantError, match="invalid_grant") as refused:
        client.refresh(endpoints, tokens.refresh_token)  # used twice: the grant is revoked
    assert tokens.refresh_token not in str(refused.value)


def test_a_code_without_its_verifier_is_refused(client: HttpOAuthClient, endpoints: OAuthEndpoints) -> None:
    verifier = secrets.token_urlsafe(48)
    url = client.authorization_url(endpoints, REDIRECT, "s", verifier)
    code = query(authorize(url, REDIRECT))["code"]
    with pytest.raises(OAuthGrantError, match="invalid_grant"):
        asyncio.run(client.exchange(endpoints, code, REDIRECT, secrets.token_urlsafe(48)))


def test_revoked_refresh_token_fails_for_good(client: HttpOAuthClient, endpoints: OAuthEndpoints,
                                              provider: Provider) -> None:
    tokens = connect(client, endpoints)
    assert provider.revoke_refresh_tokens() >= 1
    with pytest.raises(OAuthGrantError, match="invalid_grant"):
        client.refresh(endpoints, tokens.refresh_token or "")


def test_transient_failures_are_retried_then_reported(client: HttpOAuthClient, endpoints: OAuthEndpoints,
                                                      provider: Provider) -> None:
    tokens = connect(client, endpoints)
    provider.fail_token_requests(2)
    renewed = client.refresh(endpoints, tokens.refresh_token or "")  # two 503s, then the answer
    assert renewed.refresh_token
    provider.fail_token_requests(3)
    with pytest.raises(OAuthUnavailable, match="503"):
        client.refresh(endpoints, renewed.refresh_token or "")
    assert client.refresh(endpoints, renewed.refresh_token or "").access_token  # nothing was spent


def test_unreachable_and_refused_token_urls_are_transient(endpoints: OAuthEndpoints) -> None:
    closed = OAuthEndpoints(CLIENT_ID, CLIENT_SECRET, endpoints.authorize_url,
                            f"http://127.0.0.1:{free_port()}/token")
    with pytest.raises(OAuthUnavailable, match="did not answer"):
        HttpOAuthClient(Settings(), sleep=no_pause).refresh(closed, "r")
    strict = Settings(allow_loopback_urls=False)
    with pytest.raises(OAuthUnavailable, match="refused by policy"):
        HttpOAuthClient(strict, sleep=no_pause).refresh(endpoints, "r")
