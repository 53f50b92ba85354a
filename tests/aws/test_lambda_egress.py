"""The AWS runner's egress proxy (layers/runner/src/lambda-egress.mjs), driven in Node over its
control socket as the child's egress.mjs drives it: a checked connection is handed as a one-use
Unix socket spliced to the upstream, refusals are answered with the policy's sentence, and a child
has at most MAX_CONNECTIONS open."""

from __future__ import annotations

import json
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from headwater.settings import Settings

EGRESS = Path(__file__).resolve().parents[2] / "layers" / "runner" / "src" / "lambda-egress.mjs"

SCRIPT = """
import net from 'node:net'
import { egressProxy, MAX_CONNECTIONS } from %s
const { root, port } = JSON.parse(process.argv[2])
const names = { 'mixed.test': ['8.8.8.8', '10.0.0.1'] }
const resolve = async (h) => { if (!names[h]) throw new Error('unknown'); return names[h] }
const proxy = egressProxy(root, { loopbackPorts: new Set([port]), resolve, runtimeApi: '127.0.0.1:9' })
await proxy.ready
const ask = (line) => new Promise((r) => {
  let got = ''
  const c = net.connect(proxy.dir + '/control.sock', () => c.write(line + '\\n'))
  c.setEncoding('utf8').on('data', (d) => (got += d)).on('close', () => r(got.trim())).on('error', () => {})
})
const open = (name) => new Promise((r, j) => {
  const s = net.connect(proxy.dir + '/' + name, () => r(s)).on('error', j)
})
const echo = (s, text) => new Promise((r) => { s.once('data', (d) => r(String(d))); s.write(text) })
const out = {}
for (const line of ['CONNECT 127.0.0.1 ' + (port + 1), 'CONNECT 0177.0.0.1 ' + port, 'CONNECT 127.0.0.1 9',
                    'CONNECT mixed.test 80', 'CONNECT gone.test 80', 'HELLO', 'CONNECT 127.0.0.1 0'])
  out[line] = await ask(line)
const first = await ask('CONNECT 127.0.0.1 ' + port)
const s = await open(first.slice(3))
out.echo = await echo(s, 'ping')
out.again = await open(first.slice(3)).then(() => 'connected', (e) => e.code)
const held = [s]
for (let i = 1; i < MAX_CONNECTIONS; i++) held.push(await open((await ask('CONNECT 127.0.0.1 ' + port)).slice(3)))
out.over = await ask('CONNECT 127.0.0.1 ' + port)
held.pop().destroy() // the proxy sees it close in its own time: ask until it has (10 s at most)
let after = ''
for (const until = Date.now() + 10000; !after.startsWith('OK') && Date.now() < until;) {
  after = await ask('CONNECT 127.0.0.1 ' + port)
}
out.after = after.slice(0, 3)
out.max = MAX_CONNECTIONS
proxy.close()
console.log(JSON.stringify(out))
process.exit(0)
"""


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_proxy_splices_checked_connections_and_refuses_the_rest(tmp_path: Path, echo: int) -> None:
    (tmp_path / "drive.mjs").write_text(SCRIPT % json.dumps(EGRESS.as_uri()))
    proc = subprocess.run([str(Settings().node), str(tmp_path / "drive.mjs"),
                           json.dumps({"root": str(tmp_path / "egress"), "port": echo})],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    assert out[f"CONNECT 127.0.0.1 {echo + 1}"] == "ERR EPOLICY refused by policy: 127.0.0.1 is a loopback address"
    assert out[f"CONNECT 0177.0.0.1 {echo}"].startswith("ERR EPOLICY refused by policy: 0177.0.0.1 is an unusual")
    assert out["CONNECT 127.0.0.1 9"] == "ERR EPOLICY refused by policy: 127.0.0.1 is a loopback address"
    assert out["CONNECT mixed.test 80"] == ("ERR EPOLICY refused by policy: mixed.test resolves to 10.0.0.1, "
                                            "a private, link-local or reserved address")
    assert out["CONNECT gone.test 80"] == "ERR ENOTFOUND the host gone.test does not resolve"
    assert out["HELLO"] == out["CONNECT 127.0.0.1 0"] == "ERR EINVAL expected: CONNECT <host> <port>"
    assert out["echo"] == "ping" and out["again"] == "ENOENT"  # a ticket serves one connection
    assert out["over"] == f"ERR EMFILE too many open connections (at most {out['max']} per runner)"
    assert out["after"] == "OK "
    assert not (tmp_path / "egress").exists() or not any((tmp_path / "egress").iterdir())  # closed: gone
