"""OAuth that keeps working, end to end (issue 22, part B), against a real authorization server
(oidc-provider on loopback, tests/oauth/provider.mjs: access tokens live 2 s, refresh tokens
rotate, so a refresh token used twice revokes the grant): connecting by following the real
authorize redirects, a timer source calling the provider's API with `$auth.oauth_access_token`
across many expiries, 20 runs at once causing one refresh, a revoked grant giving
ACCOUNT_NEEDS_RECONNECT and a reconnect healing it; no secret in any answer or the server log."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.conftest import HEADWATER, Server, client_for, new_user
from tests.e2e.test_console import browser, shot, sign_in  # noqa: F401 - the browser fixture
from tests.oauth.provider import CLIENT_ID, CLIENT_SECRET, SCOPES, Provider, authorize, running_provider

APP = "testidp"
PROBE = """export default {
  name: "OAuth probe",
  version: "0.1.0",
  props: {
    idp: { type: "app", app: "testidp" },%s
    api: { type: "string" },
  },
  async run(event) {
    const res = await fetch(this.api, { headers: { Authorization: `Bearer ${this.idp.$auth.oauth_access_token}` } });
    const body = await res.json();
    this.$emit({ status: res.status, sub: body.sub ?? null }, { id: `${Date.now()}-${Math.random()}` });
  },
};
"""
TIMER = """
    timer: { type: "$.interface.timer", default: { intervalSeconds: 1 } },"""


@pytest.fixture(scope="module")
def provider(local_server: Server) -> Iterator[Provider]:
    with running_provider([local_server.base_url + "/v1/oauth/callback"]) as p:
        yield p


class Answers:
    """Every API answer's body, for the leak check."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def record(self, response: httpx.Response) -> None:
        response.read()
        self.bodies.append(response.text)


@pytest.fixture(scope="module")
def answers() -> Answers:
    return Answers()


@pytest.fixture(scope="module")
def api(local_server: Server, answers: Answers) -> Iterator[httpx.Client]:
    with client_for(local_server, new_user(local_server, tier="paid").api_key) as client:
        client.event_hooks["response"].append(answers.record)
        yield client


def connect(api: httpx.Client, provider: Provider, answers: Answers, **body: Any) -> str:
    """The connect flow as a browser goes through it; the account's id."""
    started = api.post("/oauth/connect", json=body)
    assert started.status_code == 201, started.text
    url = started.json()["data"]["authorize_url"]
    callback = authorize(url, started.json()["data"]["redirect_uri"])
    page = httpx.get(callback, timeout=60)
    answers.bodies.append(page.text)
    assert page.status_code == 200, page.text
    [account_id] = re.findall(r"apn_[A-Za-z0-9_-]+", page.text)
    assert httpx.get(callback, timeout=60).status_code == 400  # its state is spent
    return account_id


def emitted(api: httpx.Client, source_id: str, channel: str = "") -> list[dict[str, Any]]:
    answer = api.get(f"/sources/{source_id}/event_summaries", params={"event_name": channel, "limit": 100})
    return [e.get("event", e) for e in answer.json()["data"]]


