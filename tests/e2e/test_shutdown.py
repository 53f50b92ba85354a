"""A stopped service leaves nothing behind (issue 32): its runner processes and their cgroups end
with it, frozen or busy, whether it was stopped by a signal to its whole process group (as a
service manager or a script stops it) or killed outright (then its next start reclaims them)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from tests.conftest import Server, client_for, make_server, new_user

CGROUPS = Path("/sys/fs/cgroup")
DEADLINE_S = 60.0
POLL_S = 0.05
T = TypeVar("T")

ECHO = """export default {
  name: "Echo",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit({ seen: event.body }); },
};
"""

# A run that waits on the test's listener, which never answers: in flight as long as the test runs.
HELD_TIMER = """export default {
  name: "Held timer",
  version: "0.0.1",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 1 } } },
  async run() { await fetch("URL"); },
};
"""

pytestmark = pytest.mark.skipif(not (CGROUPS / "freezer").is_dir(), reason="needs the cgroup v1 freezer")


@dataclass(frozen=True)
class Proc:
    pid: int
    started: str  # the kernel's start time: the same pid later is another process

    def alive(self) -> bool:
        fields = _stat(self.pid)
        return fields is not None and fields[19] == self.started and fields[0] != "Z"  # a zombie has ended


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state first), or None: no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def _cgroups(pid: int) -> dict[str, str]:
    """controller -> cgroup path, for each v1 controller the process is in."""
    found = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(","):
            if name and (CGROUPS / name).is_dir():
                found[name] = path
    return found


@dataclass
class Runners:
    """The runner processes below a service process and the cgroup directories they are in (the
    service's own cgroups excluded), each runner's subtree up to the service's."""

    procs: set[Proc]
    dirs: set[Path]
    frozen: int

    @classmethod
    def of(cls, service_pid: int) -> Runners:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (fields := _stat(int(entry))) is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
        own = _cgroups(service_pid)
        procs, dirs, frozen = set(), set(), 0
        stack = list(children.get(service_pid, []))
        while stack:
            pid = stack.pop()
            stack += children.get(pid, [])
            fields = _stat(pid)
            try:
                groups = _cgroups(pid)
            except OSError:
                continue  # gone meanwhile
            if fields is None or fields[0] == "Z":
                continue
            procs.add(Proc(pid, fields[19]))
            for controller, path in groups.items():
                mine = own.get(controller, "/").rstrip("/")
                if path == own.get(controller) or not path.startswith(mine + "/"):
                    continue
                directory = CGROUPS / controller / path.lstrip("/")
                if controller == "freezer" and (directory / "freezer.state").read_text().strip() == "FROZEN":
                    frozen += 1
                while str(directory) != str(CGROUPS / controller / mine.lstrip("/")).rstrip("/"):
                    dirs.add(directory)
                    directory = directory.parent
        return cls(procs, dirs, frozen)

    def left(self) -> tuple[list[Proc], list[Path]]:
        return [p for p in self.procs if p.alive()], sorted(d for d in self.dirs if d.exists())


def wait_for(what: str, check: Callable[[], T | None], deadline_s: float = DEADLINE_S) -> T:
    """Polls `check` until it returns something (not None), with a deadline."""
    end = time.monotonic() + deadline_s
    while (result := check()) is None:
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(POLL_S)
    return result


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback listener that takes connections and never answers them."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(DEADLINE_S)
        yield server


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Server]:
    """A service, not started yet: runs that come from HTTP end after 3 s, so their runner is
    frozen soon after (once its describe's 10 s have passed too); timer runs may last 10 minutes."""
    srv = make_server(tmp_path, HEADWATER_HTTP_TIMEOUT_MS="3000", HEADWATER_TIMER_TIMEOUT_MS="600000",
                      HEADWATER_REGISTRY_DIR=str(tmp_path / "no-registry"))  # a faster start: none to publish
    try:
        yield srv
    finally:
        if srv.process is not None and srv.process.poll() is None:
            srv.process.terminate()  # it ends its runners (killed, it would leave them to a next start)
            try:
                srv.process.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                srv.process.kill()
                srv.process.wait(timeout=30)


def frozen_and_busy_runners(srv: Server, listener: socket.socket) -> tuple[Runners, list[socket.socket]]:
    """Two accounts' runners: one frozen after its run, one in the middle of a long run."""
    assert srv.process is not None
    with client_for(srv, new_user(srv, tier="paid").api_key) as api:
        r = api.post("/sources", json={"component_code": ECHO})
        assert r.status_code == 200, r.text
        source = r.json()["data"]
        sent = httpx.post(source["configured_props"]["http"]["endpoint_url"], json={"n": 1}, timeout=30)
        assert sent.status_code == 200, sent.text
        summaries = f"/sources/{source['id']}/event_summaries"
        wait_for("the echo run's event", lambda: api.get(summaries).json()["data"] or None)
    port = listener.getsockname()[1]
    with client_for(srv, new_user(srv, tier="paid").api_key) as api:
        r = api.post("/sources", json={"component_code": HELD_TIMER.replace("URL", f"http://127.0.0.1:{port}/")})
        assert r.status_code == 200, r.text
    held = [listener.accept()[0]]  # the timer's run is in flight, waiting for an answer
    pid = srv.process.pid
    runners = wait_for("a frozen runner beside a busy one",
                       lambda: found if (found := Runners.of(pid)).frozen >= 1 else None)
    assert len(runners.procs) >= 2 and runners.dirs, runners
    return runners, held


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_services_group_ends_its_runners_frozen_or_busy(
        service: Server, listener: socket.socket, sig: signal.Signals) -> None:
    service.own_process_group = True  # as a service manager starts one
    service.start()
    runners, held = frozen_and_busy_runners(service, listener)
    assert service.process is not None
    os.killpg(service.process.pid, sig)  # the service and, were they in its group, its runners
    try:
        service.process.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the service did not exit within {DEADLINE_S} s of {sig.name}")
    procs, dirs = runners.left()
    assert procs == [] and dirs == [], f"left behind: processes {procs}, cgroups {dirs}"
    for conn in held:
        conn.close()


def occupy(pid: int) -> subprocess.Popen | None:
    """A process of the given pid, as after a container's restart, where the same pids come again
    (the kernel's last pid is set just below it, until no other process took it first); None
    where the next pid cannot be chosen (root in the initial pid namespace only)."""
    last_pid = Path("/proc/sys/kernel/ns_last_pid")
    for _ in range(200):
        try:
            last_pid.write_text(str(pid - 1))
        except OSError:
            return None
        proc = subprocess.Popen(["sleep", "600"])
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


def test_the_next_start_reclaims_what_a_killed_service_left(service: Server, listener: socket.socket) -> None:
    """Even once the dead service's pid is another process's (where that can be arranged: started
    in the test's process group, as a script may start it, the service leads no group, so its
    pid is free as soon as it is dead, its runners living on)."""
    service.start()
    runners, held = frozen_and_busy_runners(service, listener)
    assert service.process is not None
    service.process.kill()  # as the kernel's OOM killer would: no chance to clean up
    service.process.wait(timeout=30)
    placeholder = occupy(service.process.pid)
    try:
        service.start()  # the same data dir
        procs, dirs = runners.left()
        assert procs == [] and dirs == [], f"left behind: processes {procs}, cgroups {dirs}"
    finally:
        if placeholder is not None:
            placeholder.kill()
            placeholder.wait()
        for conn in held:
            conn.close()
