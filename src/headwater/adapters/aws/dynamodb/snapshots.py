"""Snapshots of sources' `this.db` over the resources table, as a ring of SNAPSHOTS_KEPT slots per
source: `pk = #snapshots#<source_id>`, `sk = <seq mod kept, 2 digits>`, the snapshot's `seq`
beside its body. Snapshot `n` is put in the slot of snapshot `n - kept` in the same transaction
as the state it was taken with, so retention costs no delete and no read; a source id never
starts with `#`, so no other item shares the pk."""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.adapters.aws.dynamodb.codec import Item, body, load, n, s
from headwater.adapters.aws.dynamodb.tables import Query
from headwater.adapters.aws.dynamodb.writes import put
from headwater.domain.snapshots import SNAPSHOTS_KEPT, StateSnapshot, newest

if TYPE_CHECKING:
    from headwater.adapters.aws.dynamodb.uow import DynamoUnitOfWork


def snapshots_pk(source_id: str) -> str:
    return f"#snapshots#{source_id}"


class DynamoSnapshots:
    def __init__(self, uow: DynamoUnitOfWork) -> None:
        self.uow = uow
        self.tables = uow.tables
        self.table = uow.tables.resources

    def put(self, source_id: str, snapshot: StateSnapshot) -> None:
        item: Item = {"pk": s(snapshots_pk(source_id)), "sk": s(f"{snapshot.seq % SNAPSHOTS_KEPT:02d}"),
                      "seq": n(snapshot.seq), **body(snapshot.to_json(), "state snapshot")}
        self.uow.write(put(self.table, item))

    def list(self, source_id: str) -> list[StateSnapshot]:
        """The whole ring in one Query (at most SNAPSHOTS_KEPT items)."""
        items = self.tables.query(Query(self.table, "pk = :pk", {":pk": s(snapshots_pk(source_id))}))
        return newest([StateSnapshot.from_json(load(item)) for item in items])

    def get(self, source_id: str, snapshot_id: str) -> StateSnapshot | None:
        return next((snapshot for snapshot in self.list(source_id) if snapshot.id == snapshot_id), None)

    def remove_all(self, source_id: str) -> None:
        self.uow.writable()
        pk = snapshots_pk(source_id)
        q = Query(self.table, "pk = :pk", {":pk": s(pk)}, projection="pk, sk")
        self.tables.delete_keys(self.table, [(pk, item["sk"]["S"]) for item in self.tables.iterate(q)])
