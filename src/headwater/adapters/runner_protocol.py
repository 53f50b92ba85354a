"""The runner protocol on the service's side (docs/runner-protocol.md), shared by the local pool
and the runner Lambda's client.

Trust ends at the runner process: whatever it writes may be forged by the code it runs. So an
answer is taken only for a request that was sent, and only in the shape its op has; anything
else is a `ProtocolViolation`, and the process that sent it is treated as failed. Durations are
never the runner's word: the caller measures them (`Clock`).
"""

from __future__ import annotations

import asyncio
import functools
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from headwater.domain.events import Emit
from headwater.domain.http_interface import RESPOND_STATUSES
from headwater.domain.models import ComponentDefinition
from headwater.domain.runs import RunResult
from headwater.ports import Bundle, Finished, Instance, Responded, RunMessage, RunnerError, Timed

PartialHandler = Callable[[dict[str, Any]], None]
DESCRIBE = "describe"  # the account of calls made for the operator (registry publishing)
GRACE_S = 10.0  # past a call's own limit, how long the runner has to say it stopped it
RUN_OPS = frozenset({"run", "hook"})
T = TypeVar("T")


class ProtocolViolation(RunnerError):
    """The runner said something it was not asked, or not in the shape of its op."""

    def __init__(self, message: str) -> None:
        super().__init__("RUNNER_PROTOCOL", f"the runner broke the protocol: {message}")


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise ProtocolViolation(what)


def check_error(error: Any) -> dict[str, Any]:
    _need(_is_dict(error), "an error that is not an object")
    _need(isinstance(error.get("code"), str) and 0 < len(error["code"]) <= 64, "an error without a code")
    _need(isinstance(error.get("message", ""), str), "an error message that is not a string")
    _need(error.get("stack") is None or isinstance(error["stack"], str), "an error stack that is not a string")
    return error


def check_final(message: dict[str, Any]) -> dict[str, Any]:
    """A final answer's envelope: `ok` with a result object, or an error."""
    if message.get("ok") is True:
        _need(_is_dict(message.get("result")), "an answer without a result object")
    elif message.get("ok") is False:
        check_error(message.get("error"))
    else:
        raise ProtocolViolation("an answer that is neither ok nor failed")
    return message


def check_response(response: Any) -> dict[str, Any]:
    """An HTTP answer given by `respond()` (the runner's part of DECISIONS' HTTP interface)."""
    _need(_is_dict(response), "a response that is not an object")
    status = response.get("status")
    _need(isinstance(status, int) and not isinstance(status, bool) and status in RESPOND_STATUSES,
          "a response status outside 100..599")
    headers = response.get("headers") or {}
    _need(_is_dict(headers) and all(isinstance(k, str) and (isinstance(v, str) or (
        isinstance(v, list) and all(isinstance(item, str) for item in v))) for k, v in headers.items()),
          "response headers that are not strings (or lists of strings)")
    _need(response.get("body") is None or isinstance(response["body"], str), "a response body that is not a string")
    return response


def run_result(data: Any) -> RunResult:
    """The wire form of a run or hook result as a RunResult, its shape checked; `duration_ms`
    is left at 0 for the caller to set from its own clock."""
    _need(_is_dict(data), "a run result that is not an object")
    emits, logs, writes = data.get("emits") or [], data.get("logs") or [], data.get("db_writes") or {}
    _need(isinstance(emits, list) and all(_is_dict(e) and _is_dict(e.get("meta") or {}) for e in emits),
          "emits that are not a list of objects")
    _need(isinstance(logs, list) and all(_is_dict(line) and isinstance(line.get("message", ""), str) for line in logs),
          "logs that are not a list of objects")
    _need(_is_dict(writes), "db_writes that is not an object")
    response = data.get("response")
    if response is not None:
        check_response(response)
    error = data.get("error")
    if error is not None:
        check_error(error)
    exports, sends = data.get("exports") or {}, data.get("sends") or []
    _need(_is_dict(exports) and isinstance(sends, list), "exports or sends of the wrong shape")
    flow_exit = data.get("flow_exit")
    _need(flow_exit is None or _is_dict(flow_exit), "a flow_exit that is not an object")
    return RunResult(
        emits=[Emit(e.get("event"), e.get("meta") or {}) for e in emits],
        db_writes=writes,
        logs=logs,
        response=response,
        error=error,
        return_value=data.get("return_value"),
        exports=exports,
        sends=sends,
        flow_exit=flow_exit,
    )


CpuProbe = Callable[[], "int | None"]
"""Nanoseconds of CPU the runner process a call went to has used so far, read from outside it (its
cgroup); None where that is not measured."""


