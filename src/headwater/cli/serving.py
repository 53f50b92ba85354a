"""`headwater serve` with several serving processes (HEADWATER_PROCESSES, default one per core).

This process binds the port and starts the serving processes, each `headwater serve` again with
the listening socket inherited (HEADWATER_LISTEN_FD) and its index (HEADWATER_PROCESS_INDEX):
each accepts connections from the one queue, so a busy process takes fewer. The first one starts
alone (it publishes the shipped registry), the others once it is up. A serving process that dies
is started again (a crash loop waits longer each time); connections wait in the socket's queue
meanwhile, its queued work waits in the store for it, and what its runners left (frozen or not)
is ended and their cgroups removed before it starts again. SIGTERM or SIGINT stops them all: each
gets SIGTERM and ends its runners, and one still running after `STOP_WAIT_S` is killed. The
serving processes die with this one (PR_SET_PDEATHSIG), so none is left behind by a kill -9.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

from headwater.adapters.local.cgroups import reclaim_left
from headwater.settings import Settings

log = logging.getLogger("headwater")

STOP_WAIT_S = 30.0
READY_WAIT_S = 300.0  # the first process's start (migrations, the shipped registry) may take this long
RESTART_FIRST_S, RESTART_MOST_S = 0.5, 30.0
STABLE_S = 30.0  # a process that ran this long before it died is restarted at once

LISTEN_FD = "HEADWATER_LISTEN_FD"
READY_FD = "HEADWATER_READY_FD"
_PR_SET_PDEATHSIG = 1


@dataclass
class _Serving:
    index: int
    process: subprocess.Popen[bytes]
    started: float
    delay_s: float = 0.0


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def listening_socket(settings: Settings) -> socket.socket:
    """The port, bound once for every serving process."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.create_server((settings.host, settings.port), family=family, backlog=4096)
    sock.set_inheritable(True)
    return sock


class Supervisor:
    def __init__(self, settings: Settings, log_level: str) -> None:
        self.settings = settings
        self.log_level = log_level
        self.sock = listening_socket(settings)
        self.serving: dict[int, _Serving] = {}

    def _start(self, index: int, delay_s: float = 0.0) -> _Serving:
        ready_read, ready_write = os.pipe()
        env = dict(os.environ, HEADWATER_PROCESS_INDEX=str(index), HEADWATER_PROCESSES=str(self.settings.processes),
                   HEADWATER_DATA_DIR=str(self.settings.data_dir), HEADWATER_HOST=self.settings.host,
                   HEADWATER_PORT=str(self.settings.port), **{LISTEN_FD: str(self.sock.fileno()),
                                                               READY_FD: str(ready_write)})
        process = subprocess.Popen([sys.executable, "-m", "headwater.cli", "serve", "--log-level", self.log_level],
                                   env=env, pass_fds=(self.sock.fileno(), ready_write),
                                   preexec_fn=_die_with_parent)  # noqa: PLW1509 - this process has no threads
        os.close(ready_write)
        serving = _Serving(index, process, time.monotonic(), delay_s)
        self.serving[index] = serving
        self._await_ready(ready_read, serving)
        return serving

    def _await_ready(self, ready_read: int, serving: _Serving) -> None:
        try:
            readable, _, _ = select.select([ready_read], [], [], READY_WAIT_S)
            if not readable or not os.read(ready_read, 1):
                log.error("serving process %d did not start (exit code %s)", serving.index, serving.process.poll())
        finally:
            os.close(ready_read)

    def run(self) -> None:
        """Until a stop signal (Stopped, from stop_on_signals): keeps every serving process up."""
        log.info("serving on %s with %d processes", self.settings.base_url, self.settings.processes)
        try:
            for index in range(self.settings.processes):
                self._start(index)
            while True:
                pid, status = os.wait()
                ended = next((s for s in self.serving.values() if s.process.pid == pid), None)
                if ended is None:
                    continue
                ended.process.returncode = os.waitstatus_to_exitcode(status)
                self._restart(ended)
        finally:
            self.stop()

    def _restart(self, ended: _Serving) -> None:
        reclaim_left(self.settings.run_dir)  # its runners, frozen or not, and their cgroups
        ran_s = time.monotonic() - ended.started
        delay = 0.0 if ran_s >= STABLE_S else min(RESTART_MOST_S, max(RESTART_FIRST_S, ended.delay_s * 2))
        log.error("serving process %d ended (exit code %s after %.0f s); starting it again in %.1f s",
                  ended.index, ended.process.returncode, ran_s, delay)
        time.sleep(delay)
        self._start(ended.index, delay)

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):  # the stop is not cut short by the signal coming again
            signal.signal(sig, signal.SIG_IGN)
        running = [s.process for s in self.serving.values() if s.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for process in running:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("serving process %d did not stop in %.0f s: killed", process.pid, STOP_WAIT_S)
                process.kill()
                process.wait()
        reclaim_left(self.settings.run_dir)  # what a serving process that was killed left
        self.sock.close()


def supervise(settings: Settings, log_level: str) -> None:
    """Raises Stopped (from stop_on_signals) once every serving process has stopped."""
    Supervisor(settings, log_level).run()


def inherited_socket() -> socket.socket | None:
    """In a serving process: the port its supervisor bound."""
    fd = os.environ.pop(LISTEN_FD, "")
    return socket.socket(fileno=int(fd)) if fd else None


def tell_ready() -> None:
    """In a serving process: its supervisor may start the next one."""
    fd = os.environ.pop(READY_FD, "")
    if fd:
        os.write(int(fd), b"1")
        os.close(int(fd))
