"""Helpers for every layer: the repository's paths, and a real service on loopback (real SQLite,
real Node runner processes) with its users and checked API clients, for tests/e2e/ (its fixtures
are in tests/e2e/conftest.py) and for bench/."""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from headwater.services.registry import SHIPPED_MARKER
from tests.openapi_conformance import Conformance

ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = Path(__file__).parent / "components"
HEADWATER = [sys.executable, "-m", "headwater.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    base_url: str
    data_dir: Path
    port: int
    env: dict[str, str]
    process: subprocess.Popen | None = None
    own_process_group: bool = False  # started as a service manager would: a group of its own to signal
    admin: AdminWorker | None = None

    def cli(self, *args: str, check: bool = True) -> dict:
        """Runs `headwater <args> --data-dir D --json` and returns its JSON output (the account verbs
        in the service's warm admin worker, tests/admin_worker.py; the others in a process each)."""
        argv = [*args, "--data-dir", str(self.data_dir), "--json"]
        if tuple(args[:2]) in ACCOUNT_VERBS:
            if self.admin is None:
                self.admin = AdminWorker(self.env, self.data_dir / "admin-worker.log")
            proc = self.admin.run(argv)
        else:
            proc = subprocess.run([*HEADWATER, *argv], capture_output=True, text=True, env=self.env, timeout=300)
        if check and proc.returncode != 0:
            raise AssertionError(f"headwater {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return json.loads(proc.stdout or proc.stderr.strip().splitlines()[-1])

    def start(self) -> None:
        log = open(self.data_dir / "server.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen([*HEADWATER, "serve"], env=self.env, stdout=log, stderr=log,
                                        process_group=0 if self.own_process_group else None)
        deadline = time.monotonic() + 180  # a server starting beside a busy suite on 2 cores
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited: {(self.data_dir / 'server.log').read_text()[-3000:]}")
            try:
                if httpx.get(self.base_url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError("server did not answer /healthz within 180 s")

    def stop(self, kill: bool = False) -> None:
        if self.admin:
            self.admin.close()
            self.admin = None
        if self.process and self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            self.process.wait(timeout=30)

    def restart(self) -> None:
        self.stop()
        self.start()


ACCOUNT_VERBS = {("users", "create"), ("orgs", "create"), ("orgs", "add-member"), ("keys", "create"),
                 ("keys", "revoke"), ("workflows", "deploy"), ("workflows", "list")}


class AdminWorker:
    """`headwater`'s account verbs for one service in one warm process (tests/admin_worker.py): a new
    `headwater` process costs about a second of a core, and nearly every end-to-end test makes a user."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        with open(log, "ab") as log_file:
            self.process = subprocess.Popen([sys.executable, "-m", "tests.admin_worker"], env=env, cwd=ROOT,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file,
                                            text=True)
        self.lock = threading.Lock()

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        assert self.process.stdin and self.process.stdout
        with self.lock:
            self.process.stdin.write(json.dumps(argv) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        if not line:
            raise AssertionError(f"the admin worker exited ({self.process.poll()}): see its log")
        answer = json.loads(line)
        return subprocess.CompletedProcess(argv, answer["returncode"], answer["stdout"], answer["stderr"])

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


BOTH_MODES = ["local", "aws-emulated"]


def make_server(data_dir: Path, *, publish_at_start: bool = False, **extra_env: str) -> Server:
    """A service on a new port. In a test session a new local data dir starts as a copy of one where
    the shipped registry is published (RegistryTemplate), unless `publish_at_start`."""
    if _registry_template is not None and not publish_at_start:
        _registry_template.copy_into(data_dir, extra_env)
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")},
        "HEADWATER_PORT": str(port),
        "HEADWATER_HOST": "127.0.0.1",
        "HEADWATER_DATA_DIR": str(data_dir),
        # no ingest budget: a test's (or bench's) requests are not throttled unless it asks for one
        "HEADWATER_INGEST_RATE": "0",
        # one serving process: a test's server is one process it can look into and signal;
        # tests/e2e/test_processes.py runs several
        "HEADWATER_PROCESSES": "1",
        **extra_env,
    }
    return Server(base_url=f"http://127.0.0.1:{port}", data_dir=data_dir, port=port, env=env)


@contextmanager
def running_server(data_dir: Path, *, publish_at_start: bool = False, **extra_env: str) -> Iterator[Server]:
    """A private service (own data dir and settings) for the tests of one module."""
    srv = make_server(data_dir, publish_at_start=publish_at_start, **extra_env)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


# Settings that govern runs, requests, deliveries and limits, never how the shipped registry is
# bundled, described or stored: a server with only these of its own may start from the template. Any
# other (the backend, the runner's, describe's or the bundler's settings, PATH) publishes for itself.
TEMPLATE_SAFE_SETTINGS = {
    "HEADWATER_HTTP_TIMEOUT_MS", "HEADWATER_TIMER_TIMEOUT_MS", "HEADWATER_HOOK_TIMEOUT_MS",
    "HEADWATER_RUN_MEMORY_MB", "HEADWATER_WEBHOOK_RETRY_SCHEDULE", "HEADWATER_INGEST_RATE",
    "HEADWATER_INGEST_BURST", "HEADWATER_PROCESSES", "HEADWATER_FREE_DAILY_INVOCATIONS",
    "HEADWATER_FREE_DAILY_COMPUTE_MS", "HEADWATER_HTTP_MAX_BODY_BYTES", "HEADWATER_SMTP_URL",
    "HEADWATER_EMAIL_FROM", "HEADWATER_ACCOUNT_MAX_CONCURRENT_RUNS", "HEADWATER_TENANT_REQUEST_WAIT_S",
    "HEADWATER_TASK_WORKERS", "HEADWATER_METRICS_SOURCES", "HEADWATER_METRICS_TOKEN",
    "HEADWATER_OAUTH_TOKEN_TIMEOUT_S", "HEADWATER_STALL_CHECK_S", "HEADWATER_STALL_MIN_LOOK_S",
    "HEADWATER_TICK_GRACE_S", "HEADWATER_URL_FETCH_TIMEOUT_S", "HEADWATER_EMULATED_SCHEDULE_S",
}
# What a service makes for itself at each start, or keeps to itself: not copied from the template.
NOT_TEMPLATED = {"secret.key", "server.log", "admin-worker.log", "run", "tmp", "headwater.db.leases",
                 "headwater.db.writer-lock", "headwater.db-shm", "headwater.db-wal"}


class RegistryTemplate:
    """A local data dir where a real `headwater serve` published the shipped registry (bundled and
    described by Node: about 4 s of CPU a start), made once per test process, when first needed. A
    new local test server starts from a copy of it (its database, bundles and the registry's
    fingerprint, not its secret key), so its start finds the registry published and unchanged, as
    a restart does. tests/e2e/test_registry.py starts a server that publishes for itself."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: Path | None = None
        self.failed = False
        self.lock = threading.Lock()

    def copy_into(self, data_dir: Path, extra_env: dict[str, str]) -> None:
        own = {k for k, v in extra_env.items() if (k, v) != ("HEADWATER_BACKEND", "local")}  # the default
        if not own <= TEMPLATE_SAFE_SETTINGS or (data_dir.exists() and any(data_dir.iterdir())):
            return
        template = self.make()
        if template is None:  # its publish failed (in the test that first asked): each publishes itself
            return
        data_dir.mkdir(parents=True, exist_ok=True)
        for path in template.iterdir():
            if path.name in NOT_TEMPLATED:
                continue
            if path.is_dir():
                shutil.copytree(path, data_dir / path.name)
            else:
                shutil.copy2(path, data_dir / path.name)

    def make(self) -> Path | None:
        with self.lock:
            if self.made is None and not self.failed:
                self.failed = True  # until it is made
                self.root.mkdir()
                srv = make_server(self.root, publish_at_start=True)
                srv.start()
                srv.stop()
                assert (self.root / SHIPPED_MARKER).exists(), (self.root / "server.log").read_text()[-3000:]
                with closing(sqlite3.connect(self.root / "headwater.db")) as db:  # its WAL into the file
                    busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                assert busy == 0, "the template's database is still in use"
                self.made, self.failed = self.root, False
            return self.made


_registry_template: RegistryTemplate | None = None  # set for a test session (make_server outside one: none)


@pytest.fixture(scope="session", autouse=True)
def registry_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryTemplate]:
    global _registry_template
    _registry_template = RegistryTemplate(tmp_path_factory.getbasetemp() / "registry-template")
    try:
        yield _registry_template
    finally:
        _registry_template = None


@pytest.fixture(scope="session")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The local service with default settings, one for every module of a test process (tests/e2e
    and tests/security) that needs no settings of its own; each test uses users of its own."""
    with running_server(tmp_path_factory.mktemp("headwater")) as srv:
        yield srv


@pytest.fixture(scope="session")
def aws_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The AWS deployment emulated (HEADWATER_BACKEND=aws-emulated): the same HTTP interface,
    every request through the Lambda handler template.yaml routes it to, moto behind them (and
    template.yaml's settings, HEADWATER_SSE_MAX_S too). Shared as `local_server` is."""
    with running_server(tmp_path_factory.mktemp("headwater-aws"), HEADWATER_BACKEND="aws-emulated") as srv:
        yield srv


class Gate:
    """A loopback listener that holds every request until the test releases it: a component that
    `await fetch(gate.url)` is mid-run for as long as the test wants, with no sleep on either side."""

    def __init__(self) -> None:
        self.arrivals = 0
        self.arrived = threading.Event()
        self.released = threading.Event()
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                gate.arrivals += 1
                gate.arrived.set()
                gate.released.wait(300)
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def gate() -> Iterator[Gate]:
    held = Gate()
    try:
        yield held
    finally:
        held.close()


@dataclass
class User:
    id: str
    api_key: str
    username: str


def new_user(server: Server, tier: str = "free") -> User:
    name = "u" + uuid.uuid4().hex[:12]
    created = server.cli("users", "create", "--username", name, "--email", f"{name}@example.com", "--tier", tier)
    return User(id=created["id"], api_key=created["api_key"], username=name)


_DOCUMENTS: dict[str, Conformance] = {}


def conformance(server: Server) -> Conformance:
    """The server's /openapi.json as a checker of its answers, fetched once per server."""
    if server.base_url not in _DOCUMENTS:
        _DOCUMENTS[server.base_url] = Conformance(httpx.get(server.base_url + "/openapi.json", timeout=60).json())
    return _DOCUMENTS[server.base_url]


def client_for(server: Server, api_key: str | None) -> httpx.Client:
    """An API client whose every answer is checked against the server's own OpenAPI document."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=server.base_url + "/v1", headers=headers, timeout=120,
                        event_hooks={"response": [conformance(server).check]})


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    checked = sum(c.checked for c in _DOCUMENTS.values())
    if checked:
        terminalreporter.write_line(f"openapi: {checked} API answers validated against /openapi.json")


# The modules that took 30 s or more of a test process in a full run (pytest -n 2 --durations=300, the
# 300 longest phases summed per module, 2026-11-29 on a busy machine), slowest first. With two test
# processes and a module to a process, a slow module that starts last is the run's tail, with one
# core idle: they start first, the many short ones fill in. tests/aws/test_artifacts.py (one `sam
# build`, 160 s) and tests/aws/test_template.py (cfn-lint and `sam validate --lint`, 130 s) were
# missing: they ran wherever their test count put them.
SLOWEST_MODULES = [
    "tests/aws/test_artifacts.py", "tests/e2e/test_fuzz.py", "tests/security/test_compute_billing.py",
    "tests/e2e/test_durability.py", "tests/aws/test_template.py", "tests/e2e/test_routing.py",
    "tests/e2e/aws/test_aws_cost.py", "tests/e2e/test_bench_smoke.py", "tests/e2e/test_console.py",
    "tests/e2e/test_health.py", "tests/e2e/test_run_records.py",
    "tests/e2e/test_runs.py", "tests/e2e/test_processes.py", "tests/e2e/test_shutdown.py",
    "tests/security/test_tenant_output.py", "tests/e2e/test_http_requests.py",
    "tests/e2e/security/test_boundary.py", "tests/e2e/test_timers.py", "tests/e2e/test_api_basics.py",
    "tests/security/test_metrics.py", "tests/security/test_sse_access.py", "tests/e2e/test_sse.py",
    "tests/e2e/aws/test_black_box.py", "tests/e2e/test_workflows.py", "tests/cli/test_cli_offline.py",
    "tests/e2e/test_registry_scale.py", "tests/e2e/security/test_egress.py",
    "tests/security/test_runner_call_share.py", "tests/e2e/aws/test_runner_lambda.py",
    "tests/e2e/security/test_limits.py", "tests/e2e/security/test_files.py", "tests/e2e/test_destinations.py",
    "tests/e2e/test_http_interface.py", "tests/e2e/test_oauth.py", "tests/e2e/security/test_isolation.py",
    "tests/security/test_oauth_fair_share.py", "tests/e2e/test_readme.py", "tests/contract/test_scheduler_aws.py",
    "tests/security/test_request_share.py", "tests/security/test_tenant_share.py",
    "tests/e2e/test_ingest_budget.py", "tests/e2e/test_registry_republish.py", "tests/e2e/test_cli_develop.py",
    "tests/contract/test_dynamodb_store.py", "tests/contract/test_store_events.py",
    "tests/e2e/test_connected_accounts.py", "tests/e2e/security/test_endpoint_origin.py",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest modules first, then the others by their number of tests (xdist's own order), each
    module's tests in their order. And `@pytest.mark.local_only(reason)`: a guarantee the AWS deployment
    does not give (docs/aws.md, Limits), so its aws-emulated run is skipped with that reason."""
    counts: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        counts[module] = counts.get(module, 0) + 1
    rank = {module: i for i, module in enumerate(SLOWEST_MODULES)}

    def order(item: pytest.Item) -> tuple[int, int]:
        module = item.nodeid.split("::")[0]
        return (rank.get(module, len(rank)), -counts[module] if module not in rank else 0)

    items.sort(key=order)  # stable: a module's tests keep their order, and modules of equal count theirs
    for item in items:
        marker = item.get_closest_marker("local_only")
        if marker and "aws-emulated" in item.name:
            item.add_marker(pytest.mark.skip(reason=f"not on AWS: {marker.args[0]}"))


def ended(pid: int) -> bool:
    """Waits (30 s at most) for the process to end: its pidfd turns readable when it has. A killed
    process may take a moment to die, and nothing of it runs meanwhile."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 30)[0])
    finally:
        os.close(fd)
