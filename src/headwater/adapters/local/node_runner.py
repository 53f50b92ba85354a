"""Node runner processes speaking JSON lines (docs/runner-protocol.md), one per account.

Each account's code runs in its own runner process, in its own sandbox (docs/security.md), and
nothing in a process ever serves another account: its runs, and the describe, `options` and
`additionalProps` calls its account makes. Calls the operator makes (registry publishing) have
a process of their own. At most `HEADWATER_RUNNER_PROCESSES` processes live at once: past that
the least recently used idle one is stopped, and idle ones are stopped after
`HEADWATER_RUNNER_IDLE_S`.

Trust ends at the process: the code inside can write the process's pipes. So the supervisor
here takes an answer only for a call it sent to that process, in its op's shape
(adapters/runner_protocol.py), and fails the process on anything else; it measures each call's
time itself, bills the CPU the process's cgroup used beyond that time to the account, ends a
process that overruns a call's limit, and freezes a process whose calls are over once their
limits have passed, so no work a run started outlives it. A run that waits holds no thread: its
answer completes a Future where the process's pipe is read: on the server's event loop (no thread
between the pipe and the request waiting for it), or on a thread of its own in one-shot commands. An account has at most
`HEADWATER_ACCOUNT_MAX_CONCURRENT_RUNS` runs in flight; the rest wait in its process's queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import heapq
import itertools
import json
import logging
import math
import os
import select
import signal
import subprocess
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.adapters.local.cgroups import CgroupRoot, CgroupUnavailable, RunnerCgroup
from headwater.adapters.local.egress import EgressProxy
from headwater.adapters.local.sandbox import EGRESS, RUNNER, TMP, Bind, Sandbox, sandbox_for
from headwater.adapters.runner_protocol import (
    DESCRIBE,
    GRACE_S,
    RUN_OPS,
    BatchResults,
    PartialHandler,
    ProtocolViolation,
    RunnerRequests,
    account_of,
    check_final,
    instance_request,
)
from headwater.domain.runs import RunResult
from headwater.ports import Bundle, Instance, RunnerError, WouldBlock
from headwater.settings import Settings

log = logging.getLogger("headwater.runner")

ComputeBill = Callable[[str, int], None]
"""(user id, milliseconds): CPU an account's process used beyond its calls' measured time."""

_PR_SET_PDEATHSIG = 1
_EXTRA_CA = "/etc/headwater-extra-ca.pem"
_BILL_EVERY_S = 1.0  # how often a busy process's CPU is read (and each time it is frozen or ends)
_WRITE_TIMEOUT_S = 5.0  # a runner that reads no request for this long is not reading at all
_SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="runner-spawner")
_CLOSER = ThreadPoolExecutor(2, thread_name_prefix="runner-closer")  # waits for an exited process
_READ_BYTES = 1 << 16
_LOOP_LINE_BYTES = 1 << 20  # a longer answer is parsed off the event loop
_FLUSHER = ThreadPoolExecutor(2, thread_name_prefix="runner-flusher")  # requests a full pipe held back

__all__ = ["DESCRIBE", "NodeRunnerPool", "runner_command"]


def _die_with_parent() -> None:
    """Linux: the kernel kills the runner when the service dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def runner_command(settings: Settings, runner: str, tmp: str) -> list[str]:
    """The runner process's command line, with the runner's folder at `runner` and its /tmp at `tmp`."""
    node = f"{runner}/{settings.node.relative_to(settings.runner_dir)}"
    return [node, "--permission", "--allow-worker", f"--allow-fs-read={runner}", f"--allow-fs-read={tmp}",
            f"--allow-fs-write={tmp}", "--disable-warning=SecurityWarning", f"{runner}/src/stdio.mjs"]


