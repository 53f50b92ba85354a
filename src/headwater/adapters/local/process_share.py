"""Several serving processes on one database: which queued work is whose, and which are alive.

Every lane (a source's, a workflow's, ...) belongs to one process, by a hash of its key: that
process queues and runs its tasks, in commit order, whichever process took them in, so a source's
runs stay in order and never overlap, and timers, deliveries and fan-out happen once. A request
that waits for its run's answer (customResponse) is the exception: the process that took it runs
it at once under the source's lease, and its task row names that process (`answered_by`) until
it is done; if that process dies first, the lane's owner queues it.

A process is alive while it holds the lock of its file `origin-<origin>.lock` in the run dir
(the kernel lets go of it when the process dies, however it dies)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import zlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessShare:
    index: int
    count: int
    run_dir: Path | None = None

    def owner(self, lane: str) -> int:
        return zlib.crc32(lane.encode()) % self.count if self.count > 1 else 0

    def owns(self, lane: str) -> bool:
        return self.count < 2 or self.owner(lane) == self.index


class Liveness:
    def __init__(self, run_dir: Path | None, origin: str) -> None:
        self._dir = run_dir
        self._origin = origin
        self._fd: int | None = None
        self._dead: set[str] = set()

    def _path(self, origin: str) -> Path | None:
        return None if self._dir is None else self._dir / f"origin-{origin}.lock"

    def claim(self) -> None:
        """Holds this process's lock for as long as it lives."""
        path = self._path(self._origin)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._fd is not None:
            path = self._path(self._origin)
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            os.close(self._fd)
            self._fd = None

    def alive(self, origin: str) -> bool:
        """Whether the process of `origin` still runs (this one does)."""
        if origin == self._origin:
            return True
        if origin in self._dead:
            return False
        path = self._path(origin)
        if path is None:
            return False  # a process of one: a request's task of another origin is a dead one's
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            self._dead.add(origin)
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing lets go of the lock if it was taken
        self._dead.add(origin)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return False