class Clock:
    """A call's time as the caller sees it: from the request sent to each answer received."""

    __slots__ = ("mark",)

    def __init__(self) -> None:
        self.mark = time.monotonic()

    def lap_ms(self) -> float:
        """Milliseconds since the start or the previous lap (a batch's runs go one after another)."""
        now = time.monotonic()
        elapsed, self.mark = (now - self.mark) * 1000, now
        return elapsed


class BatchResults:
    """The partials of a `run` with `events`: each run's result as soon as the runner knows it,
    and `respond()`s handed on with their run's index. When the runner dies or times out part
    way, the runs it reported keep their results and only the rest fail. A partial for an index
    out of range, or a second result for one, is a ProtocolViolation."""

    def __init__(self, count: int, on_respond: Callable[[int, dict[str, Any]], None] | None,
                 cpu: CpuProbe | None = None) -> None:
        self.count = count
        self.on_respond = on_respond
        self.results: dict[int, RunResult] = {}
        self.responded: set[int] = set()
        self.clock = Clock()
        self.cpu = cpu
        self.cpu_mark = cpu() if cpu is not None else None

    def _share_cpu(self) -> None:
        """The CPU the runner process used over the call, read twice (not once per run: a read is a
        file read on the loop), shared among the reported runs by their time."""
        if self.cpu is None or self.cpu_mark is None or not self.results:
            return
        now = self.cpu()
        total_ms = sum(r.duration_ms for r in self.results.values())
        if now is None or total_ms <= 0:
            return
        used_ms = (now - self.cpu_mark) / 1e6
        for result in self.results.values():
            result.cpu_ms = round(used_ms * result.duration_ms / total_ms, 3)

    def __call__(self, message: dict[str, Any]) -> None:
        index = message.get("index", 0)
        _need(isinstance(index, int) and 0 <= index < self.count, "a partial for a run it was not sent")
        if message.get("partial") == "result":
            _need(index == len(self.results), "a result out of order")
            if message.get("ok") is True:
                result = run_result(message.get("result"))
            else:
                error = check_error(message.get("error"))
                result = RunResult.failed(error["code"], error.get("message", ""), error.get("stack"))
            result.duration_ms = self.clock.lap_ms()
            self.results[index] = result
        elif message.get("partial") == "respond":
            _need(index not in self.responded and index not in self.results, "a second response for one run")
            self.responded.add(index)
            response = check_response(message.get("response"))
            if self.on_respond is not None:
                self.on_respond(index, response)
        else:
            raise ProtocolViolation(f"an unknown partial {str(message.get('partial'))[:40]!r}")

    def outcomes(self, failure: RunnerError | None) -> list[RunResult]:
        self._share_cpu()
        if failure is not None and not self.results:
            failure.duration_ms = self.clock.lap_ms()  # the first run's, until the call failed
            raise failure
        code, message, stack = ((failure.code, failure.message, failure.stack) if failure else
                                ("RUNNER_CRASHED", "the runner did not report this run", None))
        outcomes = []
        for i in range(self.count):
            result = self.results.get(i)
            if result is None:
                result = RunResult.failed(code, message, stack)
                if i == len(self.results):
                    result.duration_ms = self.clock.lap_ms()  # the run going on when it failed
            outcomes.append(result)
        return outcomes


def instance_request(instance: Instance) -> dict[str, Any]:
    return {"instance": instance.id, "env": instance.env, "props": instance.props, "db": instance.db,
            "http": instance.http, "memory_mb": instance.memory_mb,
            **({"file": instance.file_name} if instance.file_name else {})}


def account_of(instance: Instance) -> str:
    """Whose process runs an instance: its account (never shared with another account's)."""
    return f"account:{instance.account}" if instance.account else "account:-"


def meta_account(account: str) -> str:
    """Whose process describes a component or answers its options: the caller's account."""
    return f"account:{account}" if account and account != DESCRIBE else DESCRIBE


