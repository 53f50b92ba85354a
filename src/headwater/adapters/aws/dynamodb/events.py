"""Events over the events table: `pk = <emitter_id>#<channel>`, `sk = <ms 16>-<seq 12>`.

The zero-padded sort key makes string order (ms, seq) order, so newest-first is a reverse
Query, `after` a `sk >` Query and a range an `sk BETWEEN` Query. Puts go in the unit of work's
transaction; retention (`trim`) runs right after it commits, and range deletions at once, in
BatchWriteItem batches. Deleting "every channel" needs the emitter's channels without a scan:
each put also marks its channel in the resources table (`pk = <emitter_id>, sk = channel#<name>`),
written before the transaction so no committed event is ever without its marker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.adapters.aws.dynamodb.codec import (
    Item,
    body,
    event_key,
    events_pk,
    load,
    n,
    number,
    s,
    storable,
    text,
)
from headwater.adapters.aws.dynamodb.tables import Query
from headwater.adapters.aws.dynamodb.writes import put
from headwater.domain.events import EventId
from headwater.domain.models import StoredEvent

if TYPE_CHECKING:
    from headwater.adapters.aws.dynamodb.uow import DynamoUnitOfWork

CHANNEL = "channel#"


def _event(item: Item) -> StoredEvent:
    data = load(item)
    return StoredEvent(text(item, "id"), number(item, "indexed_at_ms"), data["event"], data["metadata"],
                       text(item, "channel"))


class DynamoEvents:
    def __init__(self, uow: DynamoUnitOfWork) -> None:
        self.uow = uow
        self.tables = uow.tables
        self.table = uow.tables.events
        self._markers: set[tuple[str, str]] = set()
        self._trims: dict[tuple[str, str], int] = {}

    def put(self, emitter_id: str, event: StoredEvent) -> None:
        """A plain put: the same event again is the same item. Raises PayloadTooLarge for an event
        that does not fit in an item even compressed."""
        item: Item = {"pk": s(events_pk(emitter_id, event.channel)), "sk": s(event_key(EventId.parse(event.id))),
                      "id": s(event.id), "channel": s(event.channel), "indexed_at_ms": n(event.indexed_at_ms),
                      **body({"event": event.event, "metadata": event.metadata}, "event")}
        self.uow.write(put(self.table, item, deferrable=True))
        self._markers.add((emitter_id, event.channel))
        self.uow.before_commit(self._write_markers)

    def trim(self, emitter_id: str, channel: str, keep: int) -> None:
        """Runs after the commit; idempotent, so one interrupted is redone by the next."""
        self._trims[(emitter_id, channel)] = keep
        self.uow.after_commit(self._run_trims)

    def get(self, emitter_id: str, channel: str, event_id: str) -> StoredEvent | None:
        try:
            parsed = EventId.parse(event_id)
        except ValueError:
            return None
        if not storable(parsed):
            return None
        item = self.tables.get(self.table, events_pk(emitter_id, channel), event_key(parsed))
        return _event(item) if item else None

    def newest(self, emitter_id: str, channel: str, limit: int) -> list[StoredEvent]:
        q = Query(self.table, "pk = :pk", {":pk": s(events_pk(emitter_id, channel))}, forward=False)
        return [_event(item) for item in self.tables.query(q, limit)]

    def count(self, emitter_id: str, channel: str) -> int:
        return self.tables.count(Query(self.table, "pk = :pk", {":pk": s(events_pk(emitter_id, channel))}))

    def after(self, emitter_id: str, channel: str, event_id: EventId, limit: int) -> list[StoredEvent]:
        q = Query(self.table, "pk = :pk AND sk > :k",
                  {":pk": s(events_pk(emitter_id, channel)), ":k": s(event_key(event_id))})
        return [_event(item) for item in self.tables.query(q, limit)]

    def delete_range(self, emitter_id: str, channel: str | None, start: EventId | None, end: EventId | None) -> int:
        """Runs at once, not at commit (a range may hold more events than a transaction takes);
        idempotent. An unbounded deletion of every channel (a purge) also drops the channel
        markers, each re-put if a concurrent write left events in its channel meanwhile."""
        self.uow.writable()
        if start is not None and end is not None and end < start:
            return 0
        channels = [channel] if channel is not None else self._channels(emitter_id)
        deleted = 0
        for name in channels:
            pk = events_pk(emitter_id, name)
            keys = [(pk, text(item, "sk")) for item in self.tables.iterate(_range(self.table, pk, start, end))]
            self.tables.delete_keys(self.table, keys)
            deleted += len(keys)
        if channel is None and start is None and end is None:
            for name in channels:
                self.tables.delete_keys(self.tables.resources, [(emitter_id, CHANNEL + name)])
                if self.count(emitter_id, name):
                    self._markers.add((emitter_id, name))
            self._write_markers()
        return deleted

    # around the transaction

    def _channels(self, emitter_id: str) -> list[str]:
        q = Query(self.tables.resources, "pk = :pk AND begins_with(sk, :c)", {":pk": s(emitter_id), ":c": s(CHANNEL)},
                  projection="sk")
        return [text(item, "sk").removeprefix(CHANNEL) for item in self.tables.iterate(q)]

    def _write_markers(self) -> None:
        markers, self._markers = self._markers, set()
        self.tables.write_batch(self.tables.resources, [
            {"PutRequest": {"Item": {"pk": s(emitter_id), "sk": s(CHANNEL + channel)}}}
            for emitter_id, channel in sorted(markers)
        ])

    def _run_trims(self) -> None:
        trims, self._trims = self._trims, {}
        for (emitter_id, channel), keep in trims.items():
            pk = events_pk(emitter_id, channel)
            q = Query(self.table, "pk = :pk", {":pk": s(pk)}, forward=False, projection="sk")
            older = [(pk, text(item, "sk")) for i, item in enumerate(self.tables.iterate(q)) if i >= keep]
            self.tables.delete_keys(self.table, older)


def _range(table: str, pk: str, start: EventId | None, end: EventId | None) -> Query:
    values: dict[str, Any] = {":pk": s(pk)}
    if start is not None:
        values[":lo"] = s(event_key(start))
    if end is not None:
        values[":hi"] = s(event_key(end))
    if start is not None and end is not None:
        condition = "pk = :pk AND sk BETWEEN :lo AND :hi"
    elif start is not None:
        condition = "pk = :pk AND sk >= :lo"
    elif end is not None:
        condition = "pk = :pk AND sk <= :hi"
    else:
        condition = "pk = :pk"
    return Query(table, condition, values, projection="sk")
