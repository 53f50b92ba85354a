"""The functions of template.yaml as Lambda would run them here: the handler its `Handler` names,
called with an event and a context, in a thread with its own event loop (as a Lambda process
has), never longer than the function's `Timeout` as far as the caller is concerned."""

from __future__ import annotations

import asyncio
import importlib
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from headwater.emulated.template import Function

Handler = Callable[[Any, Any], Any]


@dataclass
class LambdaContext:
    """What a Python handler's context gives (Powertools reads these)."""

    function_name: str
    invoked_function_arn: str
    timeout_s: int
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = ""
    log_stream_name: str = ""
    _deadline: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _own_loop() -> None:
    asyncio.set_event_loop(asyncio.new_event_loop())


class Functions:
    """Imports every Python function's handler at once: a `Handler` that does not exist fails
    the start, as `sam deploy` would fail the first invocation."""

    def __init__(self, functions: dict[str, Function], arns: dict[str, str], workers: int = 32) -> None:
        self.functions = {name: f for name, f in functions.items() if f.runtime.startswith("python")}
        self.arns = arns
        self.handlers = {name: _import(f.handler) for name, f in self.functions.items()}
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="lambda", initializer=_own_loop)

    def by_arn(self, arn: str) -> str | None:
        return next((name for name, a in self.arns.items() if a == arn and name in self.functions), None)

    def invoke(self, name: str, event: Any) -> Any:
        """Synchronously, in the caller's thread (pollers have their own)."""
        function = self.functions[name]
        context = LambdaContext(name, self.arns.get(name, name), function.timeout)
        return self.handlers[name](event, context)

    async def invoke_async(self, name: str, event: Any, timeout_s: float) -> Any:
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(loop.run_in_executor(self.pool, self.invoke, name, event), timeout_s)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _import(handler: str) -> Handler:
    module, _, attribute = handler.rpartition(".")
    found = getattr(importlib.import_module(module), attribute, None)
    if not callable(found):
        raise RuntimeError(f"template.yaml names handler {handler!r}, which does not exist")
    return found
