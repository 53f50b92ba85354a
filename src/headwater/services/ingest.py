"""HTTP interface of sources (DECISIONS): a request becomes a durable run task before it is answered.

Without customResponse the caller gets 200 as soon as the task is committed; with it, the answer
is what the run gives to `this.http.respond()`: 502 when the run ends without one, 504 when it
runs out of time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.domain.commands import RunSource
from headwater.domain.errors import NotFound
from headwater.domain.http_interface import HttpAnswer, answer_of
from headwater.domain.models import Source
from headwater.ports import TaskQueue
from headwater.services.components import Components
from headwater.services.ingest_budget import IngestBudgets
from headwater.services.quota import Admission
from headwater.services.runs import Runs
from headwater.services.sources import Sources
from headwater.settings import Settings

_GRACE_S = 5.0
_ACCEPTED = b'{"success": true}'


class Ingest:
    def __init__(self, components: Components, sources: Sources, runs: Runs, queue: TaskQueue,
                 settings: Settings, budgets: IngestBudgets | None = None) -> None:
        self.components = components
        self.sources = sources
        self.runs = runs
        self.queue = queue
        self.settings = settings
        self.budgets = budgets  # None: no ingest budget (HEADWATER_INGEST_RATE=0)
        self._custom: dict[str, bool] = {}

    async def _source(self, endpoint_id: str) -> Source | None:
        """The endpoint's source from the cache, or from the store off the event loop."""
        hit, source = self.sources.endpoints.get(endpoint_id)
        if hit:
            return source
        return await asyncio.to_thread(self.sources.by_endpoint, endpoint_id)

    async def _custom_response(self, component_id: str) -> bool:
        """Components never change once saved, so what their http prop says is cached by id."""
        if component_id not in self._custom:
            component = await asyncio.to_thread(self.components.by_id, component_id)
            self._custom[component_id] = any(
                p["type"] == "$.interface.http" and p.get("customResponse")
                for p in component.definition.configurable_props
            )
        return self._custom[component_id]

    async def _within_budget(self, source: Source) -> None:
        """The tenant (the namespace owning the source) has budget left, or 429 before anything is
        stored or queued: one tenant's flood cannot spend another's (issue 21)."""
        if self.budgets is None:
            return
        spent = self.budgets.spend_leased(source.namespace)
        if spent is None:
            spent = await asyncio.to_thread(self.budgets.spend, source.namespace)
        if not spent:
            raise self.budgets.refusal()

    async def _admit(self, source: Source) -> Admission:
        if self.runs.quota.cached_tier(source.user_id) == "paid":
            return Admission(True)  # the hot path of paid users touches no store
        return await asyncio.to_thread(self.runs.quota.admit, source.user_id)

    async def receive(self, endpoint_id: str, event: dict[str, Any]) -> HttpAnswer:
        source = await self._source(endpoint_id)
        if source is None or not source.active:
            raise NotFound("No active source has this endpoint.")
        await self._within_budget(source)
        admission = await self._admit(source)
        if admission.refusal:
            await asyncio.to_thread(self.runs.refuse, source.id, event, admission.refusal)
            raise admission.refusal
        custom = await self._custom_response(source.component_id)
        timeout_ms = self.settings.http_timeout_ms
        command = RunSource(source.id, event, timeout_ms, "http",
                            reserved_by=source.user_id if admission.reserved_day else None,
                            reserved_day=admission.reserved_day, namespace=source.namespace)
        if not custom:
            try:
                await self.queue.ingest(command)
            except BaseException:
                await asyncio.to_thread(self.runs.release, command)
                raise
            return HttpAnswer(200, _ACCEPTED, {"content-type": "application/json"})
        try:
            answer = await self.queue.ingest_answered(command, timeout_ms / 1000 + _GRACE_S)
        except Exception:  # not committed (a request that goes away while its run runs keeps its place)
            await asyncio.to_thread(self.runs.release, command)
            raise
        if isinstance(answer, dict):
            return answer_of(answer)
        if answer is None:
            return HttpAnswer.json(504, {"error": "The source did not respond in time."})
        if answer.error and answer.error.get("code") == "TIMEOUT":
            return HttpAnswer.json(504, {"error": "The source did not respond in time."})
        if answer.error:
            message = answer.error.get("message")
            return HttpAnswer.json(502, {"error": f"The source failed before responding: {message}"})
        return HttpAnswer.json(502, {"error": "The source ended without calling this.http.respond()."})
