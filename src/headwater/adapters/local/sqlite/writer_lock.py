"""One writer at a time, across every process on the database: a thread lock for this process's
writers, then an exclusive `flock` on a file beside the database for the processes (the serving
processes of `headwater serve` and any `headwater` command). Queued here rather than in SQLite's
busy handler, which polls with sleeps of up to 100 ms: the kernel wakes the next writer as soon
as the lock is let go. A process that dies holding it loses it with its file descriptors."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from types import TracebackType


class WriterLock:
    def __init__(self, database: Path) -> None:
        self._thread_lock = threading.Lock()
        self._path = database.with_name(database.name + ".writer-lock")
        self._fd: int | None = None

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self._fd

    def acquire(self) -> bool:
        self._thread_lock.acquire()
        try:
            fcntl.flock(self._file(), fcntl.LOCK_EX)
        except BaseException:
            self._thread_lock.release()
            raise
        return True

    def release(self) -> None:
        try:
            fcntl.flock(self._file(), fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()
