"""How a runner process starts: inside its sandbox (or, unsafe, directly), in its own cgroup, with
its own egress directory and private /tmp, dying with the service."""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import signal
import subprocess
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.adapters.local.cgroups import CgroupRoot, CgroupUnavailable, RunnerCgroup
from headwater.adapters.local.egress import EgressProxy
from headwater.adapters.local.package_store import PACKAGES, store_dir
from headwater.adapters.local.runner_io import LineSplitter
from headwater.adapters.local.sandbox import EGRESS, RUNNER, TMP, Bind, Sandbox
from headwater.ports import RunnerError
from headwater.settings import Settings

if TYPE_CHECKING:
    from headwater.adapters.local.runner_process import Call

log = logging.getLogger("headwater.runner")

_PR_SET_PDEATHSIG = 1
_EXTRA_CA = "/etc/headwater-extra-ca.pem"
_SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="runner-spawner")


def _die_with_parent() -> None:
    """Linux: the kernel kills the runner when the service dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def runner_command(settings: Settings, runner: str, tmp: str, packages: str | None = None) -> list[str]:
    """The runner process's command line, with the runner's folder at `runner`, its /tmp at `tmp`
    and the shared package store (read only) at `packages`."""
    node = f"{runner}/{settings.node.relative_to(settings.runner_dir)}"
    store = [f"--allow-fs-read={packages}"] if packages else []
    return [node, "--permission", "--allow-worker", f"--allow-fs-read={runner}", f"--allow-fs-read={tmp}", *store,
            f"--allow-fs-write={tmp}", "--disable-warning=SecurityWarning", f"{runner}/src/stdio.mjs"]


def package_store_bind(settings: Settings) -> Bind:
    """The shared package store as every runner sandbox has it: read-only, so that no component can
    change the code another one loads (adapters/local/package_store.py)."""
    packages = store_dir(settings.data_dir)
    packages.mkdir(parents=True, exist_ok=True)
    return Bind(packages, PACKAGES)


@dataclass
class Launched:
    """One start of a runner process: its calls in flight, and what to clean up once it exited."""

    proc: subprocess.Popen
    name: str
    cgroup: RunnerCgroup | None
    pending: dict[int, Call] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False
    frozen: bool = False
    failure: RunnerError | None = None  # why the supervisor ended it
    cpu_mark_ns: int = 0  # the cgroup's CPU time when the process's use was last billed
    billed_at: float = 0.0  # when (monotonic) that was
    quiet_at: float = 0.0  # when every call sent so far is past its limit
    quiesce_due: float = 0.0  # when the freeze check is next due (0: none scheduled)
    lines: LineSplitter | None = None
    backlog: deque[bytes] = field(default_factory=deque)  # request bytes the pipe could not take yet
    flushing: bool = False  # a thread is writing the backlog
    parsing: deque[bytes | None] = field(default_factory=deque)  # lines for the thread, in order
    broken: bool = False  # it broke the protocol: what else it writes is not read


class Launcher:
    """How a runner process starts: inside its sandbox (or, unsafe, directly), in its own cgroup,
    with its own egress directory and private /tmp."""

    def __init__(self, settings: Settings, sandbox: Sandbox | None, cgroups: CgroupRoot | None,
                 egress: EgressProxy) -> None:
        self.settings = settings
        self.sandbox = sandbox
        self.cgroups = cgroups
        self.egress = egress
        self._names = itertools.count(1)

    def start(self, account: str) -> Launched:
        name = f"r{next(self._names)}"
        egress_dir = self.egress.open(name)
        cgroup = (self.cgroups.runner(self.settings.runner_memory_mb, self.settings.runner_max_tasks)
                  if self.cgroups else None)
        packages = package_store_bind(self.settings)
        if self.sandbox is not None:
            env = {"PATH": "/usr/bin:/bin", "TMPDIR": TMP, "HOME": TMP, "HEADWATER_EGRESS_DIR": EGRESS,
                   "HEADWATER_PACKAGE_STORE": PACKAGES}
            extra = [packages]
            ca = os.environ.get("NODE_EXTRA_CA_CERTS", "")
            if ca and Path(ca).is_file():  # the operator's extra CA (a TLS-inspecting proxy) holds inside too
                extra.append(Bind(Path(ca), _EXTRA_CA))
                env["NODE_EXTRA_CA_CERTS"] = _EXTRA_CA
            command = self.sandbox.runner(self.settings.runner_dir, egress_dir, self.settings.runner_memory_mb << 20,
                                          runner_command(self.settings, RUNNER, TMP, PACKAGES), env, extra)
            cwd, popen_env = self.settings.runner_dir, None
        else:
            tmp = self.settings.data_dir / "tmp" / f"runner-{name}"
            tmp.mkdir(parents=True, exist_ok=True)
            command = runner_command(self.settings, str(self.settings.runner_dir), str(tmp), str(packages.host))
            cwd, popen_env = tmp, {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp), "HEADWATER_EGRESS_DIR": str(egress_dir),
                                   "HEADWATER_PACKAGE_STORE": str(packages.host)}

        def prepare() -> None:
            if cgroup is not None:
                cgroup.enter()
            _die_with_parent()

        try:
            # Started from one long-lived thread: the kernel's parent-death signal follows the
            # thread that forked, and a request's worker thread may end while the runner lives on.
            # In a session of its own: a signal to the service's process group (a service manager
            # stopping it, Ctrl-C) is the service's to act on; it ends its runners itself, thawed.
            proc = _SPAWNER.submit(subprocess.Popen, command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, cwd=cwd, env=popen_env, preexec_fn=prepare,
                                   start_new_session=True).result()
        except OSError:
            self.stopped(name, cgroup)
            raise
        assert proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)  # a runner that stops reading cannot hold a writer
        log.debug("runner %s started for %s (pid %d)", name, account, proc.pid)
        return Launched(proc, name, cgroup)

    def stopped(self, name: str, cgroup: RunnerCgroup | None) -> None:
        """After a runner process exited: its egress directory and cgroup go."""
        self.egress.close_runner(name)
        if cgroup is not None:
            cgroup.kill_all()
            cgroup.remove()


def cgroups_for(settings: Settings, sandbox: Sandbox | None) -> CgroupRoot | None:
    if sandbox is None:
        return None
    try:
        return CgroupRoot.create(settings.data_dir / "run")
    except CgroupUnavailable as e:
        log.warning("runner processes run without a cgroup (%s): their memory and threads are bounded only "
                    "per worker by V8, not per process by the kernel, and work left after a run is not frozen", e)
        return None
