"""lambda.mjs itself, in Node as the nodejs22.x runtime calls it, with no AWS SDK and no AWS
permission: the bundle bucket is an HTTP server here, reached only through the URLs a request
carries (as the presigned ones the Python callers sign). Its `bundle` op puts the bundle through
the request's PUT URLs, a container with an empty /tmp runs it by hash through the GET URL, and
component code cannot read the bundles the container keeps."""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import signal
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from headwater.settings import Settings
from tests.conftest import ended

LAMBDA = Path(__file__).resolve().parents[3] / "layers" / "runner" / "src" / "lambda.mjs"
DRIVER = """const { handler } = await import(process.env.LAMBDA_MJS)
const answers = []
for (const event of JSON.parse(process.argv[2])) answers.push(await handler(event))
console.log(JSON.stringify(answers))
process.exit(0)
"""


class Bucket:
    """Objects as files under `root`, GET and PUT by path: what a presigned URL reaches."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[tuple[str, str]] = []
        bucket = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                bucket.requests.append(("GET", self.path))
                path = bucket.root / self.path.lstrip("/")
                data = path.read_bytes() if path.is_file() else None
                self.send_response(200 if data is not None else 404)
                self.end_headers()
                self.wfile.write(data or b"")

            def do_PUT(self) -> None:
                bucket.requests.append(("PUT", self.path))
                path = bucket.root / self.path.lstrip("/")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(self.rfile.read(int(self.headers["content-length"])))
                self.send_response(200)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def get(self, digest: str) -> str:
        return f"{self.url}/bundles/{digest}.cjs"

    def put(self, digest: str) -> dict[str, str]:
        return {ext: f"{self.url}/bundles/{digest}.{ext}" for ext in ("cjs", "json")}


@pytest.fixture
def bucket(tmp_path: Path) -> Iterator[Bucket]:
    b = Bucket(tmp_path / "s3")
    yield b
    b.server.shutdown()


def invoke(tmp_path: Path, container: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (tmp_path / "driver.mjs").write_text(DRIVER)
    env = {"PATH": "/usr/bin:/bin", "HEADWATER_RUNNER_TMP": str(tmp_path / container), "LAMBDA_MJS": str(LAMBDA)}
    (tmp_path / container).mkdir(exist_ok=True)
    proc = subprocess.run([str(Settings().node), str(tmp_path / "driver.mjs"), json.dumps(events)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


CODE = """export default { key: 'doubler', name: 'Doubler', version: '0.0.1', type: 'source', props: {},
  async run(event) { this.$emit({ doubled: event.n * 2 }) } }"""
SNOOP = """export default { key: 'snoop', name: 'Snoop', version: '0.0.1', type: 'source', props: {},
  async run() { const fs = await import('node:fs'); this.$emit(fs.readdirSync(process.env.DIR)) } }"""


def test_the_runner_has_no_aws_sdk_and_reads_no_bucket_from_its_environment() -> None:
    code = "\n".join(line for line in LAMBDA.read_text().splitlines() if not line.lstrip().startswith("//"))
    code = code.replace("AWS_LAMBDA_RUNTIME_API", "")  # an address, to keep the child away from it
    assert "@aws-sdk" not in code and "BUCKET" not in code and "AWS_" not in code


def test_the_bundle_op_puts_through_the_urls_and_a_fresh_container_runs_by_the_get_url(tmp_path: Path,
                                                                                        bucket: Bucket) -> None:
    made, = invoke(tmp_path, "first",
                   [{"id": 1, "op": "bundle", "code": CODE, "lock": {}, "put": bucket.put(digest(CODE))}])
    stored = tmp_path / "s3" / "bundles"
    sha256 = hashlib.sha256((stored / f"{digest(CODE)}.cjs").read_bytes()).hexdigest()
    assert made["ok"] and made["result"] == {"hash": digest(CODE), "packages": {}, "sha256": sha256}, made
    assert "doubled" in (stored / f"{digest(CODE)}.cjs").read_text()
    assert json.loads((stored / f"{digest(CODE)}.json").read_text()) == {"packages": {}, "sha256": sha256}
    assert [m for m, _ in bucket.requests] == ["PUT", "PUT"] and bucket.requests[1][1].endswith(".json")  # .json last

    run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 5000}
    ran, missing, snooped_bundle = invoke(tmp_path, "fresh", [
        {**run, "id": 2, "bundle": {"hash": digest(CODE), "sha256": sha256, "url": bucket.get(digest(CODE))},
         "event": {"n": 21}},
        {**run, "id": 3, "bundle": {"hash": "f" * 64, "sha256": "e" * 64, "url": bucket.get("f" * 64)},
         "event": {"n": 1}},
        {"id": 4, "op": "bundle", "code": SNOOP},
    ])
    assert ran["ok"] and [e["event"] for e in ran["result"]["emits"]] == [{"doubled": 42}], ran
    assert not missing["ok"] and missing["error"]["code"] == "BUNDLE_MISSING"
    assert snooped_bundle["ok"], snooped_bundle
    snooped, = invoke(tmp_path, "fresh", [
        {**run, "id": 5, "instance": "dc_2", "event": {},
         "bundle": {"hash": digest(SNOOP), "sha256": snooped_bundle["result"]["sha256"]},
         "env": {"DIR": str(tmp_path / "fresh" / "bundles")}}])
    assert snooped["ok"] and snooped["result"]["emits"] == [], snooped
    assert "restricted" in snooped["result"]["error"]["message"]


def test_code_that_does_not_bundle_is_a_bundle_failure_and_nothing_is_stored(tmp_path: Path, bucket: Bucket) -> None:
    code = 'import "/etc/passwd"\nexport default {}'
    failed, = invoke(tmp_path, "c", [{"id": 1, "op": "bundle", "code": code, "put": bucket.put(digest(code))}])
    assert not failed["ok"] and failed["error"]["code"] == "BUNDLE_FAILED"
    assert "not allowed" in failed["error"]["message"]
    assert not (tmp_path / "s3").exists() and bucket.requests == []


def test_a_bundle_this_container_made_is_put_again_and_one_missing_its_code_is_made_again(tmp_path: Path,
                                                                                          bucket: Bucket) -> None:
    made, again = invoke(tmp_path, "a", [{"id": 1, "op": "bundle", "code": CODE},  # no URLs: kept in /tmp only
                                         {"id": 2, "op": "bundle", "code": CODE, "put": bucket.put(digest(CODE))}])
    assert made["ok"] and again == {**made, "id": 2} and bucket.requests[0][0] == "PUT"
    stored = tmp_path / "s3" / "bundles" / f"{digest(CODE)}.cjs"
    assert "doubled" in stored.read_text()
    kept = tmp_path / "a" / "bundles" / f"{made['result']['sha256']}.cjs"  # /tmp keeps a bundle by its content's hash
    kept.unlink()
    remade, = invoke(tmp_path, "a", [{"id": 3, "op": "bundle", "code": CODE}])
    assert remade["ok"] and kept.exists()


MARKS = """export default { key: 'marks', name: 'Marks', version: '0.0.1', type: 'source', props: {},
  async run(event) { const fs = await import('node:fs');
    fs.writeFileSync('mark-' + event.mark, 'x');
    this.$emit(fs.readdirSync('.').filter((n) => n.startsWith('mark-')).sort()) } }"""


def test_a_warm_child_never_serves_a_second_account(tmp_path: Path, bucket: Bucket) -> None:
    """One container, invocations of two accounts in turn: each account's runs see only what that
    account left in the child's /tmp (before: one warm child and one /tmp served every account)."""
    made, = invoke(tmp_path, "c", [{"id": 1, "op": "bundle", "code": MARKS, "lock": {},
                                    "put": bucket.put(digest(MARKS))}])
    assert made["ok"], made
    run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 5000,
           "bundle": {"hash": digest(MARKS), "sha256": made["result"]["sha256"]}}
    first, again, other, back = invoke(tmp_path, "c", [
        {**run, "id": 2, "account": "account:a", "event": {"mark": "a1"}},
        {**run, "id": 3, "account": "account:a", "event": {"mark": "a2"}},
        {**run, "id": 4, "account": "account:b", "event": {"mark": "b1"}},
        {**run, "id": 5, "account": "account:a", "event": {"mark": "a3"}},
    ])
    seen = [r["result"]["emits"][0]["event"] for r in (first, again, other, back)]
    assert seen == [["mark-a1"], ["mark-a1", "mark-a2"], ["mark-b1"], ["mark-a3"]], seen


