"""domain.oauth: an OAuth client's settings checked, when a token is refreshed, and what a token
answer becomes in `$auth`."""

from __future__ import annotations

from headwater.domain.oauth import (
    OPERATOR,
    OAuthClient,
    TokenSet,
    client_problems,
    needs_refresh,
    refresh_margin,
)

GOOD = {"client_id": "id", "client_secret": "s", "authorize_url": "https://a.example/authorize",
        "token_url": "https://a.example/token", "scopes": ["read"], "extra_params": {"prompt": "consent"}}


def test_good_settings_have_no_problems_and_every_bad_one_is_named() -> None:
    assert client_problems(GOOD) == {}
    assert client_problems({**GOOD, "client_secret": None}) == {}
    bad = client_problems({"client_id": "", "client_secret": "", "authorize_url": "javascript:x", "token_url": 3,
                           "scopes": "read", "extra_params": {"n": 1}})
    assert set(bad) == {"client_id", "client_secret", "authorize_url", "token_url", "scopes", "extra_params"}
    reserved = client_problems({**GOOD, "extra_params": {"redirect_uri": "https://evil.example", "state": "x"}})
    assert reserved == {"extra_params": ["cannot set redirect_uri, state (Headwater sets them)"]}


def test_a_client_round_trips_and_its_answer_has_no_secret() -> None:
    client = OAuthClient(OPERATOR, "github", "id", {"$secret": "sealed"}, GOOD["authorize_url"], GOOD["token_url"],
                         ("read",), {"prompt": "consent"}, 5)
    assert OAuthClient.from_json(client.to_json()) == client
    answer = client.to_api()
    assert answer["owner_id"] is None and answer["has_client_secret"] is True and "sealed" not in str(answer)


def test_refresh_is_due_within_the_margin_capped_at_half_the_lifetime() -> None:
    assert not needs_refresh(None, 1_000, 60)  # a token that does not expire
    assert not needs_refresh(1_100, 1_000, 60)
    assert needs_refresh(1_060, 1_000, 60) and needs_refresh(900, 1_000, 60)
    assert refresh_margin(60, None) == 60 and refresh_margin(60, 3600) == 60 and refresh_margin(60, 2) == 1


def test_a_token_answer_becomes_auth_keeping_the_refresh_token_a_refresh_did_not_replace() -> None:
    assert TokenSet("a", "r", 10, "read", "u1").credentials() == {
        "oauth_access_token": "a", "oauth_refresh_token": "r", "oauth_uid": "u1"}
    assert TokenSet("a2", None, 20).credentials("r") == {"oauth_access_token": "a2", "oauth_refresh_token": "r"}
