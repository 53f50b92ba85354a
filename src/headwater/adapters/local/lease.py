"""Source leases of the local service, across the processes on one database (the serving processes
of `headwater serve` and any `headwater` command): a source's holders line up in their process's
lease table (in the order they asked, holding no thread while they wait), and the head of that
line takes the source's slot in a lock file beside the database, an open-file-description lock
(`F_OFD_SETLK`) on 8 bytes, before it holds the lease. The kernel drops a dead process's locks.

Waiting for a slot another process holds is polled (no thread blocks on it), with a marker that
says this process wants it, so that a busy process lets go of a source between two of its holds
rather than taking it again at once; a process that lets go of a slot another one wants says so
by datagram (`peers.py`), and the waiter tries again at once rather than at its next poll (one
hot source served by two processes passes between them in about a datagram's time, not a poll's).
Each holder writes its process's mark into the slot: the next holder learns whether another
process held the source since this one last did (`taken_elsewhere`), and forgets what it kept of
the source in memory then."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from headwater.adapters.in_process_lease import InProcessLease
from headwater.adapters.local.peers import Peers
from headwater.ports import Busy

SLOTS = 1 << 16  # sources share a slot only by a hash collision, which costs waiting, never exclusion
_SLOT_BYTES = 8
_WANTS = SLOTS * _SLOT_BYTES  # where the "wanted by another process" markers start
_POLL_FIRST_S, _POLL_MOST_S = 0.0002, 0.005
_YIELD_MOST_S = 0.02  # how long a process that just let go waits for one that wants the source


def _slot(source_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(source_id.encode(), digest_size=4).digest(), "big") % SLOTS


def _flock(kind: int, start: int) -> bytes:
    return struct.pack("hhqqi4x", kind, os.SEEK_SET, start, _SLOT_BYTES if start < _WANTS else 1, 0)


class SlotFile:
    """The lock file's slots, for one process: which it holds (several of its sources may share
    one), and its mark."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.mark = secrets.token_bytes(_SLOT_BYTES)
        self._guard = threading.Lock()
        self._held: dict[int, int] = {}  # slot -> holders in this process
        self._wanted: dict[int, int] = {}  # slot -> waiters in this process

    def try_take(self, slot: int) -> bytes | None:
        """Takes the slot if no other process holds it: the mark found there (the last holder's)."""
        with self._guard:
            if slot in self._held:
                self._held[slot] += 1
                return self.mark
            if not self._set(fcntl.F_WRLCK, slot * _SLOT_BYTES):
                return None
            self._held[slot] = 1
            found = os.pread(self._fd, _SLOT_BYTES, slot * _SLOT_BYTES)
            os.pwrite(self._fd, self.mark, slot * _SLOT_BYTES)
            return found

    def let_go(self, slot: int) -> bool:
        """True when the slot is free again (its last holder in this process let go)."""
        with self._guard:
            self._held[slot] -= 1
            if self._held[slot]:
                return False
            del self._held[slot]
            self._set(fcntl.F_UNLCK, slot * _SLOT_BYTES)
            return True

    def want(self, slot: int, wanting: bool) -> None:
        """Marks (a shared lock on its byte) that this process waits for the slot, or no longer."""
        with self._guard:
            count = self._wanted.get(slot, 0) + (1 if wanting else -1)
            if count and not self._wanted.get(slot):
                self._set(fcntl.F_RDLCK, _WANTS + slot)
            elif not count:
                self._set(fcntl.F_UNLCK, _WANTS + slot)
            if count:
                self._wanted[slot] = count
            else:
                self._wanted.pop(slot, None)

    def wanted_elsewhere(self, slot: int) -> bool:
        """Whether another process waits for the slot (its marker conflicts with a write lock)."""
        if slot in self._wanted:
            return False
        probe = fcntl.fcntl(self._fd, fcntl.F_OFD_GETLK, _flock(fcntl.F_WRLCK, _WANTS + slot))
        return struct.unpack("hhqqi4x", probe)[0] != fcntl.F_UNLCK

    def _set(self, kind: int, start: int) -> bool:
        try:
            fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK, _flock(kind, start))
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True


