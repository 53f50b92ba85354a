"""A source's `this.db` as its owner sees and edits it (issue 34): read, a JSON merge patch
(RFC 7396), the snapshots taken at deploys, updates and restores, and a restore (an update:
services/sources.py). Only those who can see the source's namespace get anything; to others the
source does not exist (404). Values are never logged: a component may keep secrets there. What
the routes show has the values of the source's secret props masked (`[secret]`), as run records
do; the credentials of its connected accounts are not read for this (that could refresh a token).

Concurrency, without interactive transactions or global locks: a patch holds the source's lease
(runs and hooks hold it too, so none runs on a db read before the patch) and saves the state
conditionally on its version; a lost race (a writer whose lease ran out) is retried on the fresh
state, the patch applied again, so neither side's writes are lost. Only after MAX_ATTEMPTS lost
races does it answer 409.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from headwater.domain.errors import BadRequest, Conflict, Invalid, NotFound
from headwater.domain.models import Principal, SourceState
from headwater.domain.run_records import masked
from headwater.domain.runs import db_size
from headwater.domain.snapshots import StateSnapshot, merge_patch
from headwater.ports import Offload, Secrets, UnitOfWorkFactory
from headwater.services import props as prop_forms
from headwater.services.contention import retry_on_conflict
from headwater.services.recording import MAX_ATTEMPTS
from headwater.services.runs import Runs
from headwater.services.sources import Sources
from headwater.settings import Settings


class SourceStates:
    def __init__(self, uow: UnitOfWorkFactory, sources: Sources, runs: Runs, settings: Settings,
                 offload: Offload, secrets: Secrets) -> None:
        self.secrets = secrets
        self.uow = uow
        self.sources = sources
        self.runs = runs
        self.settings = settings
        self.offload = offload

    def get(self, principal: Principal, source_id: str) -> SourceState:
        self.sources.get(principal, source_id)
        with self.uow(readonly=True) as uow:
            return uow.state.get(source_id)

    def snapshots(self, principal: Principal, source_id: str) -> list[StateSnapshot]:
        self.sources.get(principal, source_id)
        with self.uow(readonly=True) as uow:
            return uow.snapshots.list(source_id)

    async def patch(self, principal: Principal, source_id: str, patch: Any) -> SourceState:
        if not isinstance(patch, dict):
            raise BadRequest("The body is a JSON merge patch of this.db: an object of keys, null to remove one.",
                             {"body": ["must be a JSON object"]})
        await self.offload.call(lambda: self.sources.get(principal, source_id))
        async with self.runs.lease.held(source_id, self.runs.lease_s):
            state = await self.offload.call(lambda: self._patch(source_id, patch))
            self.runs.forget(source_id)  # its next run reads the patched db
        return state

    def _patch(self, source_id: str, patch: dict[str, Any]) -> SourceState:
        limit = self.settings.db_max_bytes

        def attempt(_: int) -> SourceState:
            with self.uow() as uow:
                if uow.sources.get(source_id) is None:
                    raise NotFound(f"No source {source_id}.")
                current = uow.state.get(source_id)
                db = merge_patch(current.db, patch)
                size = db_size(db)
                if size > limit and size > db_size(current.db):  # shrinking one over a lowered limit is fine
                    raise Invalid(f"The patch would make this.db {size} bytes of JSON, over the limit of {limit} "
                                  "bytes (HEADWATER_DB_MAX_BYTES); nothing was changed.",
                                  {"body": [f"this.db would be {size} bytes, over {limit}"]})
                new = replace(current, db=db)
                new.db_changed_outside_runs()  # a trial cannot rebuild this.db across it (docs/trials.md)
                uow.state.save(source_id, new, current.version)
                uow.commit()
            new.version = current.version + 1
            return new

        return retry_on_conflict(attempt, MAX_ATTEMPTS, lambda: Conflict(
            f"The state of source {source_id} kept changing: try again.", field="state"))

    async def restore(self, principal: Principal, source_id: str, snapshot_id: Any) -> tuple[SourceState, str]:
        if not isinstance(snapshot_id, str) or not snapshot_id:
            raise BadRequest("Give the `snapshot_id` to restore.", {"snapshot_id": ["required, a string"]})
        undo = await self.sources.restore(principal, source_id, snapshot_id)
        return await self.offload.call(lambda: self.get(principal, source_id)), undo

    def to_api(self, source_id: str, state: SourceState) -> dict[str, Any]:
        """The state as the routes show it (after their owner check): secret props' values masked."""
        with self.uow(readonly=True) as uow:
            source = uow.sources.get(source_id)
        secrets = (self.runs.secrets_of(source, prop_forms.for_runner(source.configured_props, self.secrets))
                   if source is not None else frozenset())
        return {"db": masked(state.db, secrets), "size": db_size(state.db), "max_bytes": self.settings.db_max_bytes,
                "version": state.version}

    @staticmethod
    def snapshot_to_api(snapshot: StateSnapshot) -> dict[str, Any]:
        return {"id": snapshot.id, "created_at": snapshot.created_at, "reason": snapshot.reason,
                "component_id": snapshot.component_id, "component_version": snapshot.component_version,
                "size": snapshot.size}
