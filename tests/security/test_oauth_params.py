"""Issue 31: Headwater's OAuth parameters are Headwater's. An app's OAuth client whose
`authorize_url` (or `extra_params`) carries `redirect_uri`, `state`, the PKCE challenge,
`response_type` or `client_id` is refused (422 naming the field and the parameter, in the API and
the operator's CLI); a configuration stored before that check is built into an authorize URL that
has exactly one of each, Headwater's. Otherwise a provider that reads the first value of a
parameter would send the user's code to the address a user or org member put in the URL."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from headwater.adapters.oauth_client import HttpOAuthClient, code_challenge
from headwater.domain.errors import Invalid
from headwater.domain.oauth import OPERATOR, OAuthClient, client_problems
from headwater.ports import OAuthEndpoints
from headwater.settings import Settings
from tests.api.conftest import running_app
from tests.conftest import HEADWATER
from tests.fakes import world
from tests.services.test_services import principal

HEADWATERS = ("response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method")
EVIL = "https://evil.example/steal"
HOSTILE_QUERY = ("redirect_uri=https%3A%2F%2Fevil.example%2Fsteal&state=theirs&client_id=theirs&response_type=token"
                 "&code_challenge=theirs&code_challenge_method=plain&audience=api")
GOOD = {"client_id": "hw", "client_secret": "s3cret-value", "authorize_url": "https://id.example.com/authorize",
        "token_url": "https://id.example.com/token", "scopes": ["read"], "extra_params": {"prompt": "consent"}}


def pairs(url: str) -> list[tuple[str, str]]:
    return parse_qsl(urlsplit(url).query, keep_blank_values=True)


def assert_only_headwaters(url: str, client_id: str, redirect_uri: str, state: str, verifier: str) -> None:
    """Exactly one of each of Headwater's parameters, with Headwater's values."""
    sent = pairs(url)
    counts = {name: [k for k, _ in sent].count(name) for name in HEADWATERS}
    assert counts == dict.fromkeys(HEADWATERS, 1), (counts, url)
    values = dict(sent)
    assert values == {**values, "response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
                      "state": state, "code_challenge": code_challenge(verifier), "code_challenge_method": "S256"}
    assert "evil.example" not in url and "theirs" not in url


# the domain check


@pytest.mark.parametrize("name", HEADWATERS)
def test_an_authorize_url_that_sets_a_headwater_parameter_is_refused(name: str) -> None:
    problems = client_problems({**GOOD, "authorize_url": f"https://id.example.com/authorize?{name}=x&audience=a"})
    assert list(problems) == ["authorize_url"] and name in problems["authorize_url"][0], problems


@pytest.mark.parametrize("query", [
    "Redirect_URI=x", "redirect%5Furi=x", "a=1;redirect_uri=x", "+state=x", "scope=read", "state"])
def test_however_the_query_spells_it(query: str) -> None:
    """Percent-encoded, in another case, after a `;` (some servers split there), padded, bare."""
    problems = client_problems({**GOOD, "authorize_url": f"https://id.example.com/authorize?{query}"})
    assert list(problems) == ["authorize_url"], (query, problems)


def test_a_fragment_is_refused_and_a_plain_query_is_kept() -> None:
    """Headwater's parameters would land in the fragment, which the browser never sends."""
    assert "authorize_url" in client_problems({**GOOD, "authorize_url": "https://id.example.com/authorize#x"})
    assert client_problems({**GOOD, "authorize_url": "https://id.example.com/authorize?audience=api&x="}) == {}


@pytest.mark.parametrize("name", [*HEADWATERS, "Redirect_URI", " state"])
def test_extra_params_that_set_a_headwater_parameter_are_refused(name: str) -> None:
    problems = client_problems({**GOOD, "extra_params": {name: EVIL, "prompt": "consent"}})
    assert list(problems) == ["extra_params"] and name.strip() in problems["extra_params"][0], problems


# the service (over the fakes; the real URL builder, which makes no request)


def oauth_world() -> Any:
    w = world()
    w.services.oauth.client = HttpOAuthClient(Settings())
    return w


