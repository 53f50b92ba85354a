"""One tenant's slow requests hold only its own share of the service's request threads (issue 31).

The API's sync routes (and the sync work of async ones: a prop's `options()`, a hook, a describe)
run on one thread pool that every tenant's requests share. A tenant whose calls are slow (an
`options()` that waits on a slow API, a refresh of a dripping token endpoint) could hold every
thread of it, and another tenant's `GET /users/me` would wait for one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import Server, client_for, gate, new_user, running_server

SLOW_OPTIONS = """export default {
  name: "Slow options %(tag)s", key: "slow-options-%(tag)s", version: "0.0.1", type: "source",
  props: {
    pick: { type: "string", async options() { await fetch("%(gate)s"); return ["a"] } },
    http: "$.interface.http",
  },
  async run(event) {},
}
"""
CALLS = 60  # more than the request thread pool's 40
# A call beyond the tenant's share waits this long for its turn (30 s by default), then gets 429.
# The tenant's options() calls take turns in its runner, each held by the test's gate until the
# other tenant's request is answered: here the drain after that is the few turns before the 429s.
TURN_WAIT_S = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("request-share"),
                        HEADWATER_TENANT_REQUEST_WAIT_S=str(TURN_WAIT_S)) as srv:
        yield srv


def timed(client: httpx.Client, path: str) -> float:
    started = time.monotonic()
    r = client.get(path)
    assert r.status_code == 200, r.text
    return time.monotonic() - started


def test_a_tenants_slow_calls_leave_other_tenants_requests_answered(server: Server) -> None:
    attacker = client_for(server, new_user(server, tier="paid").api_key)
    other = client_for(server, new_user(server, tier="paid").api_key)
    idle = max(timed(other, "/users/me") for _ in range(3))

    def call(options: str) -> int:
        with httpx.Client(base_url=server.base_url + "/v1", timeout=120, headers=attacker.headers) as c:
            return c.post(options, json={}).status_code

    with gate() as held, ThreadPoolExecutor(CALLS) as pool:
        code = SLOW_OPTIONS % {"tag": uuid.uuid4().hex[:8], "gate": held.url}
        r = attacker.post("/components", json={"component_code": code})
        assert r.status_code == 200, r.text
        options = f"/components/{r.json()['data']['id']}/props/pick/options"
        calls = [pool.submit(call, options) for _ in range(CALLS)]
        assert held.arrived.wait(60)  # the tenant's runner is held by an options() call
        time.sleep(1.5)  # and the other calls are in, each holding its request thread (nothing to await)
        busy = timed(other, "/users/me")
        held.release()
        statuses = [c.result() for c in calls]
    bound = max(2.0, 3 * idle)
    assert busy < bound, f"another tenant's request took {busy:.2f} s while one tenant's calls ran (idle {idle:.2f} s)"
    # the tenant's own calls beyond its share waited their turn, or were told to come back (429); a
    # call that waited in its runner past the options() time limit failed (422)
    assert set(statuses) <= {200, 422, 429} and 200 in statuses
