"""A cgroup per runner process, so the kernel bounds what one account's code can take.

V8's heap limits cover only the JavaScript heap of each worker thread: Buffers, ArrayBuffers,
threads and /tmp (a tmpfs, charged to the writer) are outside them. A cgroup counts all of it:
`memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, so swap is no way around it) makes
the kernel kill the runner that goes past its cap, and `pids.max` bounds its threads. The cgroups
live under the service's own cgroup, in a `headwater-<pid>-<random>` subtree per service process,
which that process claims in its data directory (`run/cgroup-<subtree>.lock`, locked with flock as
long as it lives). It ends its runners and removes its subtree when it stops; a process killed
outright cannot, so each start ends and removes the subtrees of this data directory whose claim
no process holds (never a live sibling's, nor another data directory's). cgroup v1 (memory,
pids, cpu controllers).

Two more controllers let the service judge a runner from outside, whatever it says of itself:
`cpuacct` measures the CPU its process tree used (billed to the account), and `freezer` stops
every thread in it once its calls are over and their time is up (nothing a run started outlives
the run's limit, even if the runner said the run had ended).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

log = logging.getLogger("headwater.runner")

MOUNT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "freezer")
OPTIONAL = frozenset({"cpu", "cpuacct", "freezer"})  # without them: no fair share, no CPU bill, no freeze
END_TIMEOUT_S = 10.0  # how long ending a cgroup's processes may take before it is left for the next start
_POLL_S = 0.02


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
        self._cpu_fd: int | None = None  # cpuacct.usage kept open: read twice per runner call

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
            if self._cpu_fd is None:
                self._cpu_fd = os.open(cpuacct / "cpuacct.usage", os.O_RDONLY | os.O_CLOEXEC)
            # the kernel makes the text again for each read at offset 0: a fraction of open-read-close
            return int(os.pread(self._cpu_fd, 64, 0))
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
        if self._cpu_fd is not None:
            os.close(self._cpu_fd)
            self._cpu_fd = None
        for directory in self.dirs.values():
            with contextlib.suppress(OSError):
                directory.rmdir()


class Claim:
    """A service process's claim on its cgroup subtree: a file in the data directory's `run/`
    that names the subtree's directories, locked (flock) as long as the process lives. The kernel
    drops the lock when the process dies, however it dies: an unlocked claim is a leftover."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def record(self, directory: Path) -> None:
        """Called before `directory` is made, so a process killed at any point left no cgroup unnamed."""
        os.write(self._fd, f"{directory}\n".encode())

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self._fd)


class CgroupRoot:
    """This service process's directory in each controller, parent of the runners' cgroups."""

    def __init__(self, dirs: dict[str, Path], claim: Claim | None = None) -> None:
        self.dirs = dirs
        self.claim = claim
        self._count = 0

    @classmethod
    def create(cls, run_dir: Path, mount: Path = MOUNT) -> CgroupRoot:
        """Reclaims what service processes of this data directory (`run_dir` is its `run/`) left,
        then makes and claims this process's subtree."""
        parents: dict[str, Path] = {}
        for controller in CONTROLLERS:
            try:
                parents[controller] = mount / controller / _own_path(controller).lstrip("/")
            except (OSError, CgroupUnavailable):
                if controller in OPTIONAL:
                    continue  # memory and pids are the limits; the others make it fairer
                raise CgroupUnavailable(f"no cgroup v1 {controller} controller under {mount}") from None
        run_dir.mkdir(parents=True, exist_ok=True)
        name = f"headwater-{os.getpid()}-{secrets.token_hex(4)}"
        # One process at a time reclaims and claims: a sibling's claim is never seen half made.
        with _locked(run_dir / "cgroups.lock"):
            reclaim(run_dir, mount)
            claim = Claim(run_dir / f"cgroup-{name}.lock")
        dirs: dict[str, Path] = {}
        for controller, parent in parents.items():
            directory = parent / name
            claim.record(directory)
            try:
                directory.mkdir()
            except OSError as e:
                if controller in OPTIONAL:
                    continue
                claim.release()
                for made in dirs.values():
                    with contextlib.suppress(OSError):
                        made.rmdir()
                raise CgroupUnavailable(f"cannot create {directory}: {e.strerror}") from None
            dirs[controller] = directory
        return cls(dirs, claim)

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

    def close(self, timeout_s: float = END_TIMEOUT_S) -> None:
        """Ends whatever is still in the runners' cgroups (frozen or not) and removes them and this
        process's directories; its claim goes with them (or stays, for the next start, if
        something could not be ended in time)."""
        if end_cgroups(self.dirs.values(), timeout_s) and self.claim is not None:
            self.claim.release()


def end_cgroups(subtrees: Iterable[Path], timeout_s: float = END_TIMEOUT_S) -> bool:
    """Kills every process in the subtrees' cgroups and removes them, runners' cgroups first.
    A frozen process acts on no signal, SIGKILL included, until thawed: each round signals, then
    thaws, then removes what emptied, until all are gone or `timeout_s` passed (False then)."""
    subtrees = list(subtrees)
    deadline = time.monotonic() + timeout_s
    while True:
        cgroups = [child for d in subtrees if d.is_dir() for child in d.iterdir()
                   if child.is_dir() and child.name.startswith("runner-")] + [d for d in subtrees if d.is_dir()]
        if not cgroups:
            return True
        for cgroup in cgroups:
            with contextlib.suppress(OSError):
                for pid in (cgroup / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
        for cgroup in cgroups:
            if (cgroup / "freezer.state").exists():
                with contextlib.suppress(OSError):
                    _write(cgroup / "freezer.state", "THAWED")
        for cgroup in cgroups:  # children before their parent
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        if time.monotonic() > deadline:
            left = [str(d) for d in cgroups if d.is_dir()]
            if left:
                log.warning("runner cgroups still hold processes after %g s: %s", timeout_s, ", ".join(left))
                return False
        time.sleep(_POLL_S)


def reclaim(run_dir: Path, mount: Path = MOUNT) -> None:
    """Ends and removes the subtrees of this data directory's service processes that are gone: a
    claim in `run_dir` whose lock no process holds. A live sibling's claim is locked, and another
    data directory's claims are in another `run/`: neither is touched."""
    for path in sorted(run_dir.glob("cgroup-headwater-*.lock")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live service process's
            name = path.name.removeprefix("cgroup-").removesuffix(".lock")
            subtrees = [Path(line) for line in path.read_text().splitlines()]
            # Only what a claim may name: a subtree of that name in a cgroup hierarchy.
            subtrees = [d for d in subtrees if d.is_absolute() and d.name == name and d.is_relative_to(mount)
                        and ".." not in d.parts]
            log.info("ending what a stopped service process left in its cgroups (%s)", name)
            if end_cgroups(subtrees):
                path.unlink()
        finally:
            os.close(fd)


def reclaim_left(run_dir: Path, mount: Path = MOUNT) -> None:
    """`reclaim`, by a process that makes no subtree of its own (`headwater serve` once one of its
    serving processes died, and when it stops): one process at a time, as `CgroupRoot.create` does."""
    if not run_dir.is_dir():
        return
    with _locked(run_dir / "cgroups.lock"):
        reclaim(run_dir, mount)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