# ---- the warm child between invocations (docs/security.md, "AWS": the runtime API) ----------------

STEPS = """import { createInterface } from 'node:readline'
const { handler } = await import(process.env.LAMBDA_MJS)
const now = () => String(process.hrtime.bigint())
for await (const line of createInterface({ input: process.stdin })) {
  const start = now()
  const answer = await handler(JSON.parse(line))
  console.log(JSON.stringify({ answer, start, end: now() }))
}
process.exit(0)
"""

# Code that leaves work running after its run: an unref'd socket is neither a timer confine.mjs
# clears nor a resource process.getActiveResourcesInfo() shows, so the worker stays warm with it. Its
# idle timeout is the clock: 5 ms after each tick the component opens a connection to the loopback
# listener (as it would the runtime API) and sends the CLOCK_MONOTONIC time. A run ends, reporting
# its pid, when a tick that began after the run started has closed its connection (so no connection
# is in progress as the run ends, which would get the worker replaced).
TICKER = """import net from 'node:net'
let ticks = 0
let waiting = []
function start(port) {
  const clock = net.connect(port, '127.0.0.1')
  clock.on('error', () => {})
  clock.unref()
  clock.on('timeout', () => {
    const c = net.connect(port, '127.0.0.1', () => c.end('tick ' + process.hrtime.bigint() + '\\n'))
    c.on('error', () => {})
    c.on('close', () => {
      ticks += 1
      for (const w of waiting) w()
      waiting = []
      clock.setTimeout(5)
    })
  })
  clock.setTimeout(5)
}
export default { key: 'ticker', name: 'Ticker', version: '0.0.1', type: 'source', props: {},
  async run(event) {
    if (!ticks && !waiting.length) start(event.port)
    await new Promise((r) => waiting.push(r))
    this.$emit({ pid: process.pid, ticks })
  } }"""


