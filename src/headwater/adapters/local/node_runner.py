"""A pool of long-lived Node runner processes speaking JSON lines (docs/runner-protocol.md).

Each process multiplexes many calls; a call goes to the process picked by its instance (or
bundle hash), so that process keeps the instance's worker and bundle warm. A process that dies
fails its pending calls and is started again on the next call.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import logging
import signal
import subprocess
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from headwater.domain.events import Emit
from headwater.domain.models import ComponentDefinition
from headwater.domain.runs import RunResult
from headwater.ports import Bundle, Instance, RunnerError
from headwater.settings import Settings

log = logging.getLogger("headwater.runner")

PartialHandler = Callable[[dict[str, Any]], None]
_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: the kernel kills the runner when the service dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


class RunnerProcess:
    def __init__(self, settings: Settings, index: int) -> None:
        self.settings = settings
        self.index = index
        self.known_hashes: set[str] = set()
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[Future, PartialHandler | None]] = {}
        self._write_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self.proc: subprocess.Popen | None = None

    def _start(self) -> None:
        runner_dir = self.settings.runner_dir
        tmp = self.settings.data_dir / "tmp" / f"runner-{self.index}"
        tmp.mkdir(parents=True, exist_ok=True)
        command = [
            str(self.settings.node),
            "--permission",
            "--allow-worker",
            f"--allow-fs-read={runner_dir}",
            f"--allow-fs-write={tmp}",
            "--disable-warning=SecurityWarning",
            str(runner_dir / "src" / "stdio.mjs"),
        ]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp,
            env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp)},
            preexec_fn=_die_with_parent,
        )
        self.known_hashes = set()
        threading.Thread(target=self._read, args=(self.proc,), daemon=True, name=f"runner-{self.index}").start()
        threading.Thread(target=self._drain_stderr, args=(self.proc,), daemon=True).start()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _ensure_started(self) -> subprocess.Popen:
        with self._start_lock:
            if not self.alive:
                self._start()
            assert self.proc is not None
            return self.proc

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                log.warning("runner %d wrote a line that is not JSON: %.200r", self.index, line)
                continue
            entry = self._pending.get(message.get("id"))
            if entry is None:
                continue
            future, on_partial = entry
            if "partial" in message:
                if on_partial:
                    on_partial(message)
                continue
            self._pending.pop(message["id"], None)
            future.set_result(message)
        proc.wait()
        for request_id in list(self._pending):
            future, _ = self._pending.pop(request_id)
            future.set_exception(RunnerError("RUNNER_CRASHED", f"runner process exited with {proc.returncode}"))

    def _drain_stderr(self, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.warning("runner %d: %s", self.index, line.decode(errors="replace").rstrip())

    def request(self, message: dict[str, Any], timeout_s: float, on_partial: PartialHandler | None) -> dict:
        proc = self._ensure_started()
        request_id = next(self._ids)
        future: Future = Future()
        self._pending[request_id] = (future, on_partial)
        line = json.dumps({"id": request_id, **message}, separators=(",", ":")) + "\n"
        try:
            with self._write_lock:
                assert proc.stdin is not None
                proc.stdin.write(line.encode())
                proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._pending.pop(request_id, None)
            raise RunnerError("RUNNER_CRASHED", "runner process is not accepting requests") from None
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            self._pending.pop(request_id, None)
            raise RunnerError("TIMEOUT", f"the runner did not answer within {timeout_s:g} s") from None

    def close(self) -> None:
        if self.proc is not None and self.alive:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


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


def instance_request(instance: Instance) -> dict[str, Any]:
    return {"instance": instance.id, "env": instance.env, "props": instance.props, "db": instance.db,
            "http": instance.http, "memory_mb": instance.memory_mb}


class NodeRunnerPool:
    """The Runner port over the pool: typed requests in, wire dicts only in here."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.processes = [RunnerProcess(settings, i) for i in range(max(1, settings.runner_processes))]

    def _pick(self, affinity: str) -> RunnerProcess:
        return self.processes[zlib.crc32(affinity.encode()) % len(self.processes)]

    def describe(self, bundle: Bundle, timeout_ms: int) -> ComponentDefinition:
        return ComponentDefinition.from_runner(self.call("describe", {"timeout_ms": timeout_ms}, bundle))

    def run(self, bundle: Bundle, instance: Instance, event: Any, timeout_ms: int,
            on_respond: Callable[[dict[str, Any]], None] | None = None) -> RunResult:
        on_partial = (lambda message: on_respond(message.get("response") or {})) if on_respond else None
        request = {**instance_request(instance), "event": event, "timeout_ms": timeout_ms}
        return run_result(self.call("run", request, bundle, on_partial))

    def hook(self, bundle: Bundle, instance: Instance, hook: str, timeout_ms: int) -> RunResult:
        request = {**instance_request(instance), "hook": hook, "timeout_ms": timeout_ms}
        return run_result(self.call("hook", request, bundle))

    def run_step(self, bundle: Bundle, instance: Instance, steps: dict[str, Any], timeout_ms: int) -> RunResult:
        request = {**instance_request(instance), "steps": steps, "timeout_ms": timeout_ms}
        return run_result(self.call("run", request, bundle))

    def additional_props(self, bundle: Bundle, instance_id: str, props: dict[str, Any],
                         timeout_ms: int) -> list[dict[str, Any]]:
        request = {"instance": instance_id, "props": props, "timeout_ms": timeout_ms}
        return list(self.call("additional_props", request, bundle)["configurable_props"])

    def options(self, bundle: Bundle, instance_id: str, prop: str, props: dict[str, Any], page: int,
                prev_context: Any, query: str | None, timeout_ms: int) -> dict[str, Any]:
        request = {"instance": instance_id, "prop": prop, "props": props, "page": page, "prevContext": prev_context,
                   "timeout_ms": timeout_ms, **({"query": query} if query is not None else {})}
        return self.call("options", request, bundle)

    def call(
        self,
        op: str,
        request: dict[str, Any],
        bundle: Bundle | None = None,
        on_partial: PartialHandler | None = None,
    ) -> dict[str, Any]:
        """One runner op on the process that keeps this instance (or bundle) warm."""
        process = self._pick(request.get("instance") or (bundle.hash if bundle else op))
        timeout_s = request.get("timeout_ms", 30_000) / 1000 + _GRACE_S
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

    def close(self) -> None:
        for process in self.processes:
            process.close()
