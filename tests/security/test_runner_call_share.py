"""One tenant's slow runner calls wait on its own share, holding no thread (issue 32, item 2).

A user's keys each have a share of requests in flight (api/tenant_share.py), so with a few keys
one user had every thread of the request pool when each of its `options()` calls held one for as
long as the code ran: another tenant's `options()`, or the describe of its component's save, then
waited for a thread until the first tenant's code ended. Now those calls await the runner on the
event loop, at most HEADWATER_TENANT_RUNNER_CALLS of one namespace's at once, so the other
tenant's calls are answered while the first tenant's code is still held at the gate.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

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
QUICK_OPTIONS = """export default {
  name: "Quick options %(tag)s", key: "quick-options-%(tag)s", version: "0.0.1", type: "source",
  props: { pick: { type: "string", async options() { return ["b"] } }, http: "$.interface.http" },
  async run(event) {},
}
"""
KEYS = 6  # 6 keys' shares of requests (8 each) are more than the request thread pool's 40
CALLS_PER_KEY = 9  # a key's share and one more, refused (429) once the others are all in
ANSWERED_WITHIN_S = 60  # "while the gate holds": it holds for 300 s, and options() may take 120 s


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # an options() call held at the gate (and those queued behind it in the tenant's runner) stays
    # there until the gate opens
    with running_server(tmp_path_factory.mktemp("runner-call-share"), HEADWATER_TENANT_REQUEST_WAIT_S="2",
                        HEADWATER_TENANT_RUNNER_CALL_WAIT_S="4", HEADWATER_DESCRIBE_TIMEOUT_MS="120000") as srv:
        yield srv


def test_a_tenants_held_options_calls_leave_another_tenants_options_and_describes_answered(server: Server) -> None:
    attacker = new_user(server, tier="paid")
    keys = [attacker.api_key] + [server.cli("keys", "create", "--user", attacker.id)["api_key"]
                                 for _ in range(KEYS - 1)]
    other = client_for(server, new_user(server, tier="paid").api_key)
    tag = uuid.uuid4().hex[:8]
    quick = other.post("/components", json={"component_code": QUICK_OPTIONS % {"tag": tag}})
    assert quick.status_code == 200, quick.text
    quick_options = f"/components/{quick.json()['data']['id']}/props/pick/options"
    assert other.post(quick_options, json={}).status_code == 200  # the other tenant's runner is started

    def call(key: str, options: str) -> int:
        with httpx.Client(base_url=server.base_url + "/v1", timeout=120,
                          headers={"Authorization": f"Bearer {key}"}) as c:
            return c.post(options, json={}).status_code

    with gate() as held, ThreadPoolExecutor(KEYS * CALLS_PER_KEY + 2) as pool:
        slow = client_for(server, attacker.api_key).post(
            "/components", json={"component_code": SLOW_OPTIONS % {"tag": tag, "gate": held.url}})
        assert slow.status_code == 200, slow.text
        options = f"/components/{slow.json()['data']['id']}/props/pick/options"
        calls = [pool.submit(call, key, options) for key in keys for _ in range(CALLS_PER_KEY)]
        assert held.arrived.wait(60)  # the tenant's options() calls are held at the gate
        # every key's share of requests is in flight: each key has had its extra call refused (and,
        # now, maybe others refused by the namespace's share of runner calls)
        for key in range(KEYS):
            done, _ = wait(calls[key * CALLS_PER_KEY:(key + 1) * CALLS_PER_KEY], 60, FIRST_COMPLETED)
            assert done, f"none of key {key}'s calls was refused"
        their_options = pool.submit(lambda: other.post(quick_options, json={}))
        their_save = pool.submit(lambda: other.post("/components", json={
            "component_code": QUICK_OPTIONS % {"tag": uuid.uuid4().hex[:8]}}))
        answers = [their_options.result(ANSWERED_WITHIN_S), their_save.result(ANSWERED_WITHIN_S)]
        still_held = not held.released.is_set()
        held.release()
        statuses = [c.result() for c in calls]
    assert still_held
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert answers[0].json()["data"]["options"] == ["b"]
    # the tenant's calls past its share of runner calls waited their turn, then were told to come
    # back (503); those past a key's share of requests too (429)
    assert set(statuses) <= {200, 429, 503} and 503 in statuses, statuses
