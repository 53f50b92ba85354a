"""The storage contract, runs on record: idempotent puts, newest-first paging above a floor,
retention of the records pushed out, and a purge."""

from __future__ import annotations

from headwater.domain.pagination import PageRequest
from headwater.domain.run_records import RUNS_KEPT, RunRecord
from tests.contract.conftest import Backend

OWNER = "dc_owner"


def record(seq: int, **fields: object) -> RunRecord:
    return RunRecord(seq=seq, ended_ms=1_000 + seq, kind="http", outcome="success", duration_ms=1.5,
                     trigger={"body": {"n": seq}, "é": "ü"}, **fields)  # type: ignore[arg-type]


def put(store: Backend, *seqs: int, keep_from: int | None = None, owner: str = OWNER) -> None:
    with store.uow() as uow:
        for seq in seqs:
            uow.runs.put(owner, record(seq))
        if keep_from is not None:
            uow.runs.trim(owner, keep_from)
        uow.commit()


def seqs(store: Backend, page: PageRequest, floor: int = 1, owner: str = OWNER) -> tuple[list[int], int]:
    with store.uow(readonly=True) as uow:
        found = uow.runs.list(owner, page, floor)
    assert found.seqs == [r.seq for r in found.items]
    return found.seqs, found.total_count


def test_a_put_is_idempotent_and_reads_back_whole(store: Backend) -> None:
    full = record(1, error={"code": "X", "message": "m", "stack": "s"}, logs=[{"level": "log", "message": "hi",
                                                                              "ts": 3}],
                  emitted={"": {"count": 1, "ids": ["1-1"]}}, db_keys_written=["k"], db_keys_count=1,
                  db_before={"values": {"k": {"n": 1}}, "absent": ["j"]})
    for _ in range(2):
        with store.uow() as uow:
            uow.runs.put(OWNER, full)
            uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.runs.get(OWNER, 1, 1) == full
        assert uow.runs.get(OWNER, 2, 1) is None
        assert uow.runs.get("dc_other", 1, 1) is None
        assert uow.runs.get(OWNER, 1, 2) is None  # below the floor
    assert seqs(store, PageRequest(10)) == ([1], 1)


def test_runs_page_newest_first_above_the_floor(store: Backend) -> None:
    put(store, *range(1, 13))
    put(store, 3, owner="dc_other")
    assert seqs(store, PageRequest(5)) == ([12, 11, 10, 9, 8], 12)
    assert seqs(store, PageRequest(5, after=8)) == ([7, 6, 5, 4, 3], 12)
    assert seqs(store, PageRequest(5, after=3)) == ([2, 1], 12)
    assert seqs(store, PageRequest(5, before=9)) == ([12, 11, 10], 12)
    assert seqs(store, PageRequest(3, before=2)) == ([5, 4, 3], 12)
    assert seqs(store, PageRequest(5), floor=10) == ([12, 11, 10], 3)
    assert seqs(store, PageRequest(5, after=11), floor=10) == ([10], 3)
    assert seqs(store, PageRequest(5, after=10), floor=10) == ([], 3)
    assert seqs(store, PageRequest(5), owner="dc_other") == ([3], 1)


def test_the_newest_100_are_kept_past_a_wrap(store: Backend) -> None:
    for start in range(1, 251, 50):
        put(store, *range(start, start + 50), keep_from=max(1, start + 50 - RUNS_KEPT))
    floor = 251 - RUNS_KEPT
    with store.uow(readonly=True) as uow:
        assert uow.runs.get(OWNER, floor - 1, floor) is None and uow.runs.get(OWNER, 50, floor) is None
        assert uow.runs.get(OWNER, floor, floor) == record(floor)
        assert uow.runs.get(OWNER, 250, floor) == record(250)
    shown, total = seqs(store, PageRequest(100), floor=floor)
    assert shown == list(range(250, floor - 1, -1)) and total == RUNS_KEPT


def test_remove_all_purges_one_owner(store: Backend) -> None:
    put(store, 1, 2)
    put(store, 1, owner="dc_other")
    with store.uow() as uow:
        uow.runs.remove_all(OWNER)
        uow.commit()
    assert seqs(store, PageRequest(10)) == ([], 0)
    assert seqs(store, PageRequest(10), owner="dc_other") == ([1], 1)
