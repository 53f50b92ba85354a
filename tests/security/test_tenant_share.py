"""No tenant holds the task workers (issue 31, "No tenant holds a shared resource"), end to end.

Tenant A has OAuth accounts whose access tokens expired and whose token endpoint (a loopback
server here) answers one byte every 2 s, and 50 HTTP sources using them, all hit at once: each run
needs a refresh first. Tenant B's HTTP source (customResponse) must still answer as fast as on an
idle service: A holds at most its share of the workers, and a run that finds its account being
refreshed by another gives its batch back to the queue rather than wait holding a worker.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater.adapters.local.secrets import FernetSecrets
from headwater.adapters.local.sqlite.store import SqliteStore
from headwater.domain import connected_accounts as model
from headwater.domain import ids
from headwater.domain.connected_accounts import ConnectedAccount
from tests.conftest import Server, User, client_for, new_user, running_server
from tests.security.drip import BODY, dripping

WORKERS = 8
SHARE = WORKERS // 4  # the default share of one tenant
ACCOUNTS = 10  # more refreshes in flight than there are workers
SOURCES = 50
BOUND_S = 5.0  # "as fast as on an idle service", with a busy machine's margin
APP = "slowidp"

SLOW_SOURCE = """export default {
  name: "Needs slowidp", version: "0.0.1", type: "source",
  props: { idp: { type: "app", app: "slowidp" }, http: "$.interface.http" },
  async run(event) { this.$emit({ token: this.idp.$auth.oauth_access_token.length }); },
};
"""
ANSWERING = """export default {
  name: "Answers %s", version: "0.0.1", type: "source",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    await this.http.respond({ status: 200, body: "answered" });
    this.$emit({ answered: true });
  },
};
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("tenant-share"), HEADWATER_TASK_WORKERS=str(WORKERS)) as srv:
        yield srv


def expired_oauth_accounts(data_dir: Path, owner: str, count: int) -> list[str]:
    """OAuth accounts whose access token expired a minute ago, written into the service's store
    as a connect would leave them (sealed with the service's key)."""
    store = SqliteStore(data_dir / "headwater.db")
    secrets = FernetSecrets(data_dir / "secret.key")
    now = int(time.time())
    made = []
    for i in range(count):
        credentials = {model.OAUTH_ACCESS_TOKEN: f"expired-{i}", model.OAUTH_REFRESH_TOKEN: f"refresh-{i}"}
        account = ConnectedAccount(
            id=ids.new_id("connected_account"), owner=owner, app=APP, name=f"slow {i}", kind=model.OAUTH,
            credentials={model.SEALED: secrets.encrypt(credentials)}, fields=model.field_names(credentials),
            expires_at=now - 60, status=model.ACTIVE, version=1, created_at=now, updated_at=now, created_by=owner,
            extra={"token_lifetime_s": 3600})
        with store.uow() as uow:
            uow.connected_accounts.add(account)
            uow.commit()
        made.append(account.id)
    return made


def deploy(api: httpx.Client, code: str, name: str, props: dict[str, Any] | None = None) -> str:
    """The source's endpoint URL."""
    answer = api.post("/sources", json={"component_code": code, "name": name, "configured_props": props or {}})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["data"]["configured_props"]["http"]["endpoint_url"])


def answered_in(url: str) -> tuple[float, str]:
    """Seconds until the source's run answered its request (its first run: on a worker), and what
    came back ("200 answered" when the run answered)."""
    started = time.monotonic()
    answer = httpx.post(url, json={}, timeout=120)
    return time.monotonic() - started, f"{answer.status_code} {answer.text[:200]}"


def wait_for(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_one_tenants_stuck_refreshes_leave_another_tenants_run_as_fast_as_idle(service: Server) -> None:
    a: User = new_user(service, tier="paid")
    b: User = new_user(service, tier="paid")
    with dripping(BODY, 2.0) as endpoint, client_for(service, a.api_key) as api_a, \
            client_for(service, b.api_key) as api_b:
        client = api_a.put(f"/oauth/clients/{APP}", json={
            "client_id": "slow", "client_secret": "slow-secret",
            "authorize_url": endpoint.url.replace("/token", "/authorize"), "token_url": endpoint.url})
        assert client.status_code == 200, client.text
        accounts = expired_oauth_accounts(service.data_dir, a.id, ACCOUNTS)
        slow = [deploy(api_a, SLOW_SOURCE, f"slow-{i}", {"idp": {"authProvisionId": accounts[i % ACCOUNTS]}})
                for i in range(SOURCES)]
        warm, idle_source, busy_source = (deploy(api_b, ANSWERING % n, f"answers-{n}") for n in ("w", "i", "b"))

        assert answered_in(warm)[1] == "200 answered"  # B's runner process started: not part of what is measured
        idle_s, idle_answer = answered_in(idle_source)
        assert idle_answer == "200 answered"

        for url in slow:
            assert httpx.post(url, json={}, timeout=30).status_code == 200
        wait_for(lambda: endpoint.open >= SHARE, "tenant A's refreshes to be under way")
        busy_s, busy_answer = answered_in(busy_source)
        most_open = endpoint.most_open
        print(f"tenant B's first run answered in {idle_s:.2f} s idle, {busy_s:.2f} s with tenant A's "
              f"{SOURCES} runs stuck refreshing ({most_open} refreshes open at most)")
        assert busy_answer == "200 answered" and busy_s < max(BOUND_S, 3 * idle_s), (
            f"tenant B's run took {busy_s:.1f} s ({busy_answer}) while tenant A's refreshes were stuck "
            f"(idle: {idle_s:.2f} s)")
        assert most_open <= SHARE, f"tenant A held {most_open} workers refreshing at once, over its share of {SHARE}"
