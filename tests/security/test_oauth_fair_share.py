"""One tenant's OAuth connects cannot hold what other tenants need (issue 31): tenant A's own OAuth
client points at a token endpoint that answers one byte every 2 s, and 50 of A's callbacks come
back at once. Meanwhile tenant B's API calls and a run of B's HTTP source answer about as fast as
on the idle service (on base, A's callbacks held every request thread and B's calls got no answer),
A never has more than its share of token requests in flight, and each of A's callbacks ends (503)
within its bounds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.conftest import Server, client_for, new_user, running_server
from tests.security.drip import HEADERS, Drip, dripping

TOKEN_TIMEOUT_S = 5
CALLBACKS = 50
PER_TENANT = 4  # services.oauth: a tenant's token requests in flight at once
PROBE_CAP_S = 10.0  # a probe with no answer by then counts as this long
PROBE_WINDOW_S = 4.0
ECHO = """export default {
  name: "echo", version: "1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) { await this.http.respond({ status: 200, body: { ok: true } }); },
};
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("oauth-share"),
                        HEADWATER_OAUTH_TOKEN_TIMEOUT_S=str(TOKEN_TIMEOUT_S)) as srv:
        yield srv


@pytest.fixture
def token_endpoint() -> Iterator[Drip]:
    with dripping(HEADERS, interval_s=2.0) as drip:
        yield drip


def took(request: Callable[[], httpx.Response]) -> float:
    started = time.monotonic()
    try:
        assert request().status_code == 200
    except httpx.TimeoutException:
        return PROBE_CAP_S
    return time.monotonic() - started


def test_a_tenants_slow_token_endpoint_holds_only_its_own_share(server: Server, token_endpoint: Drip) -> None:
    a = client_for(server, new_user(server, tier="paid").api_key)
    b = client_for(server, new_user(server, tier="paid").api_key)
    set_client = a.put("/oauth/clients/slowidp", json={
        "client_id": "a", "client_secret": "s", "authorize_url": "http://127.0.0.1:9/authorize",
        "token_url": token_endpoint.url})
    assert set_client.status_code == 200, set_client.text
    states = [a.post("/oauth/connect", json={"app": "slowidp"}).json()["data"]["state"] for _ in range(CALLBACKS)]
    deployed = b.post("/sources", json={"component_code": ECHO}).json()["data"]
    endpoint = deployed["configured_props"]["http"]["endpoint_url"]
    probes: dict[str, Callable[[], httpx.Response]] = {
        "B's GET /v1/users/me": lambda: b.get("/users/me", timeout=PROBE_CAP_S),
        "a run of B's HTTP source": lambda: httpx.post(endpoint, json={}, timeout=PROBE_CAP_S),
        "/healthz": lambda: httpx.get(server.base_url + "/healthz", timeout=PROBE_CAP_S),
    }
    idle = {name: min(took(probe) for _ in range(3)) for name, probe in probes.items()}

    answers: list[httpx.Response] = []
    started = time.monotonic()

    def callback(state: str) -> None:
        answers.append(httpx.get(server.base_url + "/v1/oauth/callback", params={"state": state, "code": "c"},
                                 timeout=120))
    callers = [threading.Thread(target=callback, args=(s,), daemon=True) for s in states]
    for t in callers:
        t.start()
    deadline = time.monotonic() + 30
    while token_endpoint.accepted == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert token_endpoint.accepted > 0, "no token request was made"

    slowest = dict.fromkeys(probes, 0.0)
    window_ends = time.monotonic() + PROBE_WINDOW_S
    while time.monotonic() < window_ends:
        for name, probe in probes.items():
            slowest[name] = max(slowest[name], took(probe))
    slow = {name: f"{seconds:.1f} s (idle {idle[name]:.2f} s)" for name, seconds in slowest.items()
            if seconds >= 2 + 3 * idle[name]}
    assert not slow, f"while A's callbacks waited: {slow}"
    assert token_endpoint.most_open <= PER_TENANT, f"A had {token_endpoint.most_open} token requests in flight"

    for t in callers:
        t.join(max(0.0, started + 3 * TOKEN_TIMEOUT_S + 20 - time.monotonic()))
    assert len(answers) == CALLBACKS, f"{CALLBACKS - len(answers)} of A's callbacks had no answer"
    assert {r.status_code for r in answers} == {503}, {r.status_code for r in answers}
    waited = [r for r in answers if "retry-after" in r.headers]
    assert waited and all("try again" in r.text for r in waited)