def test_the_service_refuses_such_a_client_naming_the_field_and_the_parameter() -> None:
    w = oauth_world()
    with pytest.raises(Invalid) as refused:
        w.services.oauth.set_client("u_x", "github", {
            **GOOD, "authorize_url": f"https://id.example.com/authorize?redirect_uri={EVIL}",
            "extra_params": {"state": "theirs"}})
    details = refused.value.details or {}
    assert set(details) == {"authorize_url", "extra_params"}
    assert "redirect_uri" in details["authorize_url"][0] and "state" in details["extra_params"][0]
    assert not w.store.data.oauth_clients


def test_a_client_stored_before_the_check_gives_a_url_with_only_headwaters_parameters() -> None:
    """On the unchanged code the stored URL's own `redirect_uri=https://evil...`, `state`, ...
    came first, and Headwater's were appended after them."""
    w = oauth_world()
    with w.services.oauth.uow() as uow:  # as saved by a version without the check
        uow.oauth_clients.put(OAuthClient(
            owner=OPERATOR, app="github", client_id="hw", client_secret={}, token_url=GOOD["token_url"],
            authorize_url=f"https://id.example.com/authorize?{HOSTILE_QUERY}", scopes=("read",),
            extra_params={"redirect_uri": EVIL, "state": "theirs", "prompt": "consent"}))
        uow.commit()
    who = principal(w)
    started = w.services.oauth.start(who, who.user.id, "github")
    pending = w.store.data.pending_connects[started.state]
    verifier = w.services.adapters.secrets.decrypt(pending.verifier["$secret"])
    assert_only_headwaters(started.authorize_url, "hw", w.services.oauth.redirect_uri, started.state, verifier)
    sent = dict(pairs(started.authorize_url))
    assert (sent["audience"], sent["prompt"], sent["scope"]) == ("api", "consent", "read")  # the provider's own stay
    assert urlsplit(started.authorize_url)[:3] == ("https", "id.example.com", "/authorize")


# the adapter


def test_the_url_builder_drops_every_such_parameter_of_the_configuration() -> None:
    verifier, state = secrets.token_urlsafe(48), secrets.token_urlsafe(16)
    endpoints = OAuthEndpoints("hw", None, f"https://id.example.com/authorize?{HOSTILE_QUERY}#frag",
                               GOOD["token_url"], ("read",),
                               {"redirect_uri": EVIL, "Client_Id": "theirs", "prompt": "consent"})
    url = HttpOAuthClient(Settings()).authorization_url(endpoints, "https://hw.example/v1/oauth/callback", state,
                                                        verifier)
    assert_only_headwaters(url, "hw", "https://hw.example/v1/oauth/callback", state, verifier)
    assert "#" not in url and dict(pairs(url))["audience"] == "api"
    plain = OAuthEndpoints("hw", None, "https://id.example.com/authorize", GOOD["token_url"])
    assert "scope" not in dict(pairs(HttpOAuthClient(Settings()).authorization_url(plain, "https://r", "s", "v")))


# the API and the operator's CLI


def test_put_answers_422_naming_the_field_and_the_parameter() -> None:
    for app in running_app():
        with app.client() as api:
            r = api.put("/oauth/clients/github", json={
                **GOOD, "authorize_url": f"https://id.example.com/authorize?code_challenge=x&redirect_uri={EVIL}"})
            assert r.status_code == 422, r.text
            assert "code_challenge" in r.json()["details"]["authorize_url"][0]
            assert "redirect_uri" in r.json()["details"]["authorize_url"][0]
            assert api.get("/oauth/clients").json()["data"] == []


def test_the_operators_cli_refuses_it_too(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")},
           "HEADWATER_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.run(
        [*HEADWATER, "oauth-clients", "set", "github", "--client-id", "hw", "--authorize-url",
         f"https://id.example.com/authorize?redirect_uri={EVIL}", "--token-url", GOOD["token_url"], "--json"],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    error = json.loads(proc.stderr.strip().splitlines()[-1])
    assert "redirect_uri" in error["details"]["authorize_url"][0]
    listed = subprocess.run([*HEADWATER, "oauth-clients", "list", "--json"], env=env, capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stdout
