"""Threat 5: component code reaching addresses the URL policy refuses, or accepting connections.

Every refused target is refused by policy in the service's egress proxy before any packet is sent
(the error says so); the one reachable target is a loopback listener this test starts, on the
service that allows loopback URLs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from headwater.adapters.local.egress import EgressProxy
from tests.conftest import Server
from tests.e2e.security.conftest import Account, Source, assert_healthy


@pytest.fixture(scope="module")
def egress(guarded: Server) -> Source:
    return Account(guarded).deploy("egress.mjs")


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://[fd00::1]/",
    "http://100.64.0.1/",
    "http://[2002:a9fe:a9fe::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://0177.0.0.1/",
    "http://2130706433/",
    "https://10.0.0.1/",
])
def test_fetch_of_a_refused_address_is_refused_by_policy(guarded: Server, egress: Source, url: str) -> None:
    seen = egress.run({"url": url})
    assert seen["reached"] is False, seen
    assert "refused by policy" in seen["error"], seen
    assert_healthy(guarded)


def test_the_services_own_port_is_refused(guarded: Server, egress: Source) -> None:
    seen = egress.run({"url": f"http://127.0.0.1:{guarded.port}/healthz"})
    assert seen["reached"] is False and "refused by policy" in seen["error"], seen
    assert_healthy(guarded)


@pytest.mark.parametrize("host", ["0177.0.0.1", "2130706433", "0x7f.1", "::ffff:127.0.0.1", "169.254.169.254"])
def test_raw_tcp_to_odd_spellings_is_refused_by_policy(guarded: Server, egress: Source, host: str) -> None:
    seen = egress.run({"host": host, "port": guarded.port})
    assert seen["reached"] is False and seen["code"] == "ECONNREFUSED", seen
    assert "refused by policy" in seen["error"], seen
    assert_healthy(guarded)


def test_listening_is_refused(guarded: Server) -> None:
    seen = Account(guarded).deploy("listen.mjs").run({})
    assert seen["net"]["listening"] is False and seen["net"]["code"] == "ERR_ACCESS_DENIED", seen
    assert seen["http"]["listening"] is False and seen["http"]["code"] == "ERR_ACCESS_DENIED", seen
    assert_healthy(guarded)


def test_component_url_with_an_odd_spelling_is_a_422(lenient: Server) -> None:
    account = Account(lenient)
    for url in ("http://0177.0.0.1/c.js", "http://2130706433/c.js", "http://[::ffff:127.0.0.1]/c.js"):
        r = account.api.post("/components", json={"component_url": url})
        assert r.status_code == 422, (url, r.text)
        assert "refused by policy" in r.json()["error"]
    assert_healthy(lenient)


@pytest.fixture
def listener() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = b"hello from loopback"
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_allowed_egress_goes_through_the_proxy(lenient: Server, listener: str) -> None:
    """The control: where the policy allows it (loopback on a development service), the same
    component reaches its target, so the refusals above are the policy, not a broken network."""
    source = Account(lenient).deploy("egress.mjs")
    seen = source.run({"url": listener})
    assert seen == {"target": listener, "reached": True, "status": 200, "body": "hello from loopback"}
    assert httpx.get(lenient.base_url + "/healthz").status_code == 200


def test_egress_directories_of_killed_services_are_swept_at_start() -> None:
    """A service killed with -9 cannot remove its egress directory; the next one to start does, and
    leaves a live service's alone."""
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid names no process now
    orphan = Path(tempfile.gettempdir()) / f"headwater-egress-{dead.pid}-test"
    live = Path(tempfile.mkdtemp(prefix=f"headwater-egress-{os.getpid()}-"))
    orphan.mkdir()
    (orphan / "r1").mkdir()
    proxy = EgressProxy(allow_loopback=True, allow_private=False)
    try:
        assert not orphan.exists() and live.exists() and proxy.root.exists()
        assert proxy.root.name.startswith(f"headwater-egress-{os.getpid()}-")
    finally:
        proxy.close()
        shutil.rmtree(live, ignore_errors=True)
    assert not proxy.root.exists()


def test_a_trial_on_recorded_runs_is_held_to_the_same_url_policy(guarded: Server) -> None:
    """A new version tried on a source's recorded runs (POST /v1/sources/{id}/trial) fetches through
    the same egress as any run: a refused address is refused by policy, in the trial run's emit."""
    account = Account(guarded)
    source = account.deploy("egress.mjs")
    source.send({"url": "http://169.254.169.254/latest/meta-data/"})
    source.wait(lambda events: len(events) == 1, "the live run's emit")
    code = (Path(__file__).parents[2] / "components" / "hostile" / "egress.mjs").read_text()
    tried = code.replace("const { url, host, port } = event.body;",
                         'const { host, port } = event.body; const url = "http://10.0.0.1/";')
    r = account.api.post(f"/sources/{source.id}/trial", json={"component_code": tried, "runs": 1})
    assert r.status_code == 200, r.text
    [run] = r.json()["data"]["runs"]
    [changed] = run["changed"]
    assert changed["trial"]["event"]["reached"] is False, changed
    assert "refused by policy" in changed["trial"]["event"]["error"], changed
    assert_healthy(guarded)