class RunnerRequests(ABC):
    """The BlockingRunner port's methods as runner requests (docs/runner-protocol.md), over `call`: the
    local pool and the runner Lambda's client differ only in how a request travels. `call`
    checks the answer's envelope; the methods here check its op's shape."""

    @abstractmethod
    def call(self, op: str, request: dict[str, Any], bundle: Bundle | None = None,
             on_partial: PartialHandler | None = None, account: str = DESCRIBE,
             timeout_s: float | None = None, bill_to: str = "") -> dict[str, Any]:
        """Sends one request and returns the runner's result; `on_partial` gets its partials.
        `bill_to`: who pays for the CPU the process uses beyond this call's measured time."""

    def meta_fields(self) -> dict[str, Any]:
        """Added to the requests that have no instance (describe, additional_props, options)."""
        return {}

    def describe(self, bundle: Bundle, timeout_ms: int, account: str = DESCRIBE,
                 bill_to: str = "") -> Timed[ComponentDefinition]:
        request = {"timeout_ms": timeout_ms, **self.meta_fields()}

        return _measured(lambda: _described(self.call("describe", request, bundle, account=meta_account(account),
                                                      bill_to=bill_to)))

    def run(self, bundle: Bundle, instance: Instance, event: Any, timeout_ms: int,
            on_respond: Callable[[dict[str, Any]], None] | None = None) -> RunResult:
        batch_respond = (lambda _index, response: on_respond(response)) if on_respond else None
        return self.run_many(bundle, instance, [event], timeout_ms, batch_respond)[0]

    def run_many(self, bundle: Bundle, instance: Instance, events: list[Any], timeout_ms: int,
                 on_respond: Callable[[int, dict[str, Any]], None] | None = None) -> list[RunResult]:
        collect = BatchResults(len(events), on_respond)
        try:
            self.call("run", run_request(instance, events, timeout_ms), bundle, collect, account=account_of(instance),
                      timeout_s=batch_timeout_s(events, timeout_ms), bill_to=instance.bill_to)
        except RunnerError as e:
            return collect.outcomes(e)
        return collect.outcomes(None)

    def hook(self, bundle: Bundle, instance: Instance, hook: str, timeout_ms: int) -> RunResult:
        request = {**instance_request(instance), "hook": hook, "timeout_ms": timeout_ms}
        return self._timed(functools.partial(self.call, "hook", request, bundle, account=account_of(instance),
                                             bill_to=instance.bill_to))

    def run_step(self, bundle: Bundle, instance: Instance, steps: dict[str, Any], timeout_ms: int) -> RunResult:
        request = {**instance_request(instance), "steps": steps, "timeout_ms": timeout_ms}
        return self._timed(functools.partial(self.call, "run", request, bundle, account=account_of(instance),
                                             bill_to=instance.bill_to))

    @staticmethod
    def _timed(call: Callable[[], dict[str, Any]]) -> RunResult:
        timed = _measured(lambda: run_result(call()))
        timed.value.duration_ms = timed.duration_ms
        return timed.value

    def additional_props(self, bundle: Bundle, instance_id: str, props: dict[str, Any],
                         timeout_ms: int, account: str = DESCRIBE, bill_to: str = "") -> Timed[list[dict[str, Any]]]:
        request = {"instance": instance_id, "props": props, "timeout_ms": timeout_ms, **self.meta_fields()}

        return _measured(lambda: _configurable(self.call("additional_props", request, bundle,
                                                         account=meta_account(account), bill_to=bill_to)))

    def options(self, bundle: Bundle, instance_id: str, prop: str, props: dict[str, Any], page: int,
                prev_context: Any, query: str | None, timeout_ms: int, account: str = DESCRIBE,
                bill_to: str = "") -> Timed[dict[str, Any]]:
        request = {"instance": instance_id, "prop": prop, "props": props, "page": page, "prevContext": prev_context,
                   "timeout_ms": timeout_ms, **self.meta_fields(), **({"query": query} if query is not None else {})}

        return _measured(lambda: _options(self.call("options", request, bundle, account=meta_account(account),
                                                    bill_to=bill_to)))


def run_request(instance: Instance, events: list[Any], timeout_ms: int) -> dict[str, Any]:
    return {**instance_request(instance), "events": events, "timeout_ms": timeout_ms}


def batch_timeout_s(events: list[Any], timeout_ms: int) -> float:
    """How long a batch may take in all, the runner's grace included."""
    return len(events) * timeout_ms / 1000 + GRACE_S


def _described(result: dict[str, Any]) -> ComponentDefinition:
    try:
        return ComponentDefinition.from_runner(result)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ProtocolViolation("a description without a name or version") from None


def _configurable(result: dict[str, Any]) -> list[dict[str, Any]]:
    configurable = result.get("configurable_props")
    if not isinstance(configurable, list) or not all(_is_dict(p) for p in configurable):
        raise ProtocolViolation("configurable_props that is not a list of objects")
    return configurable


def _options(result: dict[str, Any]) -> dict[str, Any]:
    _need(isinstance(result.get("options", []), list), "options that are not a list")
    return result


