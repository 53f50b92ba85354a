"""A runner process's pipes as the service uses them: its output cut into bounded lines, and
request bytes written without ever blocking on a runner that stopped reading."""

from __future__ import annotations

import asyncio
import errno
import os
import select
import subprocess
import time

from headwater.adapters.runner_protocol import ProtocolViolation

WRITE_TIMEOUT_S = 5.0  # a runner that reads no request for this long is not reading at all


class LineSplitter:
    """A process's output cut into lines, none longer than `max_line` (a longer one, or one
    that never ends, is a ProtocolViolation before it fills memory)."""

    __slots__ = ("max_line", "_buffer")

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buffer = bytearray()

    @property
    def pending(self) -> bool:
        """A line was begun and not ended."""
        return bool(self._buffer)

    def feed(self, chunk: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += chunk
        lines, start = [], 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if end - start > self.max_line:
                raise ProtocolViolation(f"a line over {self.max_line} bytes")
            lines.append(bytes(buffer[start:end + 1]))
            start = end + 1
        del buffer[:start]
        if len(buffer) > self.max_line:
            raise ProtocolViolation(f"a line over {self.max_line} bytes")
        return lines


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def write_all(proc: subprocess.Popen, data: bytes) -> bool:
    """Writes a request line without ever blocking on a runner that stopped reading for more
    than WRITE_TIMEOUT_S (the pipe is non-blocking): False when it cannot be written."""
    stdin = proc.stdin
    if stdin is None:
        return False
    fd = stdin.fileno()
    view = memoryview(data)
    deadline = time.monotonic() + WRITE_TIMEOUT_S
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                return False
        except OSError as e:
            if e.errno == errno.EINTR:
                continue
            return False
    return True
