"""The runner process is the boundary: nothing in one serves two accounts, and nothing it says is
believed beyond what the service asked of it (docs/security.md, "The supervisor").

Each test is an attack that worked before the boundary was drawn at the process: describe calls
of all accounts shared one process (and its /tmp and stdout), a run's end and duration were the
runner's word, and runs that only waited held the service's task workers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.conftest import Server, client_for, new_user, running_server
from tests.e2e.security.conftest import Account, assert_healthy, source_code

FORGE_MS = 3000


def test_describe_runs_in_the_callers_own_process(lenient: Server) -> None:
    """Module code runs while a component is described: it must not see another account's
    scratch files (before: one shared describe process, one /tmp for every account)."""
    first, second = Account(lenient), Account(lenient)

    def describe(account: Account, mark: str) -> str:
        r = account.api.post("/components", json={"component_code": source_code("describe_scratch.mjs",
                                                                                  __MARK__=mark)})
        assert r.status_code == 200, r.text
        return str(r.json()["data"]["version"])  # the marks its module code saw in /tmp

    assert "mark-first" in describe(first, "first")
    seen = describe(second, "second")
    assert "mark-first" not in seen, seen
    assert "mark-second" in seen, seen
    assert_healthy(lenient)


def test_forged_answers_never_reach_another_account(lenient: Server) -> None:
    """An account's module code writes describe answers for a range of request ids while others
    describe components: every other account gets its own component's props, secret and all
    (before: the next account's component was saved with the attacker's props)."""
    attacker, victim = Account(lenient), Account(lenient)
    victim_code = (
        'export default {name: "Victim", version: "1.0.0", '
        'props: {http: "$.interface.http", api_key: {type: "string", secret: true}}, run() {}}'
    )
    attack = threading.Thread(target=lambda: attacker.api.post(
        "/components", json={"component_code": source_code("describe_forge.mjs", __FORGE_MS__=str(FORGE_MS))}))
    attack.start()
    seen = []
    try:
        end = time.monotonic() + FORGE_MS / 1000 + 1
        while time.monotonic() < end or attack.is_alive():
            code = victim_code.replace("1.0.0", f"1.0.{len(seen)}")
            r = victim.api.post("/components", json={"component_code": code})
            assert r.status_code == 200, r.text
            seen.append(r.json()["data"])
    finally:
        attack.join(60)
    assert seen
    for component in seen:
        assert component["name"] == "Victim", component
        props = {p["name"]: p for p in component["configurable_props"]}
        assert props["api_key"].get("secret") is True, component
    assert_healthy(lenient)


def test_a_line_the_service_did_not_ask_for_fails_only_that_account(lenient: Server) -> None:
    """Output on the runner's stdout that is not an answer to a request the service sent is the
    process failing: its calls fail, and nothing of it is taken as an answer."""
    writer, bystander = Account(lenient), Account(lenient)
    source = writer.deploy("garbage_line.mjs")
    other = bystander.deploy("started_at.mjs")
    source.send({})
    error = source.first_error()
    assert error["code"] == "RUNNER_PROTOCOL", error
    assert source.events() == []  # the emit travelled in a result the service no longer believed
    event = other.run({"sent_ms": 0})
    assert event["started_ms"] > 0
    assert_healthy(lenient)


class Listener:
    """A loopback listener that counts the requests it gets, with the time of each."""

    def __init__(self) -> None:
        self.hits: list[float] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                listener.hits.append(time.monotonic())
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def short_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Every call limited to 4 s (runs, hooks, describe: a process is frozen once the limits of
    all its calls have passed), and one account's share of runs in flight at 2."""
    with running_server(tmp_path_factory.mktemp("short-runs"), HEADWATER_HTTP_TIMEOUT_MS="4000",
                        HEADWATER_HOOK_TIMEOUT_MS="4000", HEADWATER_DESCRIBE_TIMEOUT_MS="4000",
                        HEADWATER_ACCOUNT_MAX_CONCURRENT_RUNS="2") as srv:
        yield srv


def test_a_forged_end_stops_nothing_and_bills_everything(short_runs: Server) -> None:
    """A run that tells the runner it is done and keeps working: its work stops within the run's
    4 s limit, and the CPU it burned after its forged end is billed to its user (before: it went
    on calling out for a minute, and its busy loop was not billed)."""
    user = new_user(short_runs, tier="free")
    api = client_for(short_runs, user.api_key)
    r = api.post("/sources", json={"component_code": source_code("forge_done.mjs")})
    assert r.status_code == 200, r.text
    url = r.json()["data"]["configured_props"]["http"]["endpoint_url"]
    listener = Listener()
    try:
        sent = time.monotonic()
        assert httpx.post(url, json={"url": listener.url, "burn_ms": 600}, timeout=30).status_code == 200
        used = 0
        deadline = time.monotonic() + 30
        while used < 600 and time.monotonic() < deadline:
            used = api.get("/users/me").json()["data"]["daily_compute_time_used"]
            time.sleep(0.1)
        assert used >= 600, f"{used} ms of compute billed for 600 ms of CPU"
        # The run's limit is 4 s from when it was sent; give a loaded machine 4 s more, then
        # watch for 4 s: nothing the run started may still be calling out.
        quiet_from = sent + 4 + 4
        time.sleep(max(0.0, quiet_from + 4 - time.monotonic()))
        late = [t - sent for t in listener.hits if t > quiet_from]
        assert late == [], f"the run was still calling out {late[:5]} s after it was sent"
    finally:
        listener.close()
    assert_healthy(short_runs)


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """An account may have 16 runs in flight: more than the service has task workers (8)."""
    with running_server(tmp_path_factory.mktemp("roomy"), HEADWATER_ACCOUNT_MAX_CONCURRENT_RUNS="16") as srv:
        yield srv


def test_one_accounts_waiting_runs_do_not_hold_another_accounts(roomy: Server) -> None:
    """One account's 50 runs that only sleep, 10 of them in flight at once (more than there are
    task workers): another account's run starts at once (before: the sleeping runs held every
    task worker, and it waited for one of them to end)."""
    sleepy, busy = Account(roomy), Account(roomy)
    sleepers = [sleepy.deploy("sleeper.mjs") for _ in range(10)]
    for source in sleepers:
        for _ in range(5):
            source.send({"sleep_ms": 20_000})
    other = busy.deploy("started_at.mjs")
    started = time.monotonic()
    event = other.run({"sent_ms": int(time.time() * 1000)})
    waited_s = time.monotonic() - started
    assert waited_s < 10, f"another account's run waited {waited_s:.1f} s behind sleeping runs"
    assert event["started_ms"] - event["sent_ms"] < 10_000, event
    assert_healthy(roomy)