class AsyncRunnerRequests(ABC):
    """The async Runner port's methods as runner requests, over an awaitable `call`: a run's
    partials (its `respond()`s) are handed to the caller's coroutine as they are read, from
    whatever thread reads them, and the call's outcome after them."""

    @abstractmethod
    async def call(self, op: str, request: dict[str, Any], bundle: Bundle | None = None,
                   on_partial: PartialHandler | None = None, account: str = DESCRIBE,
                   timeout_s: float | None = None, bill_to: str = "") -> dict[str, Any]:
        """`RunnerRequests.call`, awaited. `on_partial` may be called from another thread."""

    def meta_fields(self) -> dict[str, Any]:
        return {}

    def cpu_probe(self, account: str) -> CpuProbe | None:
        """How the CPU of the account's process is read from outside it, where it can be."""
        return None

    async def describe(self, bundle: Bundle, timeout_ms: int, account: str = DESCRIBE,
                       bill_to: str = "") -> Timed[ComponentDefinition]:
        request = {"timeout_ms": timeout_ms, **self.meta_fields()}
        return await _measured_async(self.call("describe", request, bundle, account=meta_account(account),
                                               bill_to=bill_to), _described)

    async def run(self, bundle: Bundle, instance: Instance, events: list[Any],
                  timeout_ms: int) -> AsyncIterator[RunMessage]:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Responded | None] = asyncio.Queue()

        def put(message: Responded | None) -> None:
            if _running_loop() is loop:
                inbox.put_nowait(message)
            else:
                loop.call_soon_threadsafe(inbox.put_nowait, message)

        collect = BatchResults(len(events), lambda index, response: put(Responded(index, response)),
                               self.cpu_probe(account_of(instance)))
        call = loop.create_task(self.call("run", run_request(instance, events, timeout_ms), bundle, collect,
                                          account=account_of(instance), timeout_s=batch_timeout_s(events, timeout_ms),
                                          bill_to=instance.bill_to))
        call.add_done_callback(lambda _: put(None))  # after the partials read before the answer
        try:
            while (message := await inbox.get()) is not None:
                yield message
            error = call.exception()
            if error is not None and not isinstance(error, RunnerError):
                raise error
            yield Finished(collect.outcomes(error))
        finally:
            if not call.done():
                call.cancel()

    async def hook(self, bundle: Bundle, instance: Instance, hook: str, timeout_ms: int) -> RunResult:
        request = {**instance_request(instance), "hook": hook, "timeout_ms": timeout_ms}
        return await _timed_async(self.call("hook", request, bundle, account=account_of(instance),
                                            bill_to=instance.bill_to))

    async def run_step(self, bundle: Bundle, instance: Instance, steps: dict[str, Any], timeout_ms: int) -> RunResult:
        request = {**instance_request(instance), "steps": steps, "timeout_ms": timeout_ms}
        return await _timed_async(self.call("run", request, bundle, account=account_of(instance),
                                            bill_to=instance.bill_to))

    async def additional_props(self, bundle: Bundle, instance_id: str, props: dict[str, Any], timeout_ms: int,
                               account: str = DESCRIBE, bill_to: str = "") -> Timed[list[dict[str, Any]]]:
        request = {"instance": instance_id, "props": props, "timeout_ms": timeout_ms, **self.meta_fields()}
        return await _measured_async(self.call("additional_props", request, bundle, account=meta_account(account),
                                               bill_to=bill_to), _configurable)

    async def options(self, bundle: Bundle, instance_id: str, prop: str, props: dict[str, Any], page: int,
                      prev_context: Any, query: str | None, timeout_ms: int, account: str = DESCRIBE,
                      bill_to: str = "") -> Timed[dict[str, Any]]:
        request = {"instance": instance_id, "prop": prop, "props": props, "page": page, "prevContext": prev_context,
                   "timeout_ms": timeout_ms, **self.meta_fields(), **({"query": query} if query is not None else {})}
        return await _measured_async(self.call("options", request, bundle, account=meta_account(account),
                                               bill_to=bill_to), _options)

    async def aclose(self) -> None:  # noqa: B027 - most have nothing to close
        pass


async def _measured_async(call: Awaitable[dict[str, Any]], shape: Callable[[dict[str, Any]], T]) -> Timed[T]:
    clock = Clock()
    try:
        value = shape(await call)
    except RunnerError as e:
        e.duration_ms = clock.lap_ms()
        raise
    return Timed(value, clock.lap_ms())


async def _timed_async(call: Awaitable[dict[str, Any]]) -> RunResult:
    timed = await _measured_async(call, run_result)
    timed.value.duration_ms = timed.duration_ms
    return timed.value


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _measured(call: Callable[[], T]) -> Timed[T]:
    """The call's answer with its time; a call that fails carries its time in its RunnerError."""
    clock = Clock()
    try:
        value = call()
    except RunnerError as e:
        e.duration_ms = clock.lap_ms()
        raise
    return Timed(value, clock.lap_ms())
