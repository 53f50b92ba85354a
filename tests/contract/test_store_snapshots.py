"""The storage contract, state snapshots (issue 34): written with the state they were taken with
(nothing without the commit), read back whole, the newest 10 kept per source, and a purge."""

from __future__ import annotations

from headwater.domain.models import SourceState
from headwater.domain.snapshots import SNAPSHOTS_KEPT, StateSnapshot
from tests.contract.conftest import Backend

SOURCE = "dc_snapshotted"


def snapshot(seq: int, db: dict[str, object] | None = None) -> StateSnapshot:
    return StateSnapshot(id=f"ss_{seq}", seq=seq, created_at=1_700_000_000 + seq, reason="update",
                         component_id="sc_v1", component_version="1.0.0", db={"n": seq, "é": "ü"} if db is None else db)


def put(store: Backend, *seqs: int, source: str = SOURCE) -> None:
    with store.uow() as uow:
        for seq in seqs:
            uow.snapshots.put(source, snapshot(seq))
        uow.commit()


def listed(store: Backend, source: str = SOURCE) -> list[int]:
    with store.uow(readonly=True) as uow:
        return [s.seq for s in uow.snapshots.list(source)]


def test_a_snapshot_reads_back_whole_and_only_for_its_source(store: Backend) -> None:
    big = {"k": "x" * 5000, "nested": {"a": [1, 2, {"b": None}]}}
    with store.uow() as uow:
        uow.snapshots.put(SOURCE, snapshot(1, big))
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.snapshots.get(SOURCE, "ss_1") == snapshot(1, big)
        assert uow.snapshots.get(SOURCE, "ss_2") is None
        assert uow.snapshots.get("dc_other", "ss_1") is None
        assert uow.snapshots.list("dc_other") == []


def test_nothing_is_written_without_the_commit(store: Backend) -> None:
    with store.uow() as uow:
        uow.snapshots.put(SOURCE, snapshot(1))
    assert listed(store) == []


def test_a_snapshot_commits_with_the_state_it_was_taken_with_or_not_at_all(store: Backend) -> None:
    with store.uow() as uow:
        uow.state.save(SOURCE, SourceState(db={"n": 1}, snapshots=1), 0)
        uow.snapshots.put(SOURCE, snapshot(1))
        uow.commit()
    stale = False
    try:
        with store.uow() as uow:
            uow.state.save(SOURCE, SourceState(db={"n": 2}, snapshots=2), 0)  # lost the race
            uow.snapshots.put(SOURCE, snapshot(2))
            uow.commit()
    except Exception as e:  # Conflict at the write or at commit, as the ports say
        stale = getattr(e, "field", None) == "version"
    assert stale
    assert listed(store) == [1]
    with store.uow(readonly=True) as uow:
        assert uow.state.get(SOURCE).snapshots == 1


def test_the_newest_ten_are_kept_newest_first(store: Backend) -> None:
    put(store, *range(1, 8))
    put(store, *range(8, 14))
    put(store, 3, source="dc_other")
    assert listed(store) == list(range(13, 3, -1))
    assert len(listed(store)) == SNAPSHOTS_KEPT
    with store.uow(readonly=True) as uow:
        assert uow.snapshots.get(SOURCE, "ss_3") is None  # pushed out
        assert uow.snapshots.get(SOURCE, "ss_4") == snapshot(4)
    assert listed(store, "dc_other") == [3]


def test_a_purge_removes_the_sources_snapshots_only(store: Backend) -> None:
    put(store, 1, 2)
    put(store, 1, source="dc_other")
    with store.uow() as uow:
        uow.snapshots.remove_all(SOURCE)
        uow.snapshots.remove_all("dc_none")  # idempotent
        uow.commit()
    assert listed(store) == []
    assert listed(store, "dc_other") == [1]
