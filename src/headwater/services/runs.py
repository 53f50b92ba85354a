"""Running sources: one run or hook through the runner, then everything it did committed at once.

A run's emits are ordered by `ts`, deduped, stored with fresh ids and trimmed to the newest 100
per channel; its `this.db` writes, `$logs`, `$errors` and usage go in the same transaction, so a
crash leaves either all of a run or none of it (and its task still queued, to run again).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from headwater import __version__
from headwater.domain.errors import Invalid, QuotaExceeded, Unavailable
from headwater.domain.events import RETAINED_PER_CHANNEL, Emit, dedupe, order_by_ts
from headwater.domain.models import Component, Source, SourceState
from headwater.ports import Bundler, EventBus, Runner, RunnerError, Secrets, Task, UnitOfWork, UnitOfWorkFactory
from headwater.services import props as prop_forms
from headwater.services.clock import now_ms, utc_day
from headwater.settings import Settings

ERRORS, LOGS = "$errors", "$logs"
_COMPONENT_CACHE = 10_000


@dataclass
class RunResult:
    emits: list[Emit] = field(default_factory=list)
    db_writes: dict[str, Any] = field(default_factory=dict)
    logs: list[dict[str, Any]] = field(default_factory=list)
    response: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    duration_ms: float = 0.0

    @classmethod
    def from_runner(cls, data: dict[str, Any]) -> RunResult:
        return cls(
            emits=[Emit(e.get("event"), e.get("meta") or {}) for e in data.get("emits", [])],
            db_writes=data.get("db_writes") or {},
            logs=data.get("logs") or [],
            response=data.get("response"),
            error=data.get("error"),
            duration_ms=float(data.get("duration_ms") or 0),
        )

    @classmethod
    def failed(cls, code: str, message: str, stack: str | None = None) -> RunResult:
        return cls(error={"code": code, "name": "Error", "message": message, "stack": stack or ""})


@dataclass
class RunItem:
    """One queued run: its event, its time limit, and where a customResponse answer goes."""

    event: Any
    timeout_ms: int
    task: Task | None = None
    on_partial: Callable[[dict[str, Any]], None] | None = None
    reserved_by: str | None = None  # the user whose free-tier cap admitted it at ingest (Runs.reserve)


class Runs:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        bundler: Bundler,
        runner: Runner,
        secrets: Secrets,
        bus: EventBus,
        settings: Settings,
    ) -> None:
        self.uow = uow
        self.bundler = bundler
        self.runner = runner
        self.secrets = secrets
        self.bus = bus
        self.settings = settings
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._components: dict[str, Component] = {}
        self._tiers: dict[str, str] = {}
        self._reserved: dict[str, int] = {}  # free-tier runs admitted at ingest, not yet run

    @contextmanager
    def lock(self, source_id: str) -> Iterator[None]:
        """Runs and hooks of one source never overlap."""
        with self._guard:
            lock = self._locks.setdefault(source_id, threading.Lock())
        with lock:
            yield

    def forget(self, source_id: str) -> None:
        with self._guard:
            self._locks.pop(source_id, None)

    # calling the runner

    def _request(self, source: Source, component: Component, state: SourceState, timeout_ms: int) -> dict[str, Any]:
        http = None
        for prop in source.prop_defs:
            if prop["type"] == "$.interface.http":
                http = {
                    "endpoint": f"{self.settings.base_url}/http/{source.endpoint_id}",
                    "customResponse": bool(prop.get("customResponse")),
                }
        return {
            "instance": source.id,
            "env": {"PD_COMPONENT": source.id},
            "props": prop_forms.for_runner(source.configured_props, self.secrets),
            "db": state.db,
            "http": http,
            "timeout_ms": timeout_ms,
            "memory_mb": self.settings.run_memory_mb,
        }

    def _call(self, op: str, component: Component, request: dict[str, Any],
              on_partial: Callable[[dict[str, Any]], None] | None = None) -> RunResult:
        try:
            bundle = self.bundler.bundle(component.code)
            return RunResult.from_runner(self.runner.call(op, request, bundle=bundle, on_partial=on_partial))
        except RunnerError as e:
            return RunResult.failed(e.code, e.message, e.stack)
        except (Invalid, Unavailable) as e:
            return RunResult.failed("RUNTIME_ERROR", e.message)

    def call_hook(self, source: Source, component: Component, hook: str, state: SourceState) -> RunResult:
        request = self._request(source, component, state, self.settings.hook_timeout_ms)
        return self._call("hook", component, {**request, "hook": hook})

    def additional_props(self, component: Component, source_id: str, configured: dict[str, Any]) -> list[dict]:
        try:
            bundle = self.bundler.bundle(component.code)
            result = self.runner.call(
                "additional_props",
                {"instance": f"props:{source_id}", "props": configured, "timeout_ms": self.settings.hook_timeout_ms},
                bundle=bundle,
            )
        except RunnerError as e:
            raise Invalid(f"additionalProps failed: {e.message}", {"configured_props": [e.message]}) from None
        return result["configurable_props"]

    # running

    def component(self, component_id: str) -> Component | None:
        """Saved components never change, so they are cached by id."""
        found = self._components.get(component_id)
        if found is None:
            with self.uow(readonly=True) as uow:
                found = uow.components.get(component_id)
            if found is not None:
                if len(self._components) >= _COMPONENT_CACHE:
                    self._components.clear()
                self._components[component_id] = found
        return found

    def _usage_left(self, user_id: str) -> tuple[int | None, QuotaExceeded | None]:
        """How many more runs the user may start today (None: no cap), and the refusal past it."""
        tier = self._tiers.get(user_id)
        if tier is None:
            with self.uow(readonly=True) as uow:
                user = uow.users.get(user_id)
            tier = self._tiers[user_id] = user.tier if user else "paid"
        if tier != "free":
            return None, None
        day = utc_day()
        with self.uow(readonly=True) as uow:
            invocations, compute_ms = uow.usage.totals(user_id, day, day)
        now = datetime.now(UTC)
        midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        refusal = QuotaExceeded(
            "The free tier's daily quota is used up; it resets at 00:00 UTC.",
            retry_after=max(1, math.ceil((midnight - now).total_seconds())),
        )
        if compute_ms >= self.settings.free_daily_compute_ms:
            return 0, refusal
        return max(0, self.settings.free_daily_invocations - invocations), refusal

    def reserve(self, user_id: str) -> tuple[bool, QuotaExceeded | None]:
        """Admits one more queued run against the free tier's cap, counting the runs already
        admitted but not yet run: (reserved, refusal). A paid user needs no reservation."""
        left, refusal = self._usage_left(user_id)
        if left is None:
            return False, None
        with self._guard:
            pending = self._reserved.get(user_id, 0)
            if left - pending <= 0:
                return False, refusal
            self._reserved[user_id] = pending + 1
        return True, None

    def release(self, user_id: str) -> None:
        """The reserved run ran (or will never run): it no longer holds a place under the cap."""
        with self._guard:
            self._reserved[user_id] = max(0, self._reserved.get(user_id, 0) - 1)

    def run_batch(self, source_id: str, items: list[RunItem]) -> list[RunResult | None]:
        """Consecutive queued runs of one source, one after another through the runner, then
        committed in one transaction with their tasks. None for each when the source is gone or
        inactive (the tasks are dropped)."""
        try:
            return self._run_batch(source_id, items)
        finally:
            for item in items:
                if item.reserved_by:
                    self.release(item.reserved_by)

    def _run_batch(self, source_id: str, items: list[RunItem]) -> list[RunResult | None]:
        with self.lock(source_id):
            with self.uow(readonly=True) as uow:
                source = uow.sources.get(source_id)
                state = uow.state.get(source_id)
            component = self.component(source.component_id) if source else None
            if source is None or component is None or not source.active:
                self._drop([item.task for item in items])
                return [None] * len(items)
            left, refusal = self._usage_left(source.user_id)
            results: list[RunResult | None] = []
            for item in items:
                if left is not None and left <= 0 and refusal:
                    results.append(RunResult.failed("QUOTA_EXCEEDED", refusal.message))
                    continue
                left = None if left is None else left - 1
                request = {**self._request(source, component, state, item.timeout_ms), "event": item.event}
                result = self._call("run", component, request, item.on_partial)
                state.db.update(result.db_writes)
                state.db = {k: v for k, v in state.db.items() if v is not None}
                results.append(result)
            with self.uow() as uow:
                channels: set[str] = set()
                for item, result in zip(items, results, strict=True):
                    assert result is not None
                    counted = not (result.error and result.error.get("code") == "QUOTA_EXCEEDED")
                    channels |= self.record(uow, source, component, result, item.event, counted)
                    if item.task:
                        uow.tasks.done(item.task.id)
                self.trim(uow, source.id, channels)
                uow.commit()
        self.announce(source.id, channels)
        return results

    def _drop(self, tasks: list[Task | None]) -> None:
        if any(tasks):
            with self.uow() as uow:
                for task in tasks:
                    if task:
                        uow.tasks.done(task.id)
                uow.commit()

    def refuse(self, source_id: str, trigger: Any, quota: QuotaExceeded) -> None:
        """A request turned away for quota (429) still leaves its QUOTA_EXCEEDED error event."""
        with self.uow(readonly=True) as uow:
            source = uow.sources.get(source_id)
            component = uow.components.get(source.component_id) if source else None
        if source is None or component is None:
            return
        with self.uow() as uow:
            channels = self.record(uow, source, component, RunResult.failed("QUOTA_EXCEEDED", quota.message),
                                   trigger=trigger, count_usage=False)
            self.trim(uow, source.id, channels)
            uow.commit()
        self.announce(source.id, channels)

    def announce(self, emitter_id: str, channels: set[str]) -> None:
        """After commit: live readers of these channels have new events."""
        for channel in channels:
            self.bus.published(emitter_id, channel)

    @staticmethod
    def trim(uow: UnitOfWork, emitter_id: str, channels: set[str]) -> None:
        """Retention: the newest 100 events of each channel."""
        for channel in channels:
            uow.events.trim(emitter_id, channel, RETAINED_PER_CHANNEL)

    def record(
        self,
        uow: UnitOfWork,
        source: Source,
        component: Component,
        result: RunResult,
        trigger: Any,
        count_usage: bool,
    ) -> set[str]:
        """Writes what a run or hook did; returns the channels that got events. Retention is the
        caller's: `trim` them once it has recorded everything of its transaction."""
        ms = now_ms()
        state = uow.state.get(source.id)
        state.db.update(result.db_writes)
        state.db = {k: v for k, v in state.db.items() if v is not None}
        outcome = dedupe(component.definition.dedupe, state.dedupe, order_by_ts(result.emits))
        state.dedupe = outcome.state
        uow.state.save(source.id, state)
        touched: set[str] = set()

        def append(channel: str, event: Any, meta: dict[str, Any]) -> None:
            metadata = {
                "emitter_id": source.id,
                "name": channel,
                "summary": meta.get("summary") if isinstance(meta.get("summary"), str) else None,
                "id": meta.get("id"),
                "ts": meta.get("ts") if isinstance(meta.get("ts"), int | float) else ms,
            }
            uow.events.append(source.id, channel, event, metadata, ms)
            touched.add(channel)

        for emit in outcome.kept:
            append(emit.channel, emit.event, emit.meta)
        for log in result.logs:
            append(LOGS, {"level": log.get("level", "log"), "message": log.get("message", ""),
                          "ts": log.get("ts", ms)}, {})
        for reason in outcome.refused:
            append(LOGS, {"level": "warn", "message": f"event not emitted: {reason}", "ts": ms}, {})
        if result.error:
            append(ERRORS, self._error_event(source, trigger, result.error, ms), {})
        if count_usage:
            uow.usage.record(source.user_id, utc_day(), 1, math.ceil(result.duration_ms))
        return touched

    def _error_event(self, source: Source, trigger: Any, error: dict[str, Any], ms: int) -> dict[str, Any]:
        return {
            "original_event": trigger,
            "original_context": {
                "id": f"{ms}",
                "ts": ms,
                "source_id": source.id,
                "source_type": "COMPONENT",
                "verified": False,
                "owner_id": source.user_id,
                "platform_version": __version__,
            },
            "error": {
                "code": error.get("code") or "RUNTIME_ERROR",
                "cellId": None,
                "ts": ms,
                "stack": error.get("stack") or "",
                "message": error.get("message") or "",
            },
        }
