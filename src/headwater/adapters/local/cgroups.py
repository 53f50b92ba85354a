"""A cgroup per runner process, so the kernel bounds what one account's code can take.

V8's heap limits cover only the JavaScript heap of each worker thread: Buffers, ArrayBuffers,
threads and /tmp (a tmpfs, charged to the writer) are outside them. A cgroup counts all of it:
`memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, so swap is no way around it) makes
the kernel kill the runner that goes past its cap, and `pids.max` bounds its threads. The cgroups
live under the service's own cgroup, in a `headwater-<pid>` directory per service process; those
of services that died are removed at the next start. cgroup v1 (memory, pids, cpu controllers).

Two more controllers let the service judge a runner from outside, whatever it says of itself:
`cpuacct` measures the CPU its process tree used (billed to the account), and `freezer` stops
every thread in it once its calls are over and their time is up (nothing a run started outlives
the run's limit, even if the runner said the run had ended).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path

log = logging.getLogger("headwater.runner")

MOUNT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "freezer")
OPTIONAL = frozenset({"cpu", "cpuacct", "freezer"})  # without them: no fair share, no CPU bill, no freeze


class CgroupUnavailable(RuntimeError):
    """Runner cgroups cannot be made here (no v1 controllers, or no permission)."""


def _own_path(controller: str) -> str:
    """This process's cgroup path in a v1 hierarchy (from /proc/self/cgroup)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    raise CgroupUnavailable(f"the {controller} controller is not mounted (cgroup v1)")


def _write(path: Path, value: str) -> None:
    path.write_text(value)


class RunnerCgroup:
    """One runner process's cgroup in each controller."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs

    def enter(self) -> None:
        """Moves the calling process in (called in the child between fork and exec, so the
        runner and everything it starts are counted from its first allocation)."""
        pid = str(os.getpid()).encode()
        for directory in self.dirs.values():
            fd = os.open(directory / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def oom_kills(self) -> int:
        """How many processes the kernel killed in here for going past the memory cap."""
        memory = self.dirs.get("memory")
        if memory is None:
            return 0
        try:
            text = (memory / "memory.oom_control").read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        with contextlib.suppress(OSError, ValueError):
            return int((memory / "memory.failcnt").read_text())  # older kernels: the cap was hit
        return 0

    def cpu_ns(self) -> int | None:
        """CPU time used by everything in here so far, in nanoseconds (None: not measured)."""
        cpuacct = self.dirs.get("cpuacct")
        if cpuacct is None:
            return None
        try:
            return int((cpuacct / "cpuacct.usage").read_bytes())
        except (OSError, ValueError):
            return None

    @property
    def can_freeze(self) -> bool:
        return "freezer" in self.dirs

    def freeze(self) -> None:
        """Stops every thread inside until `thaw` (timers, loops and sockets included)."""
        freezer = self.dirs.get("freezer")
        if freezer is not None:
            with contextlib.suppress(OSError):
                _write(freezer / "freezer.state", "FROZEN")

    def thaw(self) -> None:
        freezer = self.dirs.get("freezer")
        if freezer is not None:
            with contextlib.suppress(OSError):
                _write(freezer / "freezer.state", "THAWED")

    def kill_all(self) -> None:
        """SIGKILL whatever is still inside (a sandbox whose init did not take it down); a frozen
        task dies only once thawed, so the cgroup is thawed after the signals."""
        for directory in self.dirs.values():
            with contextlib.suppress(OSError):
                for pid in (directory / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
        self.thaw()

    def remove(self) -> None:
        for directory in self.dirs.values():
            with contextlib.suppress(OSError):
                directory.rmdir()


class CgroupRoot:
    """This service's directory in each controller, parent of the runners' cgroups."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs
        self._count = 0

    @classmethod
    def create(cls, mount: Path = MOUNT) -> CgroupRoot:
        dirs: dict[str, Path] = {}
        for controller in CONTROLLERS:
            try:
                parent = mount / controller / _own_path(controller).lstrip("/")
            except (OSError, CgroupUnavailable):
                if controller in OPTIONAL:
                    continue  # memory and pids are the limits; the others make it fairer
                raise CgroupUnavailable(f"no cgroup v1 {controller} controller under {mount}") from None
            _sweep_stale(parent)
            directory = parent / f"headwater-{os.getpid()}"
            try:
                directory.mkdir(exist_ok=True)
            except OSError as e:
                if controller in OPTIONAL:
                    continue
                raise CgroupUnavailable(f"cannot create {directory}: {e.strerror}") from None
            dirs[controller] = directory
        return cls(dirs)

    def runner(self, memory_mb: int, max_tasks: int) -> RunnerCgroup:
        """A fresh cgroup for one runner process (fresh, so its OOM count starts at zero)."""
        self._count += 1
        dirs = {c: d / f"runner-{self._count}" for c, d in self.dirs.items()}
        for directory in dirs.values():
            directory.mkdir(exist_ok=True)
        limit = str(memory_mb * 1024 * 1024)
        memory = dirs["memory"]
        _write(memory / "memory.limit_in_bytes", limit)
        if (memory / "memory.memsw.limit_in_bytes").exists():
            with contextlib.suppress(OSError):  # swap accounting may be off
                _write(memory / "memory.memsw.limit_in_bytes", limit)
        _write(dirs["pids"] / "pids.max", str(max_tasks))
        return RunnerCgroup(dirs)

    def close(self) -> None:
        for directory in self.dirs.values():
            for child in directory.glob("runner-*"):
                with contextlib.suppress(OSError):
                    child.rmdir()
            with contextlib.suppress(OSError):
                directory.rmdir()


def _sweep_stale(parent: Path) -> None:
    """Removes the cgroups of service processes that are gone. A service killed outright leaves
    its runners behind, and a frozen one would never die of the kernel's parent-death signal: what
    is still inside is killed (and thawed, so that it can die) first."""
    for directory in parent.glob("headwater-*"):
        pid = directory.name.removeprefix("headwater-")
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        for child in directory.glob("runner-*"):
            RunnerCgroup({"stale": child}).kill_all()
            if (child / "freezer.state").exists():
                with contextlib.suppress(OSError):
                    _write(child / "freezer.state", "THAWED")
            with contextlib.suppress(OSError):
                child.rmdir()
        with contextlib.suppress(OSError):
            directory.rmdir()
