"""One account's runner process, supervised (docs/security.md): trust ends at the process.

The code inside can write the process's pipes. So this takes an answer only for a call it sent to
that process, in its op's shape (adapters/runner_protocol.py), and fails the process on anything
else; it measures each call's time itself, bills the CPU the process's cgroup used beyond that
time to the account, ends a process that overruns a call's limit, and freezes a process whose
calls are over once their limits have passed, so no work a run started outlives it. Its pipe is
read on the server's event loop when there is one (no thread between the pipe and the request
waiting for the answer), else on a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import math
import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from headwater.adapters.local.deadlines import Deadlines
from headwater.adapters.local.runner_io import LineSplitter, running_loop, write_all
from headwater.adapters.local.runner_launch import Launched, Launcher
from headwater.adapters.runner_protocol import GRACE_S, RUN_OPS, PartialHandler, ProtocolViolation, check_final
from headwater.ports import RunnerError

log = logging.getLogger("headwater.runner")

ComputeBill = Callable[[str, int], None]
"""(user id, milliseconds): CPU an account's process used beyond its calls' measured time."""

STOP_GRACE_S = 5.0  # how long a runner may take to finish once asked to stop, before it is killed
_BILL_EVERY_S = 1.0  # how often a busy process's CPU is read (and each time it is frozen or ends)
_CLOSER = ThreadPoolExecutor(2, thread_name_prefix="runner-closer")  # waits for an exited process
_READ_BYTES = 1 << 16
_LOOP_LINE_BYTES = 1 << 20  # a longer answer is parsed off the event loop
_FLUSHER = ThreadPoolExecutor(2, thread_name_prefix="runner-flusher")  # requests a full pipe held back


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
            if not write_all(live.proc, data):
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
        if running_loop() is loop:
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

    def close(self, grace_s: float = STOP_GRACE_S) -> None:
        """Ends the process: thawed (a frozen process acts on nothing), asked to finish by the end
        of its input, and past `grace_s` killed with whatever else is in its cgroup."""
        live = self.live
        with self._lock:
            waiting, self.waiting = list(self.waiting), deque()
        for call in waiting:
            call.future.set_exception(RunnerError("RUNNER_CRASHED", "the runner was stopped"))
        if live is None:
            return
        with live.lock:
            live.closed = True  # no further call, and no freeze
            live.frozen = False
        if live.cgroup is not None:
            live.cgroup.thaw()
        if live.proc.poll() is None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                assert live.proc.stdin is not None
                live.proc.stdin.close()  # the runner finishes and exits when its input ends
                live.proc.wait(timeout=grace_s)
        if live.cgroup is not None:
            live.cgroup.kill_all()  # what outlived it: a sandbox whose init has not ended yet
        with contextlib.suppress(OSError):
            live.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            live.proc.wait(timeout=5)