def wait_until(check: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def deploy(api: httpx.Client, provider: Provider, account_id: str, name: str, timer: bool) -> str:
    answer = api.post("/sources", json={"component_code": PROBE % (TIMER if timer else ""), "name": name,
                                        "configured_props": {"idp": {"authProvisionId": account_id},
                                                             "api": provider.api_url}})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["id"]


def expired(api: httpx.Client, account_id: str) -> None:
    expires_at = account(api, account_id)["expires_at"]
    wait_until(lambda: time.time() > expires_at + 0.2, "the access token to expire", timeout=10)


def account(api: httpx.Client, account_id: str) -> dict[str, Any]:
    return api.get(f"/accounts/{account_id}").json()["data"]


def test_oauth_accounts_keep_working(local_server: Server, provider: Provider, api: httpx.Client,
                                     answers: Answers) -> None:
    set_client = api.put(f"/oauth/clients/{APP}", json={
        "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "authorize_url": provider.authorize_url,
        "token_url": provider.token_url, "scopes": SCOPES, "extra_params": {"prompt": "consent"}})
    assert set_client.status_code == 200 and set_client.json()["data"]["has_client_secret"] is True
    account_id = connect(api, provider, answers, app=APP, name="test idp")
    assert account(api, account_id)["kind"] == "oauth" and account(api, account_id)["status"] == "active"

    # A timer source keeps calling the API across many expiries of its 2 s access tokens.
    ticking = deploy(api, provider, account_id, "ticking", timer=True)
    first = provider.stats()["refresh_ok"]
    wait_until(lambda: provider.stats()["refresh_ok"] - first >= 5, "5 refreshes")
    assert api.put(f"/sources/{ticking}", json={"active": False}).status_code == 200
    statuses = [e["status"] for e in emitted(api, ticking)]
    assert len(statuses) >= 5 and set(statuses) == {200}, statuses
    assert provider.stats()["refresh_failed"] == 0
    many = [deploy(api, provider, account_id, f"many-{i}", timer=False) for i in range(20)]

    # The grant revoked at the provider: the account needs a reconnect, every source using it says so.
    assert provider.revoke_refresh_tokens() >= 1
    expired(api, account_id)
    api.post(f"/sources/{many[0]}/run", json={})
    wait_until(lambda: account(api, account_id)["status"] == "needs_reconnect", "needs_reconnect")
    for source_id in (many[0], many[1], ticking):
        codes = wait_until(lambda s=source_id: [e["error"]["code"] for e in emitted(api, s, "$errors")],
                           f"an error event on {source_id}")
        assert "ACCOUNT_NEEDS_RECONNECT" in codes
    listed = api.get("/accounts").json()["data"]
    assert {a["id"]: a["status"] for a in listed}[account_id] == "needs_reconnect"

    # Reconnecting heals it: the same account, and the sources using it go on.
    assert connect(api, provider, answers, account_id=account_id) == account_id
    assert account(api, account_id)["status"] == "active"

    # 20 runs at once after the token expired: one refresh (a second would have revoked the grant).
    # The token it gets lives 30 s: long enough for 20 runs on a busy machine to use it.
    expired(api, account_id)
    provider.set_access_ttl(30)
    before = provider.stats()["refresh_ok"]
    start = threading.Barrier(20)

    def run(source_id: str) -> None:
        start.wait()
        api.post(f"/sources/{source_id}/run", json={})
    threads = [threading.Thread(target=run, args=(s,)) for s in many]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_until(lambda: all(emitted(api, s) for s in many), "a run of each of the 20 sources")
    assert [e["status"] for s in many for e in emitted(api, s)] == [200] * 20
    assert provider.stats()["refresh_ok"] - before == 1 and provider.stats()["refresh_failed"] == 1  # the revoked one

    # Nothing secret in any answer or in the server log.
    secrets = [CLIENT_SECRET, *provider.issued_tokens()]
    log = (local_server.data_dir / "server.log").read_text(errors="replace")
    for secret in secrets:
        assert secret not in log
        assert not any(secret in body for body in answers.bodies)


def test_the_cli_connects_an_account_and_the_operator_sets_clients(local_server: Server, provider: Provider,
                                                                   tmp_path: Path) -> None:
    user = new_user(local_server, tier="paid")
    env = {**local_server.env, "HEADWATER_CONFIG": str(tmp_path / "config.json"),
           "HEADWATER_OAUTH_CLIENT_SECRET": CLIENT_SECRET}
    operator = subprocess.run(
        [*HEADWATER, "oauth-clients", "set", "clidp", "--client-id", CLIENT_ID, "--authorize-url",
         provider.authorize_url, "--token-url", provider.token_url, "--scope", "openid", "--scope", "offline_access",
         "--param", "prompt=consent", "--data-dir", str(local_server.data_dir), "--json"],
        env=env, capture_output=True, text=True, timeout=120)
    assert operator.returncode == 0, operator.stderr
    assert json.loads(operator.stdout)["has_client_secret"] is True and CLIENT_SECRET not in operator.stdout
    (tmp_path / "config.json").write_text(json.dumps({"url": local_server.base_url, "api_key": user.api_key}))

    cli = subprocess.Popen([*HEADWATER, "accounts", "connect", "clidp", "--name", "from the cli", "--json"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert cli.stderr is not None
        assert cli.stderr.readline().startswith("Open this URL")
        url = cli.stderr.readline().strip()
        page = httpx.get(authorize(url, local_server.base_url + "/v1/oauth/callback"), timeout=60)
        assert page.status_code == 200, page.text
        out, err = cli.communicate(timeout=60)
    finally:
        cli.kill()
    assert cli.returncode == 0, err
    connected = json.loads(out)
    assert (connected["app"], connected["name"], connected["kind"]) == ("clidp", "from the cli", "oauth")


def test_the_console_connects_and_reconnects(local_server: Server, provider: Provider,
                                             browser: Browser) -> None:  # noqa: F811 - the fixture
    person = new_user(local_server, tier="paid")
    with client_for(local_server, person.api_key) as api:
        answer = api.put(f"/oauth/clients/{APP}", json={
            "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "authorize_url": provider.authorize_url,
            "token_url": provider.token_url, "scopes": SCOPES, "extra_params": {"prompt": "consent"}})
        assert answer.status_code == 200
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        sign_in(page, local_server, person)
        page.get_by_role("navigation").get_by_role("link", name="Accounts").click()
        expect(page.get_by_role("heading", name="Accounts")).to_be_visible()
        page.get_by_label("App").fill(APP)
        page.get_by_label("Name").fill("console idp")
        with context.expect_page() as popup:
            page.get_by_role("button", name="Connect with OAuth").click()
        expect(popup.value.get_by_role("heading", name="account connected")).to_be_visible()
        row = page.locator("#accounts tbody tr").filter(has_text="console idp")
        expect(row).to_contain_text(APP)
        expect(row).to_contain_text("active")
        shot(page, "accounts")
        with context.expect_page() as again:
            row.get_by_role("button", name="Reconnect console idp").click()
        expect(again.value.get_by_role("heading", name="account connected")).to_be_visible()
    finally:
        context.close()
