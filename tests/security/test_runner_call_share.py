"""One tenant's slow runner calls wait on its own share, holding no thread (issue 32, item 2).

A user's keys each have a share of requests in flight (api/tenant_share.py), so with a few keys
one user had every thread of the request pool when each of its `options()` calls, source deploys,
trial runs (`POST /v1/components/run`) or workflow deploys held one for as long as the code ran:
another tenant's `options()`, the describe of its component's save, its source's deploy hook,
its trial or its workflow's deploy then waited for a thread until the first tenant's code ended.
Now those calls await the runner on the event loop, at most HEADWATER_TENANT_RUNNER_CALLS of one
namespace's at once (describes, options(), additionalProps, trials; hooks apart), so the other
tenant's calls are answered while the first tenant's code is still held at the gate. So are a
source's or component's `component_url` fetches, in a share of their own: the server a tenant
names (here one that holds its answer) holds only that tenant's turns.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

import httpx
import pytest

from tests.conftest import Gate, Server, User, client_for, gate, new_user, running_server
from tests.security.test_request_share import SLOW_OPTIONS

SLOW_TRIAL = """export default {
  name: "Slow trial %(tag)s", version: "0.0.1", type: "source",
  props: {},
  async run(event) { await fetch("%(gate)s") },
}
"""
# Its code is held while it loads (a workflow deploy describes each step's code). Module code runs
# synchronously, so it cannot wait on the gate: it sleeps (Atomics.wait, no CPU) for longer than
# the probes take to be answered (a few seconds; held_while fails if one of these calls ended
# before they were), and less than the describe's time limit. Every held call waits this out
# before the test ends: 75 s made this the suite's slowest test.
SLOW_STEP = """Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 30000)
export default {
  name: "Slow step %(tag)s", version: "0.0.1", type: "action",
  props: {},
  async run({ $ }) {},
}
"""
QUICK_STEP = """export default {
  name: "Quick step %(tag)s", version: "0.0.1", type: "action",
  props: {},
  async run({ $ }) { return 1 },
}
"""
SLOW_DEPLOY = """export default {
  name: "Slow deploy %(tag)s", version: "0.0.1", type: "source",
  props: { http: "$.interface.http" },
  hooks: { async deploy() { await fetch("%(gate)s") } },
  async run(event) {},
}
"""
QUICK = """export default {
  name: "Quick %(tag)s", key: "quick-%(tag)s", version: "0.0.1", type: "source",
  props: { pick: { type: "string", optional: true, async options() { return ["b"] } }, http: "$.interface.http" },
  hooks: { async deploy() {} },
  async run(event) {},
}
"""
KEYS = 6  # 6 keys' shares of requests (8 each) are more than the request thread pool's 40
CALLS_PER_KEY = 9  # a key's share and one more, refused (429) once the others are all in
ANSWERED_WITHIN_S = 60  # "while the gate holds": it holds for 300 s, and the held code may run 120 s


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # code held at the gate (and calls queued behind it in the tenant's runner) stays there until
    # the gate opens
    with running_server(tmp_path_factory.mktemp("runner-call-share"), HEADWATER_TENANT_REQUEST_WAIT_S="2",
                        HEADWATER_TENANT_RUNNER_CALL_WAIT_S="4", HEADWATER_DESCRIBE_TIMEOUT_MS="120000",
                        HEADWATER_HOOK_TIMEOUT_MS="120000", HEADWATER_HTTP_TIMEOUT_MS="120000",
                        HEADWATER_URL_FETCH_TIMEOUT_S="120") as srv:
        yield srv


def quick_code() -> str:
    return QUICK % {"tag": uuid.uuid4().hex[:8]}


def saved(api: httpx.Client, code: str) -> str:
    r = api.post("/components", json={"component_code": code})
    assert r.status_code == 200, r.text
    return str(r.json()["data"]["id"])


def quick_step() -> str:
    return QUICK_STEP % {"tag": uuid.uuid4().hex[:8]}


def with_saved(path: str, body: dict[str, Any]) -> SlowCall:
    """A slow call on the component saved from the slow code: `path` names it as `{id}`."""
    return lambda api, code: (path.format(id=saved(api, code)), body)


SlowCall = Callable[[httpx.Client, str], tuple[str, dict[str, Any]]]


def held_while(server: Server, attacker: User, slow_code: str, slow_call: SlowCall,
               probes: list[Callable[[], httpx.Response]]) -> tuple[list[httpx.Response], list[int]]:
    """Every key of the attacker's (KEYS of them) sends its share of the call (path, body) that
    `slow_call(attacker's client, code)` makes of `slow_code` (its gate filled in), held at a
    gate (or, code that cannot reach it, held by its own sleep); once every key's share is in,
    the probes (another tenant's calls) go. Their answers, got while the gate holds (and before
    any of the attacker's calls succeeded), and the statuses of the attacker's calls."""
    gated = "%(gate)s" in slow_code
    keys = [attacker.api_key] + [server.cli("keys", "create", "--user", attacker.id)["api_key"]
                                 for _ in range(KEYS - 1)]

    def call(key: str, path: str, body: dict[str, Any]) -> int:
        with httpx.Client(base_url=server.base_url + "/v1", timeout=180,
                          headers={"Authorization": f"Bearer {key}"}) as c:
            return c.post(path, json=body).status_code

    held: Gate
    with gate() as held, ThreadPoolExecutor(KEYS * CALLS_PER_KEY + len(probes)) as pool:
        path, body = slow_call(client_for(server, attacker.api_key),
                               slow_code % {"tag": uuid.uuid4().hex[:8], "gate": held.url})
        calls = [pool.submit(call, key, path, body) for key in keys for _ in range(CALLS_PER_KEY)]
        assert not gated or held.arrived.wait(60)  # the attacker's code is held at the gate
        # every key's share of requests is in flight: each key has had its extra call refused (and,
        # now, maybe others refused by the namespace's share)
        for key in range(KEYS):
            done, _ = wait(calls[key * CALLS_PER_KEY:(key + 1) * CALLS_PER_KEY], 60, FIRST_COMPLETED)
            assert done, f"none of key {key}'s calls was refused"
        answers = [probe.result(ANSWERED_WITHIN_S) for probe in [pool.submit(p) for p in probes]]
        assert not held.released.is_set()  # answered while the gate held
        # and the attacker's code was held: none of its calls that got in has ended (only refusals)
        assert all(c.result() in (429, 503) for c in calls if c.done()), [c.result() for c in calls if c.done()]
        held.release()
        statuses = [c.result() for c in calls]
    return answers, statuses


def test_a_tenants_held_options_calls_leave_another_tenants_options_and_describes_answered(server: Server) -> None:
    other = client_for(server, new_user(server, tier="paid").api_key)
    quick_options = f"/components/{saved(other, quick_code())}/props/pick/options"
    assert other.post(quick_options, json={}).status_code == 200  # the other tenant's runner is started

    answers, statuses = held_while(
        server, new_user(server, tier="paid"), SLOW_OPTIONS,
        with_saved("/components/{id}/props/pick/options", {}),
        [lambda: other.post(quick_options, json={}),
         lambda: other.post("/components", json={"component_code": quick_code()})])
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert answers[0].json()["data"]["options"] == ["b"]
    # the tenant's calls past its share of runner calls waited their turn, then were told to come
    # back (503); those past a key's share of requests too (429)
    assert set(statuses) <= {200, 429, 503} and 503 in statuses, statuses


def test_a_tenants_held_deploy_hooks_leave_another_tenants_deploys_answered(server: Server) -> None:
    other = client_for(server, new_user(server, tier="paid").api_key)
    first = other.post("/sources", json={"component_code": quick_code()})  # the other tenant's runner is started
    assert first.status_code == 200, first.text

    answers, statuses = held_while(
        server, new_user(server, tier="paid"), SLOW_DEPLOY,
        lambda api, code: ("/sources", {"component_id": saved(api, code)}),
        [lambda: other.post("/sources", json={"component_id": first.json()["data"]["component_id"]}),
         lambda: other.post("/sources", json={"component_code": quick_code()})])
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert set(statuses) <= {200, 429, 503} and 503 in statuses, statuses


def test_a_tenants_held_trials_leave_another_tenants_trials_and_describes_answered(server: Server) -> None:
    other = client_for(server, new_user(server, tier="paid").api_key)
    first = other.post("/components/run", json={"component_code": quick_code()})  # its runner is started
    assert first.status_code == 200, first.text

    answers, statuses = held_while(
        server, new_user(server, tier="paid"), SLOW_TRIAL,
        lambda api, code: ("/components/run", {"component_code": code}),
        [lambda: other.post("/components/run", json={"component_code": quick_code()}),
         lambda: other.post("/components", json={"component_code": quick_code()})])
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert answers[0].json()["data"]["error"] is None
    assert set(statuses) <= {200, 429, 503} and 503 in statuses, statuses


def test_a_tenants_held_workflow_deploys_leave_another_tenants_deploys_answered(server: Server) -> None:
    other = client_for(server, new_user(server, tier="paid").api_key)

    def deploy(code: str) -> tuple[str, dict[str, Any]]:
        return "/workflows", {"name": "flow-" + uuid.uuid4().hex[:8], "steps": [{"name": "s", "component_code": code}]}

    def deployed(code: str) -> httpx.Response:
        path, body = deploy(code)
        return other.post(path, json=body)

    first = deployed(quick_step())  # its runner is started
    assert first.status_code == 200, first.text
    answers, statuses = held_while(
        server, new_user(server, tier="paid"), SLOW_STEP, lambda api, code: deploy(code),
        [lambda: deployed(quick_step()),
         lambda: other.post("/components/run", json={"component_code": quick_code()})])
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    # a describe that waited in the tenant's runner for its turn past its time limit failed (422);
    # every held call deploys the same workflow name, so two that commit together race for it (409)
    assert set(statuses) <= {200, 409, 422, 429, 503} and 503 in statuses, statuses


def test_a_tenants_held_component_url_fetches_leave_another_tenants_saves_and_deploys_answered(
        server: Server) -> None:
    other = client_for(server, new_user(server, tier="paid").api_key)
    first = other.post("/sources", json={"component_code": quick_code()})  # its runner is started
    assert first.status_code == 200, first.text

    answers, statuses = held_while(
        server, new_user(server, tier="paid"), "%(gate)s",  # the "code" is the gate's URL
        lambda api, url: ("/sources", {"component_url": url + "slow.js"}),
        [lambda: other.post("/sources", json={"component_code": quick_code()}),
         lambda: other.post("/components", json={"component_code": quick_code()})])
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    # once the gate opened, the fetched "ok" did not load (422)
    assert set(statuses) <= {422, 429, 503} and 503 in statuses, statuses
