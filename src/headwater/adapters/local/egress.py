"""The runners' only way out: a proxy in the service that opens checked TCP connections for them.

A runner's sandbox has no network interface but lo. What it has is its own egress directory,
bound in at /run/egress, holding a control socket. The runner's `net` patch (layers/runner/src/
egress.mjs) asks there for each TCP connection, with one line `CONNECT <host> <port>`. The proxy
resolves the host once, checks every address with the URL policy (`domain.urls`: the same rule as
webhooks and component_url), connects to the checked address itself (so a changing DNS answer
cannot steer it elsewhere) and answers either `OK <name>` — `name` being a one-use Unix socket it
just made next to the control socket, spliced to the upstream connection — or `ERR <code>
<message>`. The runner then connects its own socket to `name`: no byte of the proxy's protocol is
ever in the data stream, so TLS and every client library work unchanged.

Each runner has its own directory (its tickets are invisible to other accounts) and a bound on
open connections, so no account can exhaust the service's file descriptors.

A proxy made with `only` (the bundler's: the npm registry's host and port) opens connections to
those `(host, port)` pairs and refuses every other request, whatever the URL policy would say of
it: the pairs are the operator's configuration, not users' input.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Collection, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from headwater.domain.urls import Refused, Unresolved, allowed_addresses

log = logging.getLogger("headwater.egress")

CONTROL = "control.sock"
_PREFIX = "headwater-egress-"
_LINE_MAX = 1024
_CONNECT_TIMEOUT_S = 10.0
_ACCEPT_TIMEOUT_S = 10.0
_CHUNK = 64 * 1024
MAX_CONNECTIONS = 128  # open upstream connections per runner
T = TypeVar("T")


@dataclass
class _Runner:
    directory: Path
    server: asyncio.AbstractServer | None = None
    open: int = 0
    tasks: set[asyncio.Task] = field(default_factory=set)


class EgressProxy:
    """One asyncio loop on its own thread, serving every runner's control socket."""

    def __init__(self, allow_loopback: bool, allow_private: bool,
                 resolve: Callable[[str, int], list[str]] | None = None,
                 only: Collection[tuple[str, int]] | None = None) -> None:
        self.allow = (allow_loopback, allow_private)
        self.only = None if only is None else frozenset((_host_key(h), p) for h, p in only)
        self._resolve = resolve or _resolve
        _sweep_orphans()
        # Short (socket paths hold 107 bytes at most) and named by pid, so a later start can tell
        # the directories of services that were killed (kill -9 leaves them) from live ones.
        self.root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        self._runners: dict[str, _Runner] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="egress")
        self._thread.start()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    def open(self, name: str) -> Path:
        """The egress directory of one runner (created, with its control socket listening)."""
        return self._call(self._open(name))

    def close_runner(self, name: str) -> None:
        """Stops a runner's control socket and drops its open connections (without waiting)."""
        closing = self._close(name)
        if not self._loop.is_running():  # the proxy is stopping or closed: it drops every runner itself
            closing.close()
            return
        try:
            asyncio.run_coroutine_threadsafe(closing, self._loop)
        except RuntimeError:  # closed meanwhile (a runner that ended with the proxy)
            closing.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError, TimeoutError):
            self._call(self._close_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
        shutil.rmtree(self.root, ignore_errors=True)

    async def _close_all(self) -> None:
        tasks = [task for runner in self._runners.values() for task in runner.tasks]
        for name in list(self._runners):
            await self._close(name)
        await asyncio.gather(*tasks, return_exceptions=True)  # cancelled: let them end before the loop stops

    async def _open(self, name: str) -> Path:
        await self._close(name)
        directory = self.root / name
        directory.mkdir(mode=0o755)
        runner = _Runner(directory)
        runner.server = await asyncio.start_unix_server(
            lambda r, w: self._track(runner, self._control(runner, r, w)), path=str(directory / CONTROL))
        self._runners[name] = runner
        return directory

    async def _close(self, name: str) -> None:
        runner = self._runners.pop(name, None)
        if runner is None:
            return
        if runner.server is not None:
            runner.server.close()
        for task in list(runner.tasks):
            task.cancel()
        shutil.rmtree(runner.directory, ignore_errors=True)

    def _track(self, runner: _Runner, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        runner.tasks.add(task)
        task.add_done_callback(runner.tasks.discard)

    async def _control(self, runner: _Runner, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One `CONNECT host port` request: answered OK with a ticket socket, or ERR. Requests
        being answered count against the runner's bound like spliced connections do."""
        if runner.open >= MAX_CONNECTIONS:
            await _answer(writer, f"ERR EMFILE too many open connections (at most {MAX_CONNECTIONS} per runner)\n")
            return
        runner.open += 1
        try:
            await self._serve(runner, reader, writer)
        finally:
            runner.open -= 1

    async def _serve(self, runner: _Runner, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            line = await asyncio.wait_for(reader.readline(), _CONNECT_TIMEOUT_S)
            host, port = _parse(line)
            upstream = await self._connect(host, port)
            ticket = self._ticket(runner)
        except _Failure as e:
            log.info("egress refused: %s", e.message)
            await _answer(writer, f"ERR {e.code} {e.message}\n")
            return
        except (TimeoutError, OSError, ValueError):
            if upstream is not None:
                upstream[1].close()
            writer.close()
            return
        await _answer(writer, f"OK {Path(ticket.getsockname()).name}\n")
        await self._splice(ticket, *upstream)

    def _ticket(self, runner: _Runner) -> socket.socket:
        path = runner.directory / f"t-{secrets.token_hex(12)}.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(1)
        listener.setblocking(False)
        return listener

    async def _splice(self, ticket: socket.socket, up_reader: asyncio.StreamReader,
                      up_writer: asyncio.StreamWriter) -> None:
        """Waits for the runner on the ticket socket (once), then copies both ways until both end."""
        path = ticket.getsockname()
        try:
            conn, _ = await asyncio.wait_for(asyncio.get_running_loop().sock_accept(ticket), _ACCEPT_TIMEOUT_S)
        except (TimeoutError, OSError):
            up_writer.close()
            return
        finally:
            ticket.close()
            with contextlib.suppress(OSError):
                Path(path).unlink()
        reader, writer = await asyncio.open_connection(sock=conn, limit=_CHUNK)
        try:
            await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
        finally:
            writer.close()
            up_writer.close()

    async def _connect(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        loop = asyncio.get_running_loop()
        try:
            if self.only is not None:
                if (_host_key(host), port) not in self.only:
                    allowed = ", ".join(f"{h} port {p}" for h, p in sorted(self.only))
                    raise _Failure("EPOLICY", f"refused by policy: only {allowed} can be reached")
                addresses = await loop.run_in_executor(None, lambda: self._resolve(host, port))
            else:
                addresses = await loop.run_in_executor(
                    None, lambda: allowed_addresses(host, lambda h: self._resolve(h, port), *self.allow))
        except Refused as e:
            raise _Failure("ENOTFOUND" if isinstance(e, Unresolved) else "EPOLICY", str(e)) from None
        except OSError as e:  # the name did not resolve
            raise _Failure("ENOTFOUND", f"{host}: {getattr(e, 'strerror', None) or e}") from None
        error: OSError | None = None
        for address in addresses:
            try:
                return await asyncio.wait_for(asyncio.open_connection(address, port, limit=_CHUNK),
                                              _CONNECT_TIMEOUT_S)
            except TimeoutError:
                error = TimeoutError(f"no answer from {address} port {port} within {_CONNECT_TIMEOUT_S:g} s")
            except OSError as e:
                error = e
        code = "ETIMEDOUT" if isinstance(error, TimeoutError) else _errno_name(error)
        raise _Failure(code, f"{host} port {port}: {getattr(error, 'strerror', None) or error}")


class _Failure(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message.replace("\n", " ")


def _parse(line: bytes) -> tuple[str, int]:
    if len(line) > _LINE_MAX or not line.endswith(b"\n"):
        raise _Failure("EINVAL", "the request line is missing or too long")
    parts = line.decode(errors="replace").split()
    if len(parts) != 3 or parts[0] != "CONNECT" or not parts[2].isdigit() or not 0 < int(parts[2]) < 65536:
        raise _Failure("EINVAL", "expected: CONNECT <host> <port>")
    return parts[1], int(parts[2])


def _host_key(host: str) -> str:
    return host.strip("[]").lower()


def _resolve(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def _errno_name(error: OSError | None) -> str:
    number = getattr(error, "errno", None)
    return errno.errorcode.get(number, "ECONNREFUSED") if isinstance(number, int) else "ECONNREFUSED"


async def _answer(writer: asyncio.StreamWriter, line: str) -> None:
    """The one line a control request gets; the control connection then closes."""
    with contextlib.suppress(OSError):
        writer.write(line.encode())
        await writer.drain()
    writer.close()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from one side to the other; the end of one direction is passed on (half close)."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


def _sweep_orphans() -> None:
    """Removes egress directories whose service is gone: nothing else would, after a kill -9."""
    for directory in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        pid = directory.name[len(_PREFIX):].partition("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(directory, ignore_errors=True)