class Listener:
    """A loopback TCP listener that records what each connection sent (read to its end)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.accepted = 0
        self.lock = threading.Lock()
        listener = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with listener.lock:
                    listener.accepted += 1
                data = b""
                while chunk := self.request.recv(65536):
                    data += chunk
                with listener.lock:
                    listener.sent.append(data)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def ticks(self) -> list[int]:
        with self.lock:
            return [int(line.split()[1]) for data in self.sent for line in data.decode().splitlines()
                    if line.startswith("tick ")]


@pytest.fixture
def listener() -> Iterator[Listener]:
    s = Listener()
    yield s
    s.server.shutdown()
    s.server.server_close()


class Container:
    """One warm runner container: lambda.mjs in a driver that invokes it once per `invoke`."""

    def __init__(self, tmp_path: Path, env: dict[str, str] | None = None) -> None:
        (tmp_path / "steps.mjs").write_text(STEPS)
        (tmp_path / "c").mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [str(Settings().node), str(tmp_path / "steps.mjs")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env={"PATH": "/usr/bin:/bin", "HEADWATER_RUNNER_TMP": str(tmp_path / "c"),
                            "LAMBDA_MJS": str(LAMBDA), **(env or {})})

    def invoke(self, event: dict[str, Any], within_s: float = 120) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(event) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], within_s)
        assert ready, f"no answer within {within_s} s"
        line = self.proc.stdout.readline()
        assert line, "the driver ended"
        return dict(json.loads(line))

    def close(self) -> None:
        """Ends the driver as Lambda's runtime would end: lambda.mjs's exit ends its child."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    c = Container(tmp_path)
    yield c
    c.close()


