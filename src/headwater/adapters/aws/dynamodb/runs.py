"""Runs on record over the events table, as a ring of 100 slots per owner:
`pk = #runs#<owner_id>`, `sk = <seq mod 100, 3 digits>`, the record's `seq` beside its body.

An emitter id never starts with `#`, so no event's pk is ever a runs pk. The newest 100 are kept by
construction: run `n` is put in the slot of run `n - 100`, so retention costs no delete and no
read, and a run costs one write unit per KB of its (compressed) record. The put goes right after
the run's transaction commits, as the event trims do (DynamoDB bills an item twice inside a
transaction): a process that dies between the two loses that record, never the run's outcome. A
source's commits are ordered by its lease, so an older record never lands on a newer one. Reads
check the slot's seq: a slot whose run is not the one asked for (or below the floor) is not it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.adapters.aws.dynamodb.codec import Item, load_text, n, number, s, text_body
from headwater.adapters.aws.dynamodb.tables import Query
from headwater.domain.pagination import Page, PageRequest, paginate
from headwater.domain.run_records import RUNS_KEPT, RunRecord

if TYPE_CHECKING:
    from headwater.adapters.aws.dynamodb.uow import DynamoUnitOfWork


def runs_pk(owner_id: str) -> str:
    return f"#runs#{owner_id}"


def slot(seq: int) -> str:
    return f"{seq % RUNS_KEPT:03d}"


class DynamoRunRecords:
    def __init__(self, uow: DynamoUnitOfWork) -> None:
        self.uow = uow
        self.tables = uow.tables
        self.table = uow.tables.events
        self._puts: dict[tuple[str, str], dict[str, Any]] = {}

    def put(self, owner_id: str, record: RunRecord) -> None:
        self.uow.writable()
        item: Item = {"pk": s(runs_pk(owner_id)), "sk": s(slot(record.seq)), "seq": n(record.seq),
                      **text_body(record.to_text(compact=True), "run record")}
        self._puts[(owner_id, slot(record.seq))] = {"PutRequest": {"Item": item}}  # a later run wins its slot
        self.uow.after_commit(self._write_puts)

    def _write_puts(self) -> None:
        puts, self._puts = list(self._puts.values()), {}
        if puts:
            self.tables.write_batch(self.table, puts)

    def trim(self, owner_id: str, below_seq: int) -> None:
        """Nothing to do: a run's put takes the slot of the one it pushes out."""

    def get(self, owner_id: str, seq: int, floor: int) -> RunRecord | None:
        if seq < floor:
            return None
        item = self.tables.get(self.table, runs_pk(owner_id), slot(seq))
        return RunRecord.from_text(load_text(item)) if item is not None and number(item, "seq") == seq else None

    def list(self, owner_id: str, page: PageRequest, floor: int) -> Page[RunRecord]:
        """The whole ring in one Query (at most 100 records), paged here."""
        items = self.tables.query(Query(self.table, "pk = :pk", {":pk": s(runs_pk(owner_id))}))
        rows = [(number(item, "seq"), item) for item in items]
        shown = paginate([(seq, item) for seq, item in rows if seq >= floor], page)
        return Page([RunRecord.from_text(load_text(item)) for item in shown.items], shown.seqs, shown.total_count)

    def remove_all(self, owner_id: str) -> None:
        self.uow.writable()
        q = Query(self.table, "pk = :pk", {":pk": s(runs_pk(owner_id))}, projection="pk, sk")
        self.tables.delete_keys(self.table, [(runs_pk(owner_id), item["sk"]["S"]) for item in self.tables.iterate(q)])
