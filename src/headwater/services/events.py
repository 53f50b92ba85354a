"""Reading and deleting a source's retained events (SPEC Source events, DECISIONS Events)."""

from __future__ import annotations

from typing import Any

from headwater.domain.commands import DeleteEvents
from headwater.domain.errors import BadRequest, NotFound
from headwater.domain.events import RETAINED_PER_CHANNEL, EventId, summary_event
from headwater.domain.models import Principal, StoredEvent
from headwater.ports import Scheduler, Task, UnitOfWorkFactory
from headwater.services.sources import Sources


def summary(item: StoredEvent, expand: bool) -> dict[str, Any]:
    return {
        "id": item.id,
        "indexed_at_ms": item.indexed_at_ms,
        "event": summary_event(item.event, expand),
        "metadata": item.metadata,
    }


def parse_event_id(value: str | None, field: str) -> EventId | None:
    if value is None or value == "":
        return None
    try:
        return EventId.parse(value)
    except ValueError as e:
        raise BadRequest(f"`{field}` is not an event id.", {field: [str(e)]}) from None


def parse_limit(value: str | None) -> int:
    if value is None or value == "":
        return RETAINED_PER_CHANNEL
    try:
        limit = int(value)
    except ValueError:
        raise BadRequest("`limit` must be an integer.", {"limit": ["not an integer"]}) from None
    if not 1 <= limit <= RETAINED_PER_CHANNEL:
        raise BadRequest(f"`limit` must be between 1 and {RETAINED_PER_CHANNEL}.",
                         {"limit": [f"must be 1..{RETAINED_PER_CHANNEL}"]})
    return limit


class Events:
    def __init__(self, uow: UnitOfWorkFactory, sources: Sources, scheduler: Scheduler) -> None:
        self.uow = uow
        self.sources = sources
        self.scheduler = scheduler

    def check(self, principal: Principal, emitter_id: str) -> None:
        """404 unless the caller may see the emitter: a source, or a workflow."""
        if emitter_id.startswith("p_"):
            with self.uow(readonly=True) as uow:
                workflow = uow.workflows.get(emitter_id)
            if workflow is None or not principal.can_see(workflow.namespace):
                raise NotFound(f"No workflow {emitter_id}.")
        else:
            self.sources.get(principal, emitter_id)

    def summaries(self, principal: Principal, source_id: str, limit: int, expand: bool, channel: str) -> dict:
        """The newest retained events of a source's or a workflow's channel."""
        self.check(principal, source_id)
        with self.uow(readonly=True) as uow:
            items = uow.events.newest(source_id, channel, limit)
            total = uow.events.count(source_id, channel)
        return {
            "page_info": {
                "total_count": total,
                "count": len(items),
                "start_cursor": items[0].id if items else None,
                "end_cursor": items[-1].id if items else None,
            },
            "data": [summary(i, expand) for i in items],
        }

    def newer_than(self, source_id: str, channel: str, after: EventId | None) -> list[dict[str, Any]]:
        """Retained events after `after` (all retained ones when None), oldest first: SSE replay."""
        with self.uow(readonly=True) as uow:
            items = (uow.events.after(source_id, channel, after, RETAINED_PER_CHANNEL) if after
                     else uow.events.newest(source_id, channel, RETAINED_PER_CHANNEL)[::-1])
        return [summary(i, expand=True) for i in items]

    def request_delete(
        self, principal: Principal, source_id: str, start_id: str | None, end_id: str | None, channel: str | None
    ) -> None:
        """Validates now, deletes later (202): the task queue runs `delete`. Without `channel`, every
        channel of the source (SPEC: "all events of the source")."""
        source = self.sources.get(principal, source_id)
        start, end = parse_event_id(start_id, "start_id"), parse_event_id(end_id, "end_id")
        if start and end and end < start:
            raise BadRequest("`end_id` is before `start_id`.", {"end_id": ["is before start_id"]})
        with self.uow() as uow:
            uow.outbox.add(DeleteEvents(source_id, channel, str(start) if start else None, str(end) if end else None,
                                        source.namespace))
            uow.commit()

    def delete(self, tasks: list[Task], _: object = None) -> list[int]:
        """DeleteEvents handler: how many events each deletion removed (idempotent)."""
        deleted = []
        for task in tasks:
            command = task.command
            assert isinstance(command, DeleteEvents)
            with self.uow() as uow:
                deleted.append(uow.events.delete_range(
                    command.source_id, command.channel, parse_event_id(command.start_id, "start_id"),
                    parse_event_id(command.end_id, "end_id"),
                ))
                uow.commit()
        return deleted

    def purge(self, tasks: list[Task], _: object = None) -> list[None]:
        """PurgeSource handler: a deleted source's schedule, events and state go (idempotent)."""
        for task in tasks:
            source_id = task.command.lane or ""
            self.scheduler.remove(source_id)
            with self.uow() as uow:
                uow.events.delete_range(source_id, None, None, None)
                uow.runs.remove_all(source_id)
                uow.snapshots.remove_all(source_id)
                uow.state.remove(source_id)
                uow.commit()
        return [None] * len(tasks)
