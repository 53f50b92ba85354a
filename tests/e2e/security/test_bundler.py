"""Threat: the bundler as an SSRF tool. Import specifiers reach `npm` on its command line, and
npm fetches what it is told to; so specifiers are npm package names (with a version) or nothing,
npm takes no option from them (`--` ends its options), and the bundler's sandbox has no network
of its own: npm reaches the configured registry, through the service's egress proxy, and nothing
else. The 422 a refused or failed import gets never quotes what a fetch answered."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from headwater.adapters.local.bundler import LocalBundler, npm_env
from headwater.adapters.local.egress import EgressProxy
from headwater.adapters.local.sandbox import RUNNER, find_sandbox
from headwater.domain.errors import Invalid
from headwater.settings import Settings
from tests.conftest import Server
from tests.e2e.aws.test_runner_lambda import invoke
from tests.e2e.security.conftest import Account, assert_healthy

SECRET = "internal-secret-3f9c1d"


class Target:
    """A loopback HTTP server standing for an internal service: it answers 500 with a secret in
    its body (npm retries 5xx) and records every request it gets."""

    def __init__(self) -> None:
        hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                hits.append(self.path)
                body = json.dumps({"error": SECRET, "secret": SECRET}).encode()
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.hits = hits
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target() -> Iterator[Target]:
    t = Target()
    try:
        yield t
    finally:
        t.close()


# Specifiers that are not `name[@version][/subpath]` of an npm package: npm options, URLs in
# disguise, names npm would read as something else.
HOSTILE_SPECIFIERS = [
    "--registry=http:\\\\127.0.0.1:{port}\\x?",
    "--registry=http://127.0.0.1:{port}/x?",
    "-r=http:\\\\127.0.0.1:{port}\\x?",
    "--userconfig=/proc/self/environ",
    "@scope/--registry=http:\\\\127.0.0.1:{port}\\x",
    "ms@--registry=http:\\\\127.0.0.1:{port}\\x",
    "ms@ --registry=http:\\\\127.0.0.1:{port}\\x",
    "ms@npm:--registry=http:\\\\127.0.0.1:{port}\\x",
    "http:\\\\127.0.0.1:{port}\\ms.tgz",
    "127.0.0.1:{port}/ms.tgz",
    "_ms",
    ".ms",
    "Ms Space",
]


@pytest.mark.parametrize("spec", HOSTILE_SPECIFIERS)
def test_option_and_url_shaped_imports_are_refused_before_npm_runs(guarded: Server, target: Target,
                                                                    spec: str) -> None:
    spec = spec.format(port=target.port)
    code = (f"import x from {json.dumps(spec)};\n"
            "export default { name: 'ssrf', version: '1', props: {}, run() { return x } }")
    r = Account(guarded).api.post("/components", json={"component_code": code})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert f'import "{spec}"' in error and "not allowed" in error, error
    assert SECRET not in r.text
    assert target.hits == [], f"the bundler fetched {target.hits}"
    assert_healthy(guarded)


def test_an_ordinary_package_still_bundles(guarded: Server, target: Target) -> None:
    code = ('import ms from "ms@2.1.3";\n'
            "export default { key: 'hwtest-ms', name: 'ms ' + ms(60000), version: '1', props: {}, run() {} }")
    r = Account(guarded).api.post("/components", json={"component_code": code})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["name"] == "ms 1m"
    assert target.hits == []


def test_a_lock_naming_a_url_installs_nothing_from_it(guarded: Server, target: Target) -> None:
    """A recorded version is an exact registry version or ignored: `ms` locked to a tarball URL
    on loopback installs ms from the registry, and the URL is never fetched."""
    bundler = LocalBundler(dataclasses.replace(Settings(), data_dir=guarded.data_dir))
    code = 'import ms from "ms";\nexport default { name: "locked", version: "1", run() { return ms(1) } }'
    try:
        bundle = bundler.bundle(code, {"ms": f"http:\\\\127.0.0.1:{target.port}\\ms-2.1.3.tgz"})
    except Invalid as e:  # refusing is as good as ignoring; quoting the answer is not
        assert SECRET not in str(e)
    else:
        assert bundle.packages["ms"][0].isdigit(), bundle.packages
    assert target.hits == [], f"the bundler fetched {target.hits}"


def test_the_bundler_sandbox_has_no_network_of_its_own(guarded: Server, target: Target) -> None:
    """Below the import rule, the OS: inside the bundler's sandbox neither the host's loopback
    nor the internet can be reached directly (npm goes through the egress proxy)."""
    settings = Settings(data_dir=guarded.data_dir)
    sandbox = find_sandbox(settings.runner_dir, settings.node)
    probe = """
      const net = require('net'); const out = {};
      const tryConnect = (host, port) => new Promise((resolve) => {
        const s = net.connect({ host, port });
        const t = setTimeout(() => { s.destroy(); resolve('TIMEOUT') }, 5000);
        s.on('connect', () => { clearTimeout(t); s.destroy(); resolve('CONNECTED') });
        s.on('error', (e) => { clearTimeout(t); resolve(e.code) });
      });
      (async () => {
        out.loopback = await tryConnect('127.0.0.1', Number(process.argv[1]));
        out.registry = await tryConnect(process.argv[2], 443);
        console.log(JSON.stringify(out));
      })()"""
    registry = socket.getaddrinfo("registry.npmjs.org", 443, socket.AF_INET)[0][4][0]
    node = f"{RUNNER}/{settings.node.relative_to(settings.runner_dir)}"
    command = sandbox.bundler(settings.runner_dir, [], npm_env(), [node, "-e", probe, str(target.port), registry])
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["loopback"] != "CONNECTED" and seen["registry"] != "CONNECTED", seen
    assert target.hits == []
    assert_healthy(guarded)


def test_the_bundlers_egress_reaches_the_registry_and_nothing_else(target: Target) -> None:
    """The service's side of the bundler's way out: an egress proxy that allows the registry's
    host and port only, whatever a request names (loopback here, which the URL policy would
    allow with HEADWATER_ALLOW_LOOPBACK_URLS=1)."""
    registry = ("registry.npmjs.org", 443)
    proxy = EgressProxy(True, True, only=[registry])
    try:
        control = proxy.open("bundle-test") / "control.sock"

        def ask(host: str, port: int) -> str:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(20)
                s.connect(str(control))
                s.sendall(f"CONNECT {host} {port}\n".encode())
                return s.makefile().readline().strip()

        assert ask("127.0.0.1", target.port).startswith("ERR EPOLICY"), "loopback was allowed"
        assert ask("localhost", target.port).startswith("ERR EPOLICY")
        assert ask("registry.npmjs.org", 80).startswith("ERR EPOLICY")
        assert ask(*registry).startswith("OK "), "the registry was refused"
    finally:
        proxy.close()
    assert target.hits == []


def test_the_lambda_bundle_op_refuses_option_shaped_imports(tmp_path: Path, target: Target) -> None:
    """On AWS the runner Lambda bundles (op `bundle`) with the same bundle.mjs: the same refusal,
    before npm runs."""
    spec = f"--registry=http:\\\\127.0.0.1:{target.port}\\x?"
    code = f"import x from {json.dumps(spec)};\nexport default {{ name: 'ssrf', version: '1', run() {{ return x }} }}"
    failed, = invoke(tmp_path, "c", [{"id": 1, "op": "bundle", "code": code}])
    assert not failed["ok"] and failed["error"]["code"] == "BUNDLE_FAILED", failed
    assert f'import "{spec}" is not allowed' in failed["error"]["message"]
    assert SECRET not in json.dumps(failed)
    assert target.hits == [], f"the bundler fetched {target.hits}"
