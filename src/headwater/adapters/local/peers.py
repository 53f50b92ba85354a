"""The serving processes of one data dir tell each other what they committed: a Unix datagram
socket each (`<run dir>/peer-<index>.sock`), a message a datagram, sent without waiting (a peer
that is down, or whose socket is full, misses it: each reader also looks at the store on its own,
every second, so a lost message only costs that second).

Messages: `tasks` (work for the receiver's share was committed), `published` (an emitter's
channel got events: live readers look), `endpoint` (a source behind an endpoint changed: the
receiver's cache of it is dropped)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("headwater.peers")

_MAX_MESSAGE = 4096

Handler = Callable[[list[str]], None]


class Peers:
    def __init__(self, run_dir: Path, index: int, count: int) -> None:
        self.index, self.count = index, count
        self._dir = run_dir
        self._socket: socket.socket | None = None
        self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.setblocking(False)
        self._handlers: dict[str, Handler] = {}

    def on(self, kind: str, handle: Handler) -> None:
        """What a message of `kind` does here (its fields in order)."""
        self._handlers[kind] = handle

    @property
    def listening(self) -> bool:
        return self._socket is not None

    def _path(self, index: int) -> str:
        return str(self._dir / f"peer-{index}.sock")

    def open(self) -> None:
        """Binds this process's socket (a dead predecessor's file is replaced)."""
        if self.count < 2:
            return
        self._dir.mkdir(parents=True, exist_ok=True)
        path = self._path(self.index)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(path)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(self.index))
        self._sender.close()

    def send(self, index: int, kind: str, *fields: str) -> None:
        if index == self.index or self.count < 2:
            return
        message = "\0".join((kind, *fields)).encode()
        if len(message) > _MAX_MESSAGE:
            return
        with contextlib.suppress(OSError):  # the peer is down or behind: it reads the store within a second
            self._sender.sendto(message, self._path(index))

    def broadcast(self, kind: str, *fields: str) -> None:
        for index in range(self.count):
            self.send(index, kind, *fields)

    def receive(self, timeout_s: float) -> None:
        """Waits up to `timeout_s` for messages, and handles those that came."""
        if self._socket is None:
            return
        self._socket.settimeout(timeout_s)
        try:
            data = self._socket.recv(_MAX_MESSAGE)
        except TimeoutError:
            return
        except OSError:
            return  # closed while stopping
        self._socket.setblocking(False)
        while True:
            kind, *fields = data.decode(errors="replace").split("\0")
            try:
                handle = self._handlers.get(kind)
                if handle is not None:
                    handle(fields)
            except Exception:  # noqa: BLE001 - one bad message must not stop the reader
                log.exception("peer message %r failed", kind)
            try:
                data = self._socket.recv(_MAX_MESSAGE)
            except (BlockingIOError, OSError):
                return