class Deadlines:
    """One thread that calls things at given monotonic times (calls past their limit, processes
    to freeze): timing a call costs a heap entry, not a thread."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        threading.Thread(target=self._loop, daemon=True, name="runner-deadlines").start()

    def at(self, when: float, action: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._seq), action))
            if self._heap[0][2] is action:
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cond.wait(timeout=self._heap[0][0] - time.monotonic() if self._heap else None)
                if self._stopped:
                    return
                _, _, action = heapq.heappop(self._heap)
            try:
                action()
            except Exception:  # noqa: BLE001 - one failing action must not stop the others
                log.exception("runner deadline action failed")


@dataclass(eq=False)
class Call:
    """One request sent to a runner process, until its answer (or the process's end)."""

    id: int
    op: str
    message: dict[str, Any]
    limit_s: float  # the call's own limit, which the runner enforces (a batch: all its runs)
    on_partial: PartialHandler | None
    bill_to: str
    future: Future[dict[str, Any]] = field(default_factory=Future)
    sent: float = 0.0


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
        if self.sandbox is not None:
            env = {"PATH": "/usr/bin:/bin", "TMPDIR": TMP, "HOME": TMP, "HEADWATER_EGRESS_DIR": EGRESS}
            extra = []
            ca = os.environ.get("NODE_EXTRA_CA_CERTS", "")
            if ca and Path(ca).is_file():  # the operator's extra CA (a TLS-inspecting proxy) holds inside too
                extra.append(Bind(Path(ca), _EXTRA_CA))
                env["NODE_EXTRA_CA_CERTS"] = _EXTRA_CA
            command = self.sandbox.runner(self.settings.runner_dir, egress_dir, self.settings.runner_memory_mb << 20,
                                          runner_command(self.settings, RUNNER, TMP), env, extra)
            cwd, popen_env = self.settings.runner_dir, None
        else:
            tmp = self.settings.data_dir / "tmp" / f"runner-{name}"
            tmp.mkdir(parents=True, exist_ok=True)
            command = runner_command(self.settings, str(self.settings.runner_dir), str(tmp))
            cwd, popen_env = tmp, {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp), "HEADWATER_EGRESS_DIR": str(egress_dir)}

        def prepare() -> None:
            if cgroup is not None:
                cgroup.enter()
            _die_with_parent()

        try:
            # Started from one long-lived thread: the kernel's parent-death signal follows the
            # thread that forked, and a request's worker thread may end while the runner lives on.
            proc = _SPAWNER.submit(subprocess.Popen, command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, cwd=cwd, env=popen_env, preexec_fn=prepare).result()
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


