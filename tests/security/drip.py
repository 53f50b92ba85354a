"""A loopback HTTP server that answers one byte at a time: an exchange with it never goes a whole
read timeout without a byte, so only a deadline on the whole exchange ends it."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

HEADERS = "headers"  # the status line and headers dripped (they never end)
BODY = "body"  # the headers at once, announcing a body that is then dripped
_LASTS_S = 300.0  # a connection is dripped to for at most this long


@dataclass
class Drip:
    port: int
    mode: str
    interval_s: float
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    accepted: int = 0
    open: int = 0
    most_open: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def serve(self, conn: socket.socket) -> None:
        with self.lock:
            self.accepted += 1
            self.open += 1
            self.most_open = max(self.most_open, self.open)
        try:
            conn.settimeout(5)
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                received += chunk
            if self.mode == BODY:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
                payload = b"{" + b" " * 99_999
            else:
                payload = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 100_000
            for i in range(min(len(payload), int(_LASTS_S / self.interval_s))):
                conn.sendall(payload[i:i + 1])
                if self.stopping.is_set() or self._closed_within(conn, self.interval_s):
                    return
        except OSError:
            return  # the client gave up
        finally:
            conn.close()
            with self.lock:
                self.open -= 1


    @staticmethod
    def _closed_within(conn: socket.socket, seconds: float) -> bool:
        """Whether the client closes the connection within `seconds` (so it counts as open no longer)."""
        ends = time.monotonic() + seconds
        while (left := ends - time.monotonic()) > 0:
            readable, _, _ = select.select([conn], [], [], left)
            if readable and not conn.recv(65536):  # what it still sends is dropped; nothing: it closed
                return True
        return False


@contextmanager
def dripping(mode: str, interval_s: float = 0.5) -> Iterator[Drip]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    drip = Drip(listener.getsockname()[1], mode, interval_s)

    def accept() -> None:
        while not drip.stopping.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=drip.serve, args=(conn,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    try:
        yield drip
    finally:
        drip.stopping.set()
        listener.close()