def state(pid: int) -> str:
    """The process's state letter in /proc (T: stopped), or '' once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return ""
    return stat[stat.rindex(")") + 2]


def bundled(c: Container, code: str) -> dict[str, Any]:
    made = c.invoke({"id": 0, "op": "bundle", "code": code, "lock": {}})["answer"]
    assert made["ok"], made
    return {"hash": made["result"]["hash"], "sha256": made["result"]["sha256"]}


def ran(step: dict[str, Any]) -> dict[str, Any]:
    answer = step["answer"]
    assert answer["ok"] and answer["result"]["emits"], answer
    return dict(answer["result"]["emits"][0]["event"])


def test_a_warm_child_is_stopped_between_invocations_and_resumed_for_its_account(
        tmp_path: Path, listener: Listener) -> None:
    """A component that leaves an interval running: once its invocation returns, the child is
    stopped (SIGSTOP), so nothing of it runs while the container waits for its next invocation (the
    window in which the runtime API would hand that invocation to whoever asks); the next call of
    the same account resumes it, one of another account kills it. (Before: the child ran on.)"""
    # The listener's port is one the child may reach (through lambda.mjs's egress proxy).
    container = Container(tmp_path, {"HEADWATER_RUNNER_EGRESS_ALLOW_LOOPBACK_PORTS": str(listener.port)})
    try:
        run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 20000,
               "bundle": bundled(container, TICKER), "event": {"port": listener.port}}
        first = container.invoke({**run, "id": 1, "account": "account:a"})
        pid = ran(first)["pid"]
        assert state(pid) == "T"
        # An invocation that does not use the child, and takes a while (esbuild): the child's idle window.
        bundled(container, CODE + "\n// another bundle")
        again = container.invoke({**run, "id": 2, "account": "account:a"})
        assert ran(again)["pid"] == pid and state(pid) == "T"
        idle = [t for t in listener.ticks() if int(first["end"]) < t < int(again["start"])]
        assert idle == [], f"{len(idle)} connections from the child while it waited for its next call"
        other = container.invoke({**run, "id": 3, "account": "account:b"})
        assert ran(other)["pid"] != pid and ended(pid)  # killed, stopped as it was
    finally:
        container.close()


PID = """export default { key: 'pid', name: 'Pid', version: '0.0.1', type: 'source', props: {},
  async run(event) {
    if (event.stop) process.kill(process.pid, 'SIGSTOP') // a child that never answers
    if (event.hold) { // a request to the runtime API left waiting for its answer, as /next would be
      const net = await import('node:net')
      const s = net.connect(event.hold, '127.0.0.1')
      s.unref()
      await new Promise((r) => s.on('connect', r))
      await new Promise((r) => s.write('GET /2018-06-01/runtime/invocation/next HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n', r))
      // The finished connect request is listed as active until it is collected, and would get the
      // worker (and the socket) ended with the run: allocate until it is.
      for (let i = 0; i < 5000 && process.getActiveResourcesInfo().includes('ConnectWrap'); i++) {
        globalThis.junk = Array.from({ length: 1e5 }, () => ({}))
        await new Promise((r) => setImmediate(r))
      }
      globalThis.junk = null
    }
    this.$emit({ pid: process.pid })
  } }"""


def test_a_child_killed_while_stopped_is_replaced_for_the_next_call(container: Container) -> None:
    run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 20000, "bundle": bundled(container, PID),
           "event": {}, "account": "account:a"}
    pid = ran(container.invoke({**run, "id": 1}))["pid"]
    assert state(pid) == "T"
    os.kill(pid, signal.SIGKILL)
    assert ended(pid)
    again = ran(container.invoke({**run, "id": 2}))["pid"]
    assert again != pid and state(again) == "T"


def test_a_child_that_does_not_answer_within_its_limit_is_killed(tmp_path: Path) -> None:
    """The child enforces a run's timeout itself, but may lie: past the limit and a grace,
    lambda.mjs kills it and answers TIMEOUT (before: the invocation waited until Lambda's own timeout)."""
    c = Container(tmp_path, {"HEADWATER_RUNNER_GRACE_MS": "500"})
    try:
        # The runs that start a child get a limit of 30 s: a child's start counts in its first run's
        # limit, and on a loaded machine it alone can take longer than 500 ms and the grace.
        run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 30_000, "bundle": bundled(c, PID),
               "account": "account:a"}
        pid = ran(c.invoke({**run, "id": 1, "event": {}}))["pid"]
        hung = c.invoke({**run, "id": 2, "event": {"stop": True}, "timeout_ms": 500}, within_s=60)["answer"]
        assert not hung["ok"] and hung["error"]["code"] == "TIMEOUT", hung
        assert ended(pid)
        assert ran(c.invoke({**run, "id": 3, "event": {}}))["pid"] != pid
    finally:
        c.close()


