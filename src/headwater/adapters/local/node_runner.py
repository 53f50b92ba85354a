"""Node runner processes speaking JSON lines (docs/runner-protocol.md), one per account.

Each account's code runs in its own runner process, in its own sandbox (docs/security.md), and
nothing in a process ever serves another account: its runs, and the describe, `options` and
`additionalProps` calls its account makes. Calls the operator makes (registry publishing) have
a process of their own. At most `HEADWATER_RUNNER_PROCESSES` processes live at once: past that
the least recently used idle one is stopped, and idle ones are stopped after
`HEADWATER_RUNNER_IDLE_S`.

Each process is started by `runner_launch.py` and supervised by `runner_process.py` (trust ends at
the process: answers taken only for calls sent, times measured and CPU billed from outside, calls
past their limit ending the process, idle processes frozen), its pipes handled by `runner_io.py`,
its limits timed by `deadlines.py`. A run that waits holds no thread. An account has at most
`HEADWATER_ACCOUNT_MAX_CONCURRENT_RUNS` runs in flight; the rest wait in its process's queue.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from headwater.adapters.local.deadlines import Deadlines
from headwater.adapters.local.egress import EgressProxy
from headwater.adapters.local.runner_launch import Launcher, cgroups_for, runner_command
from headwater.adapters.local.runner_process import STOP_GRACE_S, ComputeBill, RunnerProcess
from headwater.adapters.local.sandbox import sandbox_for
from headwater.adapters.runner_protocol import DESCRIBE, GRACE_S, PartialHandler, RunnerRequests, instance_request
from headwater.ports import Bundle, RunnerError
from headwater.settings import Settings

log = logging.getLogger("headwater.runner")

__all__ = ["DESCRIBE", "NodeRunnerPool", "NotRunning", "instance_request", "runner_command"]


class NotRunning(Exception):
    """A call asked not to wait finds no runner process of its account running."""


class NodeRunnerPool(RunnerRequests):
    """The Runner port over per-account processes: typed requests in, wire dicts only in here."""

    def __init__(self, settings: Settings, bill: ComputeBill | None = None) -> None:
        self.settings = settings
        self.bill = bill
        sandbox = sandbox_for(settings)  # SandboxUnavailable: the service must not start
        self.egress = EgressProxy(settings.allow_loopback_urls, settings.allow_private_urls)
        self.cgroups = cgroups_for(settings, sandbox)
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
        that is running already: NotRunning otherwise."""
        with self._cond:
            while True:
                process = self._processes.get(account)
                if not wait and (process is None or not process.alive):
                    raise NotRunning(f"no runner process is running for {account}")
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

    def cpu_ns(self, account: str) -> int | None:
        """CPU the account's runner process (its cgroup) has used, or None: not running, not measured."""
        process = self._processes.get(account)
        live = process.live if process is not None else None
        return live.cgroup.cpu_ns() if live is not None and live.cgroup is not None else None

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
        bill_to: str = "",
    ) -> dict[str, Any]:
        """One runner op on the account's process (which keeps its instances and bundles warm)."""
        return self.submit(op, request, bundle, on_partial, account, timeout_s, bill_to).result()

    def submit(self, op: str, request: dict[str, Any], bundle: Bundle | None = None,
               on_partial: PartialHandler | None = None, account: str = DESCRIBE,
               timeout_s: float | None = None, bill_to: str = "", wait: bool = True) -> Future[dict[str, Any]]:
        """`call` whose result comes in a Future, completed where the process's pipe is read. Without
        `wait`, NotRunning unless the account's process is running (nothing here then blocks)."""
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

    def invoke(self, request: dict[str, Any], account: str) -> dict[str, Any]:
        """What the runner Lambda (lambda.mjs) answers to one invocation: the request run whole on
        the account's sandboxed process, its partials collected into `partials`, a failed call's
        too (a batch's runs reported before its process died keep their results), as lambda.mjs
        does (the emulated deployment's runner function)."""
        process = self._acquire(account)
        partials: list[dict[str, Any]] = []
        try:
            limit_s = request.get("timeout_ms", 30_000) / 1000 * max(1, len(request.get("events") or [1]))
            response = process.submit(str(request.get("op")), request, limit_s, partials.append).result()
        except RunnerError as e:
            response = {"ok": False, "error": {"code": e.code, "message": e.message}}
        finally:
            self._release(process)
        return {**response, "partials": partials} if partials else response

    def close(self, grace_s: float = STOP_GRACE_S) -> None:
        """Ends every runner process, all at once: each gets `grace_s` to finish once asked, then
        is killed; then whatever is left in their cgroups (a process retired meanwhile, one
        frozen) is ended and the cgroups removed."""
        self._stop.set()
        with self._cond:
            processes = list(self._processes.values())
            self._processes.clear()
        self.deadlines.stop()  # no freeze, and no call's limit, while they stop
        if processes:
            with ThreadPoolExecutor(len(processes), thread_name_prefix="runner-stopper") as stopping:
                for process in processes:
                    stopping.submit(process.close, grace_s)
        self.egress.close()
        if self.cgroups is not None:
            self.cgroups.close()