class RunnerProcess:
    """One account's runner process (started on first use, and again after it died)."""

    def __init__(self, account: str, launcher: Launcher, deadlines: Deadlines, max_runs: int,
                 max_line: int, bill: ComputeBill | None, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.account = account
        self.loop = loop
        self.launcher = launcher
        self.deadlines = deadlines
        self.max_runs = max(1, max_runs)
        self.max_line = max_line
        self.bill = bill
        self.known_hashes: set[str] = set()
        self.busy = 0  # calls in flight (the pool only stops idle processes)
        self.last_used = time.monotonic()
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._lock = threading.Lock()  # runs in flight, the queue, what is to be billed
        self.runs_in_flight = 0
        self.waiting: deque[Call] = deque()
        self._wall_ms = 0.0  # measured time of the calls ended since the last bill
        self._bill_to = ""
        self.live: Launched | None = None

    @property
    def alive(self) -> bool:
        return self.live is not None and self.live.proc.poll() is None

    # sending

    def submit(self, op: str, message: dict[str, Any], limit_s: float, on_partial: PartialHandler | None,
               bill_to: str = "") -> Future[dict[str, Any]]:
        """Sends one request; its final answer (checked) completes the Future. A run past the
        account's share waits in the queue (holding no thread) until one of its runs ends."""
        call = Call(next(self._ids), op, message, limit_s, on_partial, bill_to)
        if op in RUN_OPS:
            with self._lock:
                if self.runs_in_flight >= self.max_runs:
                    self.waiting.append(call)
                    return call.future
                self.runs_in_flight += 1
        self._send(call)
        return call.future

    def _ensure_started(self) -> Launched:
        with self._start_lock:
            if not self.alive:
                live = self.launcher.start(self.account)
                if live.cgroup is not None:
                    live.cpu_mark_ns = live.cgroup.cpu_ns() or 0
                self.live = live
                self.known_hashes = set()
                self._watch(live)
                threading.Thread(target=self._drain_stderr, args=(live,), daemon=True).start()
            assert self.live is not None
            return self.live

    def _send(self, call: Call) -> None:
        try:
            live = self._ensure_started()
        except OSError as e:
            self._ended(None, call, RunnerError("RUNNER_CRASHED", f"the runner did not start: {e.strerror}"))
            return
        with live.lock:
            if live.closed:
                closed = True
            else:
                closed = False
                live.pending[call.id] = call
                if live.frozen and live.cgroup is not None:
                    live.cgroup.thaw()
                    live.frozen = False
        if closed:
            self._ended(None, call, RunnerError("RUNNER_CRASHED", "runner process is not accepting requests"))
            return
        call.sent = time.monotonic()
        self.deadlines.at(call.sent + call.limit_s + GRACE_S, lambda: self._overdue(live, call))
        line = (json.dumps({"id": call.id, **call.message}, separators=(",", ":")) + "\n").encode()
        self._write(live, line)

    def _write(self, live: Launched, line: bytes) -> None:
        """Writes a request line without blocking the caller (it may be the event loop): what the
        pipe cannot take at once is written by a flushing thread, and later lines queue behind it."""
        with self._write_lock:
            if live.flushing:
                live.backlog.append(line)
                return
            assert live.proc.stdin is not None
            try:
                written = os.write(live.proc.stdin.fileno(), line)
            except BlockingIOError:
                written = 0
            except OSError:
                written = -1
            if written == len(line):
                return
            if written >= 0:
                live.flushing = True
                live.backlog.append(line[written:])
        if written < 0:
            self._fail(live, RunnerError("RUNNER_CRASHED", "runner process is not accepting requests"))
        else:
            _FLUSHER.submit(self._flush, live)

    def _flush(self, live: Launched) -> None:
        while True:
            with self._write_lock:
                if not live.backlog:
                    live.flushing = False
                    return
                data = live.backlog.popleft()
            if not _write_all(live.proc, data):
                self._fail(live, RunnerError("RUNNER_CRASHED", "runner process is not accepting requests"))
                with self._write_lock:
                    live.backlog.clear()
                    live.flushing = False
                return

    # receiving

    def _watch(self, live: Launched) -> None:
        """Reads the process's answers: on the event loop when the pool has one (no thread
        between the runner's pipe and the request waiting for its answer), else on a thread."""
        assert live.proc.stdout is not None
        live.lines = LineSplitter(self.max_line)
        loop = self.loop
        if loop is None or loop.is_closed():
            threading.Thread(target=self._read, args=(live,), daemon=True, name=f"runner-{live.name}").start()
            return
        fd = live.proc.stdout.fileno()
        os.set_blocking(fd, False)
        if _running_loop() is loop:
            loop.add_reader(fd, self._readable, live, fd)
        else:
            loop.call_soon_threadsafe(loop.add_reader, fd, self._readable, live, fd)

    def _readable(self, live: Launched, fd: int) -> None:
        """On the event loop: whatever the pipe holds now, taken line by line."""
        while True:
            try:
                chunk = os.read(fd, _READ_BYTES)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                asyncio.get_running_loop().remove_reader(fd)
                self._off_loop(live, None)
                return
            self._feed(live, chunk, on_loop=True)

    def _off_loop(self, live: Launched, line: bytes | None) -> None:
        """A line too long to parse on the event loop (an account's 64 MB answer would stall every
        account's requests), or the output's end (None), handled on a thread, in order: once one
        line went there, the lines after it follow until that thread has caught up."""
        with live.lock:
            live.parsing.append(line)
            if len(live.parsing) > 1:
                return
        _CLOSER.submit(self._parse_off_loop, live)

    def _parse_off_loop(self, live: Launched) -> None:
        while True:
            with live.lock:
                if not live.parsing:
                    return
                line = live.parsing[0]
            if line is None:
                self._closed(live)
            elif not live.broken:
                try:
                    self._take(live, line)
                except ProtocolViolation as e:
                    live.broken = True
                    self._fail(live, e)
            with live.lock:
                live.parsing.popleft()

    def _read(self, live: Launched) -> None:
        """On a thread of its own: the same, blocking."""
        assert live.proc.stdout is not None
        fd = live.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, _READ_BYTES)
            except OSError:
                chunk = b""
            if not chunk:
                break
            self._feed(live, chunk)
        self._closed(live)

    def _feed(self, live: Launched, chunk: bytes, on_loop: bool = False) -> None:
        """Every line the process writes, checked: an answer to a call it was sent, in its shape,
        or the process has failed (its calls fail; no one else's do)."""
        if live.broken:
            return
        assert live.lines is not None
        try:
            for line in live.lines.feed(chunk):
                if on_loop and (live.parsing or len(line) > _LOOP_LINE_BYTES):
                    self._off_loop(live, line)
                else:
                    self._take(live, line)
        except ProtocolViolation as e:
            live.broken = True
            self._fail(live, e)

    def _closed(self, live: Launched) -> None:
        """The process's output ended: it exits, and the calls it had not answered fail."""
        if not live.broken and live.lines is not None and live.lines.pending:
            live.broken = True
            with live.lock:
                live.failure = live.failure or ProtocolViolation("a line cut short")
        live.proc.wait()
        error = live.failure or self._exit_error(live)
        with live.lock:
            live.closed = True
            pending, live.pending = live.pending, {}
        self._account_cpu(live)
        for call in pending.values():
            self._ended(None, call, error)
        self.launcher.stopped(live.name, live.cgroup)

    def _take(self, live: Launched, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            raise ProtocolViolation("a line that is not JSON") from None
        if not isinstance(message, dict) or type(message.get("id")) is not int:
            raise ProtocolViolation("a line without a request id")
        call = live.pending.get(message["id"])
        if call is None:
            raise ProtocolViolation("an answer to a request it was not sent")
        if "partial" in message:
            if call.on_partial is None:
                raise ProtocolViolation(f"a partial answer to {call.op}")
            call.on_partial(message)
            return
        check_final(message)
        self._ended(live, call, message)

    def _ended(self, live: Launched | None, call: Call, answer: dict[str, Any] | RunnerError) -> None:
        """A call is over: its time counts, the account's next waiting run goes, the process may
        be idle (its CPU is billed, and it is frozen once its calls' limits have passed)."""
        idle = False
        if live is not None:
            with live.lock:
                if live.pending.pop(call.id, None) is None:
                    return
                idle = not live.pending
                if call.sent:
                    live.quiet_at = max(live.quiet_at, call.sent + call.limit_s)
        following = None
        with self._lock:
            if call.sent:
                self._wall_ms += (time.monotonic() - call.sent) * 1000
            if call.bill_to:
                self._bill_to = call.bill_to
            if call.op in RUN_OPS:
                if self.waiting:
                    following = self.waiting.popleft()  # it takes this call's place
                else:
                    self.runs_in_flight -= 1
        if isinstance(answer, RunnerError):
            call.future.set_exception(answer)
        else:
            call.future.set_result(answer)
        if idle and live is not None:
            if time.monotonic() - live.billed_at >= _BILL_EVERY_S:  # a busy process: bill now and then
                self._account_cpu(live)
            self._schedule_quiesce(live)
        if following is not None:
            self._send(following)

    def _overdue(self, live: Launched, call: Call) -> None:
        """The runner stops a call at its limit and says so; one that has not, GRACE_S later, is
        not doing its job: the process ends, and its calls with it."""
        if call.id in live.pending and live.pending[call.id] is call:
            self._fail(live, RunnerError("TIMEOUT", f"the run did not stop within its limit of {call.limit_s:g} s; "
                                         "the account's runner was stopped"))

    def _schedule_quiesce(self, live: Launched) -> None:
        """One freeze check per process at a time, at the latest limit (not one per call)."""
        with live.lock:
            if live.quiesce_due:
                return
            live.quiesce_due = live.quiet_at
        self.deadlines.at(live.quiet_at, lambda: self._quiesce(live))

    def _quiesce(self, live: Launched) -> None:
        """No call in flight and every limit passed: whatever still runs in there belongs to no
        call, so the process is frozen (its next call thaws it)."""
        with live.lock:
            live.quiesce_due = 0.0
            if live.closed or live.pending or live.frozen:
                return
            if time.monotonic() < live.quiet_at - 0.001:  # a later call moved the limit
                live.quiesce_due = live.quiet_at
                self.deadlines.at(live.quiet_at, lambda: self._quiesce(live))
                return
            if live.cgroup is None or not live.cgroup.can_freeze:
                return
            live.cgroup.freeze()
            live.frozen = True
        self._account_cpu(live)

    def _account_cpu(self, live: Launched) -> None:
        """Bills the CPU the process used since the last bill beyond its calls' measured time:
        work after a call's end (forged or not) is paid for by the account that did it."""
        used_ns = live.cgroup.cpu_ns() if live.cgroup is not None else None
        if used_ns is None:
            return
        with self._lock:
            used_ms = (used_ns - live.cpu_mark_ns) / 1e6
            live.cpu_mark_ns = used_ns
            live.billed_at = time.monotonic()
            extra = used_ms - self._wall_ms
            self._wall_ms = 0.0
            bill_to = self._bill_to
        if extra >= 1 and bill_to and self.bill is not None:
            try:
                self.bill(bill_to, math.ceil(extra))
            except Exception:  # noqa: BLE001 - the bill is recorded best-effort; the run is over
                log.exception("could not bill %d ms of CPU to %s", extra, bill_to)

    def _fail(self, live: Launched, error: RunnerError) -> None:
        """Ends the process: its calls fail with `error` (settled once its output ends)."""
        with live.lock:
            if live.failure is None:
                live.failure = error
        log.warning("runner %s of %s stopped: %s", live.name, self.account, error.message)
        if live.cgroup is not None:
            live.cgroup.kill_all()
        with contextlib.suppress(OSError):
            live.proc.kill()

    def _exit_error(self, live: Launched) -> RunnerError:
        """What the calls in flight get when the process is gone: OUT_OF_MEMORY when the kernel
        killed it at the runner's memory cap, RUNNER_CRASHED otherwise."""
        if live.cgroup is not None and live.cgroup.oom_kills() > 0:
            limit = self.launcher.settings.runner_memory_mb
            return RunnerError("OUT_OF_MEMORY", f"the account's runner ran out of memory (limit {limit} MB) "
                               "and was stopped; runs in flight were lost")
        return RunnerError("RUNNER_CRASHED", f"runner process exited with {live.proc.returncode}")

    def _drain_stderr(self, live: Launched) -> None:
        assert live.proc.stderr is not None
        for line in live.proc.stderr:
            log.warning("runner %s: %s", live.name, line[:2000].decode(errors="replace").rstrip())

    def close(self) -> None:
        live = self.live
        with self._lock:
            waiting, self.waiting = list(self.waiting), deque()
        for call in waiting:
            call.future.set_exception(RunnerError("RUNNER_CRASHED", "the runner was stopped"))
        if live is None or live.proc.poll() is not None:
            return
        if live.cgroup is not None:
            live.cgroup.thaw()
        try:
            assert live.proc.stdin is not None
            live.proc.stdin.close()  # the runner finishes and exits when its input ends
            live.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            live.proc.kill()
            live.proc.wait(timeout=5)


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


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _write_all(proc: subprocess.Popen, data: bytes) -> bool:
    """Writes a request line without ever blocking on a runner that stopped reading for more
    than _WRITE_TIMEOUT_S (the pipe is non-blocking): False when it cannot be written."""
    stdin = proc.stdin
    if stdin is None:
        return False
    fd = stdin.fileno()
    view = memoryview(data)
    deadline = time.monotonic() + _WRITE_TIMEOUT_S
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


def _cgroups(settings: Settings, sandbox: Sandbox | None) -> CgroupRoot | None:
    if sandbox is None:
        return None
    try:
        return CgroupRoot.create()
    except CgroupUnavailable as e:
        log.warning("runner processes run without a cgroup (%s): their memory and threads are bounded only "
                    "per worker by V8, not per process by the kernel, and work left after a run is not frozen", e)
        return None


class NodeRunnerPool(RunnerRequests):
    """The Runner port over per-account processes: typed requests in, wire dicts only in here."""

    def __init__(self, settings: Settings, bill: ComputeBill | None = None) -> None:
        self.settings = settings
        self.bill = bill
        sandbox = sandbox_for(settings)  # SandboxUnavailable: the service must not start
        self.egress = EgressProxy(settings.allow_loopback_urls, settings.allow_private_urls)
        self.cgroups = _cgroups(settings, sandbox)
        self.launcher = Launcher(settings, sandbox, self.cgroups, self.egress)
        self.deadlines = Deadlines()
        self.max_processes = max(1, settings.runner_processes)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._processes: OrderedDict[str, RunnerProcess] = OrderedDict()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        threading.Thread(target=self._reap_idle, daemon=True, name="runner-reaper").start()

    # which process

    def _acquire(self, account: str, wait: bool = True) -> RunnerProcess:
        """The account's process, marked busy; past the bound, the least recently used idle one is
        stopped first (or, all busy, this waits for one to finish). Without `wait`, only a process
        that is running already: WouldBlock otherwise."""
        with self._cond:
            while True:
                process = self._processes.get(account)
                if not wait and (process is None or not process.alive):
                    raise WouldBlock(f"no runner process is running for {account}")
                if process is None and len(self._processes) < self.max_processes:
                    process = self._processes[account] = RunnerProcess(
                        account, self.launcher, self.deadlines, self.settings.account_max_concurrent_runs,
                        self.settings.runner_max_line_bytes, self.bill, self.loop)
                if process is not None:
                    self._processes.move_to_end(account)
                    process.busy += 1
                    return process
                idle = next((p for p in self._processes.values() if p.busy == 0), None)
                if idle is not None:
                    self._retire(idle)
                else:
                    self._cond.wait(timeout=1.0)

    def _release(self, process: RunnerProcess) -> None:
        with self._cond:
            process.busy -= 1
            process.last_used = time.monotonic()
            self._cond.notify_all()

    def _retire(self, process: RunnerProcess) -> None:
        """Forget an idle process and stop it in the background (caller holds the lock)."""
        del self._processes[process.account]
        threading.Thread(target=process.close, daemon=True).start()

    def _reap_idle(self) -> None:
        idle_s = self.settings.runner_idle_s
        while not self._stop.wait(min(30.0, max(1.0, idle_s / 2))):
            now = time.monotonic()
            with self._cond:
                for process in [p for p in self._processes.values() if p.busy == 0 and now - p.last_used > idle_s]:
                    self._retire(process)

    def meta_fields(self) -> dict[str, Any]:
        return {"memory_mb": self.settings.describe_memory_mb}

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The server's event loop: processes started from now on are read there."""
        self.loop = loop

    # calls

    def call(
        self,
        op: str,
        request: dict[str, Any],
        bundle: Bundle | None = None,
        on_partial: PartialHandler | None = None,
        account: str = DESCRIBE,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """One runner op on the account's process (which keeps its instances and bundles warm)."""
        return self.submit(op, request, bundle, on_partial, account, timeout_s).result()

    def submit(self, op: str, request: dict[str, Any], bundle: Bundle | None = None,
               on_partial: PartialHandler | None = None, account: str = DESCRIBE,
               timeout_s: float | None = None, bill_to: str = "", wait: bool = True) -> Future[dict[str, Any]]:
        """`call` whose result comes in a Future, completed where the process's pipe is read."""
        process = self._acquire(account, wait)
        limit_s = timeout_s - GRACE_S if timeout_s else request.get("timeout_ms", 30_000) / 1000
        message: dict[str, Any] = {"op": op, **request}
        warm = bundle is not None and bundle.hash in process.known_hashes
        if bundle is not None:
            message["bundle"] = {"hash": bundle.hash} if warm else {"hash": bundle.hash, "code": bundle.code}
        result: Future[dict[str, Any]] = Future()

        def answered(sent: Future[dict[str, Any]]) -> None:
            error = sent.exception()
            if error is not None:
                self._release(process)
                result.set_exception(error)
                return
            response = sent.result()
            if bundle is not None and not response.get("ok") and response["error"].get("code") == "BUNDLE_MISSING" \
                    and "code" not in message["bundle"]:
                message["bundle"] = {"hash": bundle.hash, "code": bundle.code}
                process.submit(op, message, limit_s, on_partial, bill_to).add_done_callback(answered)
                return
            self._release(process)
            if response.get("ok"):
                if bundle is not None:
                    process.known_hashes.add(bundle.hash)
                result.set_result(response["result"])
            else:
                failed = response.get("error") or {}
                result.set_exception(RunnerError(failed.get("code", "RUNTIME_ERROR"), failed.get("message", ""),
                                                 failed.get("stack")))

        process.submit(op, message, limit_s, on_partial, bill_to).add_done_callback(answered)
        return result

    def submit_many(self, bundle: Bundle, instance: Instance, events: list[Any], timeout_ms: int,
                    on_respond: Callable[[int, dict[str, Any]], None] | None = None,
                    wait: bool = True) -> Future[list[RunResult]]:
        """The runs of one instance in one request; nothing waits for them but the Future."""
        collect = BatchResults(len(events), on_respond)
        request = {**instance_request(instance), "events": events, "timeout_ms": timeout_ms}
        outcome: Future[list[RunResult]] = Future()

        def answered(sent: Future[dict[str, Any]]) -> None:
            error = sent.exception()
            try:
                outcome.set_result(collect.outcomes(error if isinstance(error, RunnerError) else None))
            except RunnerError as failure:
                outcome.set_exception(failure)

        self.submit("run", request, bundle, collect, account_of(instance),
                    len(events) * timeout_ms / 1000 + GRACE_S, instance.bill_to, wait).add_done_callback(answered)
        return outcome

    def invoke(self, request: dict[str, Any], account: str) -> dict[str, Any]:
        """What the runner Lambda (lambda.mjs) answers to one invocation: the request run whole on
        the account's sandboxed process, its partials collected into `partials` (the emulated
        deployment's runner function)."""
        process = self._acquire(account)
        partials: list[dict[str, Any]] = []
        try:
            limit_s = request.get("timeout_ms", 30_000) / 1000 * max(1, len(request.get("events") or [1]))
            response = process.submit(str(request.get("op")), request, limit_s, partials.append).result()
        except RunnerError as e:
            return {"ok": False, "error": {"code": e.code, "message": e.message}}
        finally:
            self._release(process)
        return {**response, "partials": partials} if partials else response

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            processes = list(self._processes.values())
            self._processes.clear()
        for process in processes:
            process.close()
        self.deadlines.stop()
        self.egress.close()
        if self.cgroups is not None:
            self.cgroups.close()