class LocalLease(InProcessLease):
    def __init__(self, path: Path, peers: Peers | None = None) -> None:
        super().__init__()
        self._slots = SlotFile(path)
        self._elsewhere: dict[str, bool] = {}  # source -> held by another process before its holder took it
        self._peers = peers
        self._wakers: dict[int, set[Callable[[], None]]] = {}  # slot -> this process's waiters' wake-ups
        self._wakers_guard = threading.Lock()
        if peers is not None:
            peers.on("lease", lambda fields: self._wake(int(fields[0])))

    def taken_elsewhere(self, source_id: str) -> bool:
        """Whether another process held the source's lease since this process last did (asked
        with the lease held)."""
        return self._elsewhere.get(source_id, True)

    def _took(self, source_id: str, found: bytes) -> None:
        self._elsewhere[source_id] = found != self._slots.mark
        if len(self._elsewhere) > 4 * SLOTS:
            self._elsewhere.clear()  # bounded: forgetting only costs a read of the source again

    @contextmanager
    def hold(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> Iterator[None]:
        if source_id in self._mine.get():
            yield
            return
        deadline = time.monotonic() + max(0.0, ttl_s if wait_s is None else wait_s)
        with super().hold(source_id, ttl_s, wait_s):
            slot = _slot(source_id)
            woken = threading.Event()
            with self._waking(slot, woken.set):
                for pause in self._tries(source_id, slot, deadline):
                    woken.wait(pause)
                    woken.clear()
            try:
                yield
            finally:
                self._let_go(slot)

    @asynccontextmanager
    async def held(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> AsyncIterator[None]:
        if source_id in self._mine.get():
            yield
            return
        deadline = time.monotonic() + max(0.0, ttl_s if wait_s is None else wait_s)
        async with super().held(source_id, ttl_s, wait_s):
            slot = _slot(source_id)
            loop = asyncio.get_running_loop()
            woken = asyncio.Event()
            tries = self._tries(source_id, slot, deadline)
            def wake() -> None:
                loop.call_soon_threadsafe(woken.set)

            with self._waking(slot, wake):
                try:
                    for pause in tries:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(woken.wait(), pause)
                        woken.clear()
                except BaseException:
                    tries.close()  # a cancelled waiter no longer wants the slot
                    raise
            try:
                yield
            finally:
                self._let_go(slot)

    def _let_go(self, slot: int) -> None:
        if self._slots.let_go(slot) and self._peers is not None and self._slots.wanted_elsewhere(slot):
            self._peers.broadcast("lease", str(slot))

    @contextmanager
    def _waking(self, slot: int, wake: Callable[[], None]) -> Iterator[None]:
        """While a waiter polls for `slot`, a peer's word that it let go of it wakes the waiter
        (with no peers, nothing can: the hold's path stays as it was)."""
        if self._peers is None:
            yield
            return
        with self._wakers_guard:
            self._wakers.setdefault(slot, set()).add(wake)
        try:
            yield
        finally:
            with self._wakers_guard:
                waiting = self._wakers[slot]
                waiting.discard(wake)
                if not waiting:
                    del self._wakers[slot]

    def _wake(self, slot: int) -> None:
        with self._wakers_guard:
            wakes = list(self._wakers.get(slot, ()))
        for wake in wakes:
            wake()

    def _tries(self, source_id: str, slot: int, deadline: float) -> Generator[float, None, None]:
        """Takes the slot, yielding how long to pause before each next try; Busy past `deadline`.
        A process that another one waits for lets it go first (for a moment at most)."""
        pause = _POLL_FIRST_S
        yielding_until = time.monotonic() + _YIELD_MOST_S if self._slots.wanted_elsewhere(slot) else 0.0
        wanting = False
        try:
            while True:
                now = time.monotonic()
                if now >= yielding_until or not self._slots.wanted_elsewhere(slot):
                    yielding_until = 0.0
                    found = self._slots.try_take(slot)
                    if found is not None:
                        self._took(source_id, found)
                        return
                    if not wanting:
                        self._slots.want(slot, True)
                        wanting = True
                if now >= deadline:
                    raise Busy(f"source {source_id} is busy in another process")
                yield min(pause, max(0.0, deadline - now))
                pause = min(pause * 2, _POLL_MOST_S)
        finally:
            if wanting:
                self._slots.want(slot, False)
