"""Runs on record over the events table: `pk = #runs#<owner_id>`, `sk = <seq, 20 digits>`.

An emitter id never starts with `#`, so no event's pk is ever a runs pk. A record is put in the
run's own transaction (so it commits exactly with the run's outcome); retention deletes, right
after that commit, exactly the records the new ones pushed out of the newest 100 (their seqs are
known: no Query). One that a crash left behind is never shown (reads start at the floor) and costs
only its storage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.adapters.aws.dynamodb.codec import body, load, s
from headwater.adapters.aws.dynamodb.tables import Query
from headwater.adapters.aws.dynamodb.writes import put
from headwater.domain.pagination import MAX_SEQ, Page, PageRequest
from headwater.domain.run_records import RunRecord

if TYPE_CHECKING:
    from headwater.adapters.aws.dynamodb.uow import DynamoUnitOfWork


def runs_pk(owner_id: str) -> str:
    return f"#runs#{owner_id}"


def run_sk(seq: int) -> str:
    return f"{min(max(seq, 0), MAX_SEQ):020d}"


class DynamoRunRecords:
    def __init__(self, uow: DynamoUnitOfWork) -> None:
        self.uow = uow
        self.tables = uow.tables
        self.table = uow.tables.events
        self._puts: dict[str, int] = {}
        self._trims: dict[str, int] = {}

    def put(self, owner_id: str, record: RunRecord) -> None:
        item = {"pk": s(runs_pk(owner_id)), "sk": s(run_sk(record.seq)), **body(record.to_json(), "run record")}
        self.uow.write(put(self.table, item, deferrable=True))
        self._puts[owner_id] = self._puts.get(owner_id, 0) + 1

    def trim(self, owner_id: str, below_seq: int) -> None:
        self._trims[owner_id] = below_seq
        self.uow.after_commit(self._run_trims)

    def _run_trims(self) -> None:
        trims, puts = self._trims, self._puts
        self._trims, self._puts = {}, {}
        for owner_id, below in trims.items():
            pushed_out = range(max(1, below - puts.get(owner_id, 1)), below)
            if pushed_out:
                self.tables.delete_keys(self.table, [(runs_pk(owner_id), run_sk(seq)) for seq in pushed_out])

    def get(self, owner_id: str, seq: int, floor: int) -> RunRecord | None:
        if seq < floor or seq > MAX_SEQ:
            return None
        item = self.tables.get(self.table, runs_pk(owner_id), run_sk(seq))
        return RunRecord.from_json(load(item)) if item else None

    def list(self, owner_id: str, page: PageRequest, floor: int) -> Page[RunRecord]:
        pk, low = s(runs_pk(owner_id)), max(floor, 0)
        if page.after is not None:
            q = Query(self.table, "pk = :pk AND sk BETWEEN :lo AND :hi",
                      {":pk": pk, ":lo": s(run_sk(low)), ":hi": s(run_sk(page.after - 1))}, forward=False)
        elif page.before is not None:
            q = Query(self.table, "pk = :pk AND sk > :k", {":pk": pk, ":k": s(run_sk(page.before))})
        else:
            q = Query(self.table, "pk = :pk AND sk >= :lo", {":pk": pk, ":lo": s(run_sk(low))}, forward=False)
        items = [] if page.after is not None and page.after <= low else self.tables.query(q, page.limit)
        records = [RunRecord.from_json(load(item)) for item in items]
        if page.before is not None:
            records = [r for r in records if r.seq >= low][::-1]
        total = self.tables.count(Query(self.table, "pk = :pk AND sk >= :lo", {":pk": pk, ":lo": s(run_sk(low))}))
        return Page(records, [r.seq for r in records], total)

    def remove_all(self, owner_id: str) -> None:
        self.uow.writable()
        keys = [(runs_pk(owner_id), item["sk"]["S"])
                for item in self.tables.iterate(Query(self.table, "pk = :pk", {":pk": s(runs_pk(owner_id))},
                                                      projection="pk, sk"))]
        self.tables.delete_keys(self.table, keys)