def test_a_child_holding_a_connection_to_the_runtime_api_is_killed_and_its_call_fails(
        tmp_path: Path, listener: Listener) -> None:
    """A request to the runtime API still open when the child has answered could be answered with
    the environment's next invocation: the child is killed (its socket with it) and the call fails
    closed (before: the answer went back and the request stayed open). The second line, behind the
    seccomp filter (which keeps the child from opening that connection at all): shown on a child
    started without the launcher, the test-only way."""
    c = Container(tmp_path, {"AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{listener.port}",
                             "HEADWATER_RUNNER_UNSAFE_NO_LAUNCHER": "1"})
    try:
        run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 20000, "bundle": bundled(c, PID),
               "account": "account:a"}
        pid = ran(c.invoke({**run, "id": 1, "event": {}}))["pid"]  # a connection elsewhere is no matter
        held = c.invoke({**run, "id": 2, "event": {"hold": listener.port}})["answer"]
        assert not held["ok"] and held["error"]["code"] == "RUNNER_CRASHED", held
        assert "runtime API" in held["error"]["message"] and ended(pid)
        assert ran(c.invoke({**run, "id": 3, "event": {}}))["pid"] != pid
    finally:
        c.close()


def test_a_new_accounts_child_gets_an_empty_tmp_after_the_last_child_was_killed(container: Container) -> None:
    """The last account's child died (killed while stopped): the next account's child still starts
    on an emptied /tmp/runner (before: only a live child's switch emptied it)."""
    run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 20000, "bundle": bundled(container, MARKS)}
    first = container.invoke({**run, "id": 1, "account": "account:a", "event": {"mark": "a1"}})
    assert first["answer"]["result"]["emits"][0]["event"] == ["mark-a1"], first
    pid = int(Path(f"/proc/{container.proc.pid}/task/{container.proc.pid}/children").read_text().split()[0])
    assert state(pid) == "T"
    os.kill(pid, signal.SIGKILL)
    assert ended(pid)
    bundled(container, CODE)  # an invocation without the child: lambda.mjs has seen it end
    other = container.invoke({**run, "id": 2, "account": "account:b", "event": {"mark": "b1"}})
    assert other["answer"]["result"]["emits"][0]["event"] == ["mark-b1"], other


# ---- the child has no network of its own (docs/security.md, "The Lambda runtime API") -----------

REACH = """export default { key: 'reach', name: 'Reach', version: '0.0.1', type: 'source', props: {},
  async run(event) {
    const net = await import('node:net')
    const out = {}
    out.direct = await new Promise((r) => {
      const s = net.connect(event.api, '127.0.0.1', () => {
        s.end('GET /2018-06-01/runtime/invocation/next')
        r('connected')
      })
      s.on('error', (e) => r(String(e.message)))
    })
    const get = async (url) => {
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(5000) })
        return `${res.status} ${await res.text()}`
      }
      catch (e) { return String(e.cause ? e.cause.message : e.message) }
    }
    out.fetch = await get(`http://127.0.0.1:${event.api}/2018-06-01/runtime/invocation/next`)
    try { // below the net patch: the binding itself
      const { TCP, TCPConnectWrap, constants } = process.binding('tcp_wrap')
      const req = new TCPConnectWrap()
      out.raw = String(new TCP(constants.SOCKET).connect(req, '127.0.0.1', event.api))
    } catch (e) { out.raw = String(e.message) }
    out.allowed = await get(`http://localhost:${event.web}/hello`)
    this.$emit(out)
  } }"""


