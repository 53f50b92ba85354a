"""Threats 2 and 4: killing the service (or pid 1) from a run; one account crashing the runner
that others' runs are on."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.metrics import node_descendants
from headwater.ports import Instance
from headwater.settings import Settings
from tests.conftest import Server
from tests.e2e.security.conftest import Account, assert_healthy, source_code


def test_killing_the_parent_and_pid_1_fails_and_the_service_stays_up(guarded: Server) -> None:
    source = Account(guarded).deploy("kill_parent.mjs")
    for _ in range(2):  # a queued retry would try again: it fails again
        seen = source.run({})
        assert seen["ppid"] == 1, seen  # its parent is the sandbox's own init, not the service
        assert_healthy(guarded)
    assert source.events("$errors") == []  # the runner itself survived too: no crash recorded


class Gate:
    """A loopback listener that holds every request until released: runs that fetch it are in
    flight, provably, until the test lets them finish."""

    def __init__(self, expected: int) -> None:
        self.arrived = threading.Semaphore(0)
        self.release = threading.Event()
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                gate.arrived.release()
                gate.release.wait(60)
                body = b"released"
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int) -> None:
        for _ in range(count):
            assert self.arrived.acquire(timeout=30), "the runs never reached the listener"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate(3)
    yield g
    g.close()


def test_a_crashing_account_fails_only_its_own_runs(lenient: Server, gate: Gate) -> None:
    account = Account(lenient)
    # a source runs one run at a time, and a tenant has at most its share (2 by default) of queued runs in hand
    bystanders = [account.deploy("hold_connection.mjs") for _ in range(2)]
    crasher = Account(lenient).deploy("crash_runner.mjs")
    for n, source in enumerate(bystanders):
        source.send({"url": gate.url, "n": n})
    gate.wait_for(2)  # both of the bystander's runs are in flight, in their account's runner
    crasher.send({})
    error = crasher.first_error()
    assert error["code"] == "RUNNER_CRASHED", error
    gate.release.set()
    for n, source in enumerate(bystanders):
        assert source.first_event() == {"n": n, "answer": "released"}
        assert source.events("$errors") == []
    assert_healthy(lenient)
    # the crashed account's runner starts again for its next run
    crasher.send({})
    crasher.wait(lambda events: len(events) >= 2, "a second crash recorded", "$errors")
    assert_healthy(lenient)


def test_live_runners_are_bounded_and_each_has_its_kernel_cap(tmp_path: Path) -> None:
    """Three accounts, room for two runner processes: the least recently used one is stopped;
    each live one is in its own cgroup with the configured memory cap."""
    settings = Settings(data_dir=tmp_path, runner_processes=2, runner_memory_mb=300)
    bundler, pool = LocalBundler(settings), NodeRunnerPool(settings)
    others = {pid for pid, _ in node_descendants(os.getpid())}  # runners of servers other tests left up
    try:
        bundle = bundler.bundle(source_code("kill_parent.mjs"))
        for account in ("a", "b", "c"):
            result = pool.run(bundle, Instance(id=f"dc_{account}", props={}, account=account), {"body": {}}, 10_000)
            assert result.error is None and result.emits[0].event["ppid"] == 1
        deadline = time.monotonic() + 30
        while len(runners := [r for r in node_descendants(os.getpid()) if r[0] not in others]) > 2:
            assert time.monotonic() < deadline, runners
            time.sleep(0.05)
        assert len(runners) == 2
        caps = set()
        for pid, _ in runners:
            memory = next(line.split(":", 2)[2] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                          if ":memory:" in line)
            caps.add((Path("/sys/fs/cgroup/memory") / memory.lstrip("/") / "memory.limit_in_bytes").read_text().strip())
        assert caps == {str(300 * 1024 * 1024)}
    finally:
        pool.close()
