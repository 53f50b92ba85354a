"""Events over the events table: `pk = <emitter_id>#<channel>`, `sk = <ms 16>-<seq 12>`.

The zero-padded sort key makes string order (ms, seq) order, so newest-first is a reverse
Query, `after` a `sk >` Query and a range an `sk BETWEEN` Query. Puts go in the unit of work's
transaction; retention (`trim`) runs right after it commits, and range deletions at once, in
BatchWriteItem batches. Deleting "every channel" needs the emitter's channels without a scan:
each put also marks its channel in the resources table (`pk = <emitter_id>, sk = channel#<name>`),
written before the transaction so no committed event is ever without its marker.

The marker also counts the channel's events (`n`), so that retention reads nothing but the events
it deletes (a Query of a whole channel is billed by the size of every event in it): after a
commit its puts are added, and when `n` passes `keep` the excess is taken off `n` and then the
oldest that many are deleted. The count read before the commit (the marker made, or read when
this process made it before) lets one conditional UpdateItem do both: add the puts and take the
excess off. Every step that can be cut short leaves `n` low, never high: a
channel may keep a few events more than `keep` after a crash, it never loses one of its newest.
A marker whose `n` was not counted from the start (`counted` absent: written before counting,
or again after a purge) is counted once by a Query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from headwater.adapters.aws.dynamodb.codec import (
    Item,
    body,
    event_key,
    events_pk,
    key,
    load,
    n,
    number,
    s,
    storable,
    text,
)
from headwater.adapters.aws.dynamodb.tables import Query, error_code
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
        self._puts: dict[tuple[str, str], set[str]] = {}  # the event keys this unit of work put, by channel
        self._after_puts: dict[tuple[str, str], Item] = {}  # the markers as the puts' counting left them
        self._seen: dict[tuple[str, str], Item] = {}  # the markers as they were before the commit
        self._excess: dict[tuple[str, str], int] = {}  # trims counted with the puts: what is left to delete

    def put(self, emitter_id: str, event: StoredEvent) -> None:
        """A plain put: the same event again is the same item. Raises PayloadTooLarge for an event
        that does not fit in an item even compressed."""
        item: Item = {"pk": s(events_pk(emitter_id, event.channel)), "sk": s(event_key(EventId.parse(event.id))),
                      "id": s(event.id), "channel": s(event.channel), "indexed_at_ms": n(event.indexed_at_ms),
                      **body({"event": event.event, "metadata": event.metadata}, "event")}
        self.uow.write(put(self.table, item, deferrable=True))
        self._markers.add((emitter_id, event.channel))
        self._puts.setdefault((emitter_id, event.channel), set()).add(item["sk"]["S"])
        self.uow.before_commit(self._write_markers)
        self.uow.after_commit(self._count_puts)

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
            self._add(emitter_id, name, -len(keys), only_counted=True)
            self.tables.delete_keys(self.table, keys)
            deleted += len(keys)
        if channel is None and start is None and end is None:
            for name in channels:
                self.tables.made_markers.discard((emitter_id, name))
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
        """Each marker made if missing; its count untouched (ADD 0). A marker this process made is
        read rather than written again (a purge may have deleted it meanwhile: then it is made
        again); either way the marker as it stands is kept, for counting the puts after the commit."""
        markers, self._markers = self._markers, set()
        made = self.tables.made_markers
        for emitter_id, channel in sorted(markers):
            marker = self.tables.get(self.tables.resources, emitter_id, CHANNEL + channel) \
                if (emitter_id, channel) in made else None
            if marker is None:
                marker = self._add(emitter_id, channel, 0)
                made.add((emitter_id, channel))
            self._seen[(emitter_id, channel)] = marker

    def _add(self, emitter_id: str, channel: str, delta: int, only_counted: bool = False) -> Item:
        """Adds `delta` to the channel's count; the marker as it is then."""
        request: dict[str, Any] = {
            "TableName": self.tables.resources, "Key": key(emitter_id, CHANNEL + channel),
            "UpdateExpression": "ADD #n :d", "ExpressionAttributeNames": {"#n": "n"},
            "ExpressionAttributeValues": {":d": n(delta)}, "ReturnValues": "ALL_NEW"}
        if only_counted:
            request["ConditionExpression"] = "attribute_exists(counted)"
        try:
            return dict(self.tables.client.update_item(**request)["Attributes"])
        except ClientError as e:
            if error_code(e) != "ConditionalCheckFailedException":
                raise
            return {}

    def _count_puts(self) -> None:
        puts, self._puts = self._puts, {}
        seen, self._seen = self._seen, {}
        for channel, keys in puts.items():
            self._after_puts[channel] = self._count_and_trim(channel, len(keys), seen.get(channel))

    def _count_and_trim(self, channel: tuple[str, str], puts: int, seen: Item | None) -> Item:
        """Adds the puts to the channel's count and, when it is trimmed, takes the excess off in the
        same UpdateItem, on the condition that the count is still the one read before the commit
        (else two steps, as without a count read). The excess is deleted by `_run_trims`."""
        keep = self._trims.get(channel)
        if keep is None or seen is None or "counted" not in seen:
            return self._add(*channel, puts)
        before = number(seen, "n")
        excess = max(0, before + puts - keep)
        try:
            marker = dict(self.tables.client.update_item(
                TableName=self.tables.resources, Key=key(channel[0], CHANNEL + channel[1]),
                UpdateExpression="ADD #n :d", ConditionExpression="#n = :before AND attribute_exists(counted)",
                ExpressionAttributeNames={"#n": "n"},
                ExpressionAttributeValues={":d": n(puts - excess), ":before": n(before)},
                ReturnValues="ALL_NEW")["Attributes"])
        except ClientError as e:  # counted meanwhile by another writer, or purged
            if error_code(e) != "ConditionalCheckFailedException":
                raise
            self.tables.made_markers.discard(channel)
            return self._add(*channel, puts)
        self._excess[channel] = excess
        return marker

    def _counted(self, emitter_id: str, channel: str, marker: Item) -> int:
        """The channel's count; counted by a Query the first time (then it is kept up)."""
        if "counted" in marker:
            return number(marker, "n")
        found = self.count(emitter_id, channel)
        try:
            self.tables.client.update_item(
                TableName=self.tables.resources, Key=key(emitter_id, CHANNEL + channel),
                UpdateExpression="SET #n = :n, counted = :t", ConditionExpression="attribute_not_exists(counted)",
                ExpressionAttributeNames={"#n": "n"}, ExpressionAttributeValues={":n": n(found), ":t": n(1)})
        except ClientError as e:  # counted meanwhile by another trim
            if error_code(e) != "ConditionalCheckFailedException":
                raise
        return found

    def _run_trims(self) -> None:
        self._count_puts()
        markers, self._after_puts = self._after_puts, {}
        trims, self._trims = self._trims, {}
        counted, self._excess = self._excess, {}
        for (emitter_id, channel), keep in trims.items():
            if (emitter_id, channel) in counted:  # taken off the count with the puts already
                excess = counted[(emitter_id, channel)]
            else:
                marker = markers.get((emitter_id, channel)) or self._add(emitter_id, channel, 0)
                excess = self._counted(emitter_id, channel, marker) - keep
                if excess > 0:
                    self._add(emitter_id, channel, -excess)  # first: cut short here, the count is low, not high
            if excess <= 0:
                continue
            pk = events_pk(emitter_id, channel)
            oldest = Query(self.table, "pk = :pk", {":pk": s(pk)}, projection="sk")
            older = [(pk, text(item, "sk")) for item in self.tables.iterate(oldest, excess)]
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