@pytest.fixture
def web() -> Iterator[int]:
    """A loopback HTTP server answering `hello`: an address component code may reach in these tests."""
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def reach(tmp_path: Path, listener: Listener, web: int, allowed: list[int]) -> dict[str, str]:
    c = Container(tmp_path, {"AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{listener.port}",
                             "HEADWATER_RUNNER_EGRESS_ALLOW_LOOPBACK_PORTS": ",".join(map(str, allowed))})
    try:
        run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 20000, "bundle": bundled(c, REACH),
               "account": "account:a", "event": {"api": listener.port, "web": web}}
        return ran(c.invoke({**run, "id": 1}))
    finally:
        c.close()


def test_component_code_cannot_reach_the_runtime_api_and_reaches_allowed_addresses_through_the_proxy(
        tmp_path: Path, listener: Listener, web: int) -> None:
    """The child runs under the seccomp launcher (no socket but AF_UNIX): a connection to the
    runtime API's address, through net, fetch or the TCP binding below net's patch, never arrives;
    its net and fetch are refused by lambda.mjs's egress proxy with the URL policy's sentence (loopback), while
    an address the proxy allows (a loopback port, test-only) answers. (Before: the connections arrived.)"""
    seen = reach(tmp_path, listener, web, [web])
    assert listener.accepted == 0, f"{listener.accepted} connections arrived at the runtime API: {seen}"
    assert seen["allowed"] == "200 hello", seen
    for how in ("direct", "fetch"):
        assert "refused by policy: 127.0.0.1 is a loopback address" in seen[how], seen
    assert seen["raw"] != "0", seen  # 0: the binding's connect started


def test_the_runtime_api_is_refused_even_on_a_port_the_proxy_would_allow(
        tmp_path: Path, listener: Listener, web: int) -> None:
    seen = reach(tmp_path, listener, web, [web, listener.port])
    assert listener.accepted == 0, f"{listener.accepted} connections arrived at the runtime API: {seen}"
    assert seen["allowed"] == "200 hello", seen
    assert f"refused by policy: 127.0.0.1 port {listener.port} is the Lambda runtime API" in seen["direct"], seen


