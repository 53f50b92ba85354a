"""Node runner processes speaking JSON lines (docs/runner-protocol.md), one per account.

Each account's code runs in its own runner process, in its own sandbox (docs/security.md): a
crash, a leak or a memory blow-up of one account's code fails only that account's in-flight
calls. Calls without an instance (describe, additional_props, options) share one more process,
"describe". At most `HEADWATER_RUNNER_PROCESSES` processes live at once: past that the least
recently used idle one is stopped, and idle ones are stopped after `HEADWATER_RUNNER_IDLE_S`. A
process multiplexes many calls, keeps each instance's worker and each bundle warm, and is
started again on the next call after it dies.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import logging
import os
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.adapters.local.cgroups import CgroupRoot, CgroupUnavailable, RunnerCgroup
from headwater.adapters.local.egress import EgressProxy
from headwater.adapters.local.sandbox import EGRESS, RUNNER, TMP, Bind, Sandbox, sandbox_for
from headwater.domain.events import Emit
from headwater.domain.models import ComponentDefinition
from headwater.domain.runs import RunResult
from headwater.ports import Bundle, Instance, RunnerError
from headwater.settings import Settings

log = logging.getLogger("headwater.runner")

PartialHandler = Callable[[dict[str, Any]], None]
DESCRIBE = "describe"  # the process shared by calls that have no account
_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1
_EXTRA_CA = "/etc/headwater-extra-ca.pem"
_SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="runner-spawner")


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


@dataclass
class Launched:
    """One start of a runner process: what to clean up once it has exited."""

    proc: subprocess.Popen
    name: str
    cgroup: RunnerCgroup | None
    pending: dict[int, tuple[Future, PartialHandler | None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False


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

    def __init__(self, account: str, launcher: Launcher) -> None:
        self.account = account
        self.launcher = launcher
        self.known_hashes: set[str] = set()
        self.busy = 0  # calls in flight (the pool only stops idle processes)
        self.last_used = time.monotonic()
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self.live: Launched | None = None

    @property
    def alive(self) -> bool:
        return self.live is not None and self.live.proc.poll() is None

    def _ensure_started(self) -> Launched:
        with self._start_lock:
            if not self.alive:
                self.live = self.launcher.start(self.account)
                self.known_hashes = set()
                threading.Thread(target=self._read, args=(self.live,), daemon=True,
                                 name=f"runner-{self.live.name}").start()
                threading.Thread(target=self._drain_stderr, args=(self.live,), daemon=True).start()
            assert self.live is not None
            return self.live

    def _read(self, live: Launched) -> None:
        assert live.proc.stdout is not None
        for line in live.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                log.warning("runner %s wrote a line that is not JSON: %.200r", live.name, line)
                continue
            entry = live.pending.get(message.get("id"))
            if entry is None:
                continue
            future, on_partial = entry
            if "partial" in message:
                if on_partial:
                    on_partial(message)
                continue
            live.pending.pop(message["id"], None)
            future.set_result(message)
        live.proc.wait()
        error = self._exit_error(live)
        with live.lock:
            live.closed = True
            pending, live.pending = live.pending, {}
        for future, _ in pending.values():
            future.set_exception(error)
        self.launcher.stopped(live.name, live.cgroup)

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
            log.warning("runner %s: %s", live.name, line.decode(errors="replace").rstrip())

    def request(self, message: dict[str, Any], timeout_s: float, on_partial: PartialHandler | None) -> dict:
        live = self._ensure_started()
        request_id = next(self._ids)
        future: Future = Future()
        with live.lock:
            if live.closed:
                raise RunnerError("RUNNER_CRASHED", "runner process is not accepting requests")
            live.pending[request_id] = (future, on_partial)
        line = json.dumps({"id": request_id, **message}, separators=(",", ":")) + "\n"
        try:
            with self._write_lock:
                assert live.proc.stdin is not None
                live.proc.stdin.write(line.encode())
                live.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            live.pending.pop(request_id, None)
            raise RunnerError("RUNNER_CRASHED", "runner process is not accepting requests") from None
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            live.pending.pop(request_id, None)
            raise RunnerError("TIMEOUT", f"the runner did not answer within {timeout_s:g} s") from None

    def close(self) -> None:
        live = self.live
        if live is None or live.proc.poll() is not None:
            return
        try:
            assert live.proc.stdin is not None
            live.proc.stdin.close()  # the runner finishes and exits when its input ends
            live.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            live.proc.kill()
            live.proc.wait(timeout=5)


def run_result(data: dict[str, Any]) -> RunResult:
    """The wire form of a run or hook result (docs/runner-protocol.md) as a RunResult."""
    return RunResult(
        emits=[Emit(e.get("event"), e.get("meta") or {}) for e in data.get("emits", [])],
        db_writes=data.get("db_writes") or {},
        logs=data.get("logs") or [],
        response=data.get("response"),
        error=data.get("error"),
        duration_ms=float(data.get("duration_ms") or 0),
        return_value=data.get("return_value"),
        exports=data.get("exports") or {},
        sends=data.get("sends") or [],
        flow_exit=data.get("flow_exit"),
    )


class BatchResults:
    """The partials of a `run` with `events`: each run's result as soon as the runner knows it,
    and `respond()`s handed on with their run's index. When the runner dies or times out part
    way, the runs it reported keep their results and only the rest fail."""

    def __init__(self, count: int, on_respond: Callable[[int, dict[str, Any]], None] | None) -> None:
        self.count = count
        self.on_respond = on_respond
        self.results: dict[int, RunResult] = {}

    def __call__(self, message: dict[str, Any]) -> None:
        index = int(message.get("index", 0))
        if message.get("partial") == "result":
            error = message.get("error") or {}
            self.results[index] = (run_result(message.get("result") or {}) if message.get("ok") else
                                   RunResult.failed(error.get("code", "RUNTIME_ERROR"), error.get("message", ""),
                                                    error.get("stack")))
        elif self.on_respond is not None:
            self.on_respond(index, message.get("response") or {})

    def outcomes(self, failure: RunnerError | None) -> list[RunResult]:
        if failure is not None and not self.results:
            raise failure
        missing = (RunResult.failed(failure.code, failure.message, failure.stack) if failure else
                   RunResult.failed("RUNNER_CRASHED", "the runner did not report this run"))
        return [self.results.get(i) or missing for i in range(self.count)]


def instance_request(instance: Instance) -> dict[str, Any]:
    return {"instance": instance.id, "env": instance.env, "props": instance.props, "db": instance.db,
            "http": instance.http, "memory_mb": instance.memory_mb}


def _cgroups(settings: Settings, sandbox: Sandbox | None) -> CgroupRoot | None:
    if sandbox is None:
        return None
    try:
        return CgroupRoot.create()
    except CgroupUnavailable as e:
        log.warning("runner processes run without a cgroup (%s): their memory and threads are bounded only "
                    "per worker by V8, not per process by the kernel", e)
        return None


class RunnerRequests(ABC):
    """The Runner port's methods as runner requests (docs/runner-protocol.md), over `call`: the
    local pool and the runner Lambda's client differ only in how a request travels."""

    @abstractmethod
    def call(self, op: str, request: dict[str, Any], bundle: Bundle | None = None,
             on_partial: PartialHandler | None = None, account: str = DESCRIBE,
             timeout_s: float | None = None) -> dict[str, Any]:
        """Sends one request and returns the runner's result; `on_partial` gets its partials."""

    def meta_fields(self) -> dict[str, Any]:
        """Added to the requests that have no instance (describe, additional_props, options)."""
        return {}

    def describe(self, bundle: Bundle, timeout_ms: int) -> ComponentDefinition:
        request = {"timeout_ms": timeout_ms, **self.meta_fields()}
        return ComponentDefinition.from_runner(self.call("describe", request, bundle))

    def run(self, bundle: Bundle, instance: Instance, event: Any, timeout_ms: int,
            on_respond: Callable[[dict[str, Any]], None] | None = None) -> RunResult:
        on_partial = (lambda message: on_respond(message.get("response") or {})) if on_respond else None
        request = {**instance_request(instance), "event": event, "timeout_ms": timeout_ms}
        return run_result(self.call("run", request, bundle, on_partial, account=_account(instance)))

    def run_many(self, bundle: Bundle, instance: Instance, events: list[Any], timeout_ms: int,
                 on_respond: Callable[[int, dict[str, Any]], None] | None = None) -> list[RunResult]:
        collect = BatchResults(len(events), on_respond)
        request = {**instance_request(instance), "events": events, "timeout_ms": timeout_ms}
        try:
            self.call("run", request, bundle, collect, account=_account(instance),
                      timeout_s=len(events) * timeout_ms / 1000 + _GRACE_S)
        except RunnerError as e:
            return collect.outcomes(e)
        return collect.outcomes(None)

    def hook(self, bundle: Bundle, instance: Instance, hook: str, timeout_ms: int) -> RunResult:
        request = {**instance_request(instance), "hook": hook, "timeout_ms": timeout_ms}
        return run_result(self.call("hook", request, bundle, account=_account(instance)))

    def run_step(self, bundle: Bundle, instance: Instance, steps: dict[str, Any], timeout_ms: int) -> RunResult:
        request = {**instance_request(instance), "steps": steps, "timeout_ms": timeout_ms}
        return run_result(self.call("run", request, bundle, account=_account(instance)))

    def additional_props(self, bundle: Bundle, instance_id: str, props: dict[str, Any],
                         timeout_ms: int) -> list[dict[str, Any]]:
        request = {"instance": instance_id, "props": props, "timeout_ms": timeout_ms, **self.meta_fields()}
        return list(self.call("additional_props", request, bundle)["configurable_props"])

    def options(self, bundle: Bundle, instance_id: str, prop: str, props: dict[str, Any], page: int,
                prev_context: Any, query: str | None, timeout_ms: int) -> dict[str, Any]:
        request = {"instance": instance_id, "prop": prop, "props": props, "page": page, "prevContext": prev_context,
                   "timeout_ms": timeout_ms, **self.meta_fields(), **({"query": query} if query is not None else {})}
        return self.call("options", request, bundle)


