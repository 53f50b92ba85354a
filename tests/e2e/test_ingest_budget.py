"""Per-tenant ingest budgets end to end (issue 21): a tenant that floods its endpoints gets 429s
with Retry-After and nothing of those requests is stored, while another tenant's requests all
answer 200 and are stored. On both backends (the emulated deployment counts in DynamoDB).

The assertions hold however slow the machine is: a budget of 1 a second in bursts of 10 is a
10 s window, so 40 requests refused none only if they took over 30 s."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import Server, client_for, new_user, running_server
from tests.e2e.test_runs import component, deploy, wait_events

pytestmark = pytest.mark.both_modes

EMIT_BODY = component("this.$emit(event.body);")
FLOOD = 40


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A private service with a small budget, in the mode `both_modes` asks for (tests/e2e/conftest.py)."""
    mode = getattr(request, "param", "local")
    backend = {} if mode == "local" else {"HEADWATER_BACKEND": mode}
    with running_server(tmp_path_factory.mktemp("budget"), HEADWATER_INGEST_RATE="1", HEADWATER_INGEST_BURST="10",
                        **backend) as srv:
        yield srv


def tenant(server: Server) -> httpx.Client:
    return client_for(server, new_user(server, tier="paid").api_key)  # paid: no daily quota's 429 in the way


def test_a_flooding_tenant_gets_429s_and_another_tenant_is_unaffected(server: Server) -> None:
    with tenant(server) as ada, tenant(server) as bob, httpx.Client(timeout=120) as http:
        ada_source, ada_url = deploy(ada, EMIT_BODY)
        bob_source, bob_url = deploy(bob, EMIT_BODY)

        with ThreadPoolExecutor(8) as pool:
            flood = list(pool.map(lambda n: http.post(ada_url, json={"n": n}), range(FLOOD)))
        assert {r.status_code for r in flood} <= {200, 429}, [r.text for r in flood]
        refused = [r for r in flood if r.status_code == 429]
        assert refused, "the flood was not refused"
        for r in refused:
            assert int(r.headers["retry-after"]) >= 1
            assert "ingest budget" in r.json()["error"]

        answers = [http.post(bob_url, json={"n": n}) for n in range(5)]
        assert [r.status_code for r in answers] == [200] * 5, [r.text for r in answers]
        assert sorted(e["event"]["n"] for e in wait_events(bob, bob_source, 5)) == list(range(5))

        admitted = sorted(n for n, r in enumerate(flood) if r.status_code == 200)
        stored = wait_events(ada, ada_source, len(admitted))
        assert sorted(e["event"]["n"] for e in stored) == admitted  # no refused request was stored