def test_without_its_launcher_or_undumpable_module_the_runner_runs_no_component_code(tmp_path: Path) -> None:
    """Fail closed: a layer whose launcher is missing, or whose launcher cannot install its filter
    (exit 125), or that cannot make its own process non-dumpable, answers a clear error and runs
    nothing."""
    layer = tmp_path / "layer"  # the runner layer without its launcher
    shutil.copytree(LAMBDA.parent, layer / "src")
    (layer / "node_modules").symlink_to(LAMBDA.parent.parent / "node_modules")  # the bundler's
    made, = invoke(tmp_path, "probe", [{"id": 0, "op": "bundle", "code": CODE, "lock": {}}])
    run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 5000, "account": "account:a",
           "bundle": {"hash": digest(CODE), "sha256": made["result"]["sha256"]}, "event": {"n": 1}}
    (tmp_path / "driver.mjs").write_text(DRIVER)
    (tmp_path / "c").mkdir()

    def answer() -> dict[str, Any]:
        env = {"PATH": "/usr/bin:/bin", "HEADWATER_RUNNER_TMP": str(tmp_path / "c"),
               "LAMBDA_MJS": str(layer / "src" / "lambda.mjs")}
        events = [{"id": 0, "op": "bundle", "code": CODE, "lock": {}}, {**run, "id": 1}]
        proc = subprocess.run([str(Settings().node), str(tmp_path / "driver.mjs"), json.dumps(events)],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        made, ran = json.loads(proc.stdout.strip().splitlines()[-1])
        assert made["ok"], made
        return dict(ran)

    missing = answer()
    assert not missing["ok"] and missing["error"]["code"] == "RUNNER_CRASHED", missing
    assert "seccomp launcher" in missing["error"]["message"] and "missing" in missing["error"]["message"]
    (layer / "launcher").mkdir()
    (layer / "launcher" / "launcher").write_text("#!/bin/sh\necho 'launcher: seccomp filter: EINVAL' >&2\nexit 125\n")
    (layer / "launcher" / "launcher").chmod(0o755)
    shutil.copy2(LAMBDA.parents[1] / "launcher" / "undumpable.node", layer / "launcher" / "undumpable.node")
    failed = answer()
    assert not failed["ok"] and failed["error"]["code"] == "RUNNER_CRASHED", failed
    assert "could not confine" in failed["error"]["message"], failed
    shutil.copy2(LAMBDA.parents[1] / "launcher" / "launcher", layer / "launcher" / "launcher")
    (layer / "launcher" / "undumpable.node").unlink()
    dumpable = answer()  # the launcher, but not the module that makes this process non-dumpable
    assert not dumpable["ok"] and dumpable["error"]["code"] == "RUNNER_CRASHED", dumpable
    assert "non-dumpable" in dumpable["error"]["message"], dumpable
    shutil.copy2(LAMBDA.parents[1] / "launcher" / "undumpable.node", layer / "launcher" / "undumpable.node")
    assert answer()["ok"]  # the whole layer runs it


def test_the_test_only_switches_are_not_in_the_template() -> None:
    template = (LAMBDA.parents[3] / "template.yaml").read_text()
    for name in ("HEADWATER_RUNNER_UNSAFE_NO_LAUNCHER", "HEADWATER_RUNNER_EGRESS_ALLOW_LOOPBACK_PORTS"):
        assert name in LAMBDA.read_text() and name not in template, name


def test_the_runner_sample_is_answered_by_lambda_mjs(tmp_path: Path) -> None:
    """events/runner/describe.json (the other samples: tests/aws/test_sample_events.py)."""
    sample = json.loads((Path(__file__).resolve().parents[3] / "events" / "runner" / "describe.json").read_text())
    answer, = invoke(tmp_path, "sample", [sample])
    assert answer["ok"] and answer["result"]["name"] == "Hello timer", answer




# ---- tenant isolation (docs/aws.md "Tenant isolation") ---------------------------------------------

EVIL = """export default { key: 'doubler', name: 'Doubler', version: '0.0.1', type: 'source', props: {},
  async run(event) { this.$emit({ evil: true }) } }"""


def test_a_bundle_that_does_not_hash_to_its_name_is_not_run_from_the_bucket_or_tmp(tmp_path: Path,
                                                                                 bucket: Bucket) -> None:
    """The bundle bucket and /tmp/bundles are no channel between tenants: a bundle is loaded only if
    its content hashes to its name (the `sha256` its run carries, recorded when it was made). A
    bucket object rewritten after it was made is refused, BUNDLE_CORRUPT, and nothing of it runs; a
    rewritten copy in /tmp is thrown away and the bucket's (good) copy fetched again."""
    made, evil = invoke(tmp_path, "maker", [
        {"id": 1, "op": "bundle", "code": CODE, "lock": {}, "put": bucket.put(digest(CODE))},
        {"id": 2, "op": "bundle", "code": EVIL, "lock": {}, "put": bucket.put(digest(EVIL))}])
    assert made["ok"] and evil["ok"], (made, evil)
    stored = tmp_path / "s3" / "bundles" / f"{digest(CODE)}.cjs"
    good = stored.read_bytes()
    name = hashlib.sha256(good).hexdigest()
    stored.write_bytes((tmp_path / "s3" / "bundles" / f"{digest(EVIL)}.cjs").read_bytes())  # rewritten in the bucket
    run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 5000, "account": "account:a",
           "bundle": {"hash": digest(CODE), "sha256": name, "url": bucket.get(digest(CODE))}, "event": {"n": 21}}
    refused, = invoke(tmp_path, "runner", [{**run, "id": 3}])
    assert not refused["ok"] and refused["error"]["code"] == "BUNDLE_CORRUPT", refused
    assert f"does not hash to its name {name}" in refused["error"]["message"], refused
    assert not (tmp_path / "runner" / "bundles" / f"{name}.cjs").exists()

    stored.write_bytes(good)  # the bucket's copy good again: fetched, kept in /tmp, run
    ran, = invoke(tmp_path, "runner", [{**run, "id": 4}])
    assert ran["ok"] and [e["event"] for e in ran["result"]["emits"]] == [{"doubled": 42}], ran
    kept = tmp_path / "runner" / "bundles" / f"{name}.cjs"
    assert kept.read_bytes() == good
    kept.write_bytes((tmp_path / "s3" / "bundles" / f"{digest(EVIL)}.cjs").read_bytes())
    again, = invoke(tmp_path, "runner", [{**run, "id": 5}])  # a fresh child: the rewritten /tmp copy is not loaded
    assert again["ok"] and [e["event"] for e in again["result"]["emits"]] == [{"doubled": 42}], again
    assert kept.read_bytes() == good and made["result"]["sha256"] == name