class NodeRunnerPool(RunnerRequests):
    """The Runner port over per-account processes: typed requests in, wire dicts only in here."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        sandbox = sandbox_for(settings)  # SandboxUnavailable: the service must not start
        self.egress = EgressProxy(settings.allow_loopback_urls, settings.allow_private_urls)
        self.cgroups = _cgroups(settings, sandbox)
        self.launcher = Launcher(settings, sandbox, self.cgroups, self.egress)
        self.max_processes = max(1, settings.runner_processes)
        self._processes: OrderedDict[str, RunnerProcess] = OrderedDict()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        threading.Thread(target=self._reap_idle, daemon=True, name="runner-reaper").start()

    # which process

    def _acquire(self, account: str) -> RunnerProcess:
        """The account's process, marked busy; past the bound, the least recently used idle one is
        stopped first (or, all busy, this waits for one to finish)."""
        with self._cond:
            while True:
                process = self._processes.get(account)
                if process is None and len(self._processes) < self.max_processes:
                    process = self._processes[account] = RunnerProcess(account, self.launcher)
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
        process = self._acquire(account)
        try:
            return self._call(process, op, request, bundle, on_partial, timeout_s)
        finally:
            self._release(process)

    def _call(self, process: RunnerProcess, op: str, request: dict[str, Any], bundle: Bundle | None,
              on_partial: PartialHandler | None, timeout_s: float | None = None) -> dict[str, Any]:
        timeout_s = timeout_s or request.get("timeout_ms", 30_000) / 1000 + _GRACE_S
        message: dict[str, Any] = {"op": op, **request}
        if bundle is not None:
            warm = bundle.hash in process.known_hashes
            message["bundle"] = {"hash": bundle.hash} if warm else {"hash": bundle.hash, "code": bundle.code}
        response = process.request(message, timeout_s, on_partial)
        if bundle is not None and not response.get("ok") and response["error"].get("code") == "BUNDLE_MISSING":
            message["bundle"] = {"hash": bundle.hash, "code": bundle.code}
            response = process.request(message, timeout_s, on_partial)
        if response.get("ok"):
            if bundle is not None:
                process.known_hashes.add(bundle.hash)
            return response["result"]
        error = response.get("error") or {}
        raise RunnerError(error.get("code", "RUNTIME_ERROR"), error.get("message", ""), error.get("stack"))

    def invoke(self, request: dict[str, Any], account: str) -> dict[str, Any]:
        """What the runner Lambda (lambda.mjs) answers to one invocation: the request run whole on
        the account's sandboxed process, its partials collected into `partials` (the emulated
        deployment's runner function)."""
        process = self._acquire(account)
        partials: list[dict[str, Any]] = []
        try:
            timeout_s = request.get("timeout_ms", 30_000) / 1000 + _GRACE_S
            response = process.request(request, timeout_s, partials.append)
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
        self.egress.close()
        if self.cgroups is not None:
            self.cgroups.close()


def _account(instance: Instance) -> str:
    """Whose process runs an instance: its account (never shared with another account's)."""
    return f"account:{instance.account}" if instance.account else "account:-"