TENANT_DRIVER = """const { handler } = await import(process.env.LAMBDA_MJS)
const answers = []
for (const [event, context] of JSON.parse(process.argv[2])) answers.push(await handler(event, context))
console.log(JSON.stringify(answers))
process.exit(0)
"""


def invoke_as(tmp_path: Path, container: str, calls: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    """Invocations of one environment, each with the tenant id Lambda's context gives it."""
    (tmp_path / "tenant-driver.mjs").write_text(TENANT_DRIVER)
    env = {"PATH": "/usr/bin:/bin", "HEADWATER_RUNNER_TMP": str(tmp_path / container), "LAMBDA_MJS": str(LAMBDA)}
    (tmp_path / container).mkdir(exist_ok=True)
    pairs = [[event, {"tenantId": tenant}] for event, tenant in calls]
    proc = subprocess.run([str(Settings().node), str(tmp_path / "tenant-driver.mjs"), json.dumps(pairs)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_an_environment_serves_its_first_tenant_only_and_the_bundler_runs_no_component_code(
        tmp_path: Path, bucket: Bucket) -> None:
    """Lambda gives an environment to one tenant; lambda.mjs holds to it too: it keeps its first
    invocation's tenant and refuses another's, a run of another account than its tenant, and the
    bundle op; the bundler's tenant bundles and runs nothing else."""
    bundle = {"id": 1, "op": "bundle", "code": CODE, "lock": {}, "put": bucket.put(digest(CODE))}
    made, as_bundler = invoke_as(tmp_path, "bundler", [
        (bundle, "bundler"),
        ({"id": 2, "op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 5000, "account": "bundler",
          "bundle": {"hash": digest(CODE), "code": "module.exports = {}"}, "event": {}}, "bundler")])
    assert made["ok"], made
    assert not as_bundler["ok"] and as_bundler["error"]["code"] == "TENANT_REFUSED", as_bundler
    run = {"op": "run", "instance": "dc_1", "props": {}, "timeout_ms": 5000, "event": {"n": 2},
           "bundle": {"hash": digest(CODE), "sha256": made["result"]["sha256"], "url": bucket.get(digest(CODE))}}
    ran, other_tenant, other_account, bundling, again = invoke_as(tmp_path, "a", [
        ({**run, "id": 3, "account": "account:a"}, "account:a"),
        ({**run, "id": 4, "account": "account:b"}, "account:b"),
        ({**run, "id": 5, "account": "account:b"}, "account:a"),
        ({**bundle, "id": 6}, "account:a"),
        ({**run, "id": 7, "account": "account:a"}, "account:a")])
    assert ran["ok"] and again["ok"] and ran["result"]["emits"][0]["event"] == {"doubled": 4}, (ran, again)
    for refused in (other_tenant, other_account, bundling):
        assert not refused["ok"] and refused["error"]["code"] == "TENANT_REFUSED", refused
    assert "serves tenant account:a" in other_tenant["error"]["message"]
    assert "a request of account account:b is refused" in other_account["error"]["message"]
