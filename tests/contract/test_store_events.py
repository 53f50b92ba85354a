"""The storage contract, events: order by (ms, seq) as numbers, retention, range deletion."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.domain.events import EventId
from headwater.domain.models import StoredEvent
from tests.contract.conftest import Backend

EMITTER = "dc_emitter"


def event(event_id: str, channel: str = "", body: Any = None) -> StoredEvent:
    ms = int(event_id.split("-")[0])
    return StoredEvent(event_id, ms, body if body is not None else {"id": event_id},
                       {"emit_id": event_id, "name": channel, "ts": ms}, channel)


def put(store: Backend, *events: StoredEvent, emitter: str = EMITTER) -> None:
    with store.uow() as uow:
        for e in events:
            uow.events.put(emitter, e)
        uow.commit()


def ids(events: list[StoredEvent]) -> list[str]:
    return [e.id for e in events]


def everything(store: Backend, channel: str = "", emitter: str = EMITTER) -> list[str]:
    with store.uow(readonly=True) as uow:
        return ids(uow.events.newest(emitter, channel, 1000))


def test_a_put_is_idempotent_and_reads_back_whole(store: Backend) -> None:
    first = event("1000-1", "", {"nested": [1, 2.5, None, {"s": "é"}]})
    put(store, first)
    put(store, first)
    with store.uow(readonly=True) as uow:
        assert uow.events.count(EMITTER, "") == 1
        assert uow.events.get(EMITTER, "", "1000-1") == first
        assert uow.events.get(EMITTER, "other", "1000-1") is None
        assert uow.events.get(EMITTER, "", "1000-2") is None
        assert uow.events.get(EMITTER, "", "not-an-id") is None


def test_events_order_by_ms_then_seq_as_numbers(store: Backend) -> None:
    put(store, *(event(i) for i in ("1000-2", "999-5", "1000-10", "1000-1", "99-100")))
    with store.uow(readonly=True) as uow:
        assert ids(uow.events.newest(EMITTER, "", 10)) == ["1000-10", "1000-2", "1000-1", "999-5", "99-100"]
        assert ids(uow.events.newest(EMITTER, "", 2)) == ["1000-10", "1000-2"]
        assert ids(uow.events.after(EMITTER, "", EventId(999, 5), 10)) == ["1000-1", "1000-2", "1000-10"]
        assert ids(uow.events.after(EMITTER, "", EventId(1000, 1), 1)) == ["1000-2"]
        assert ids(uow.events.after(EMITTER, "", EventId(0, 0), 10)) == ["99-100", "999-5", "1000-1", "1000-2",
                                                                         "1000-10"]
        assert uow.events.after(EMITTER, "", EventId(1000, 10), 10) == []
        assert uow.events.count(EMITTER, "") == 5


def test_channels_and_emitters_are_apart(store: Backend) -> None:
    put(store, event("1-1"), event("1-2", "$errors"), event("1-3", "custom"))
    put(store, event("1-4"), emitter="dc_other")
    assert everything(store) == ["1-1"]
    assert everything(store, "$errors") == ["1-2"]
    assert everything(store, "custom") == ["1-3"]
    assert everything(store, emitter="dc_other") == ["1-4"]


def test_trim_keeps_the_newest_of_its_channel_only(store: Backend) -> None:
    put(store, *(event(f"{ms}-{ms}", "a") for ms in (998, 999, 1000, 1001, 1002)),
        *(event(f"{ms}-1", "b") for ms in (1, 2, 3)))
    with store.uow() as uow:
        uow.events.trim(EMITTER, "a", 2)
        uow.commit()
    assert everything(store, "a") == ["1002-1002", "1001-1001"]
    assert everything(store, "b") == ["3-1", "2-1", "1-1"]
    with store.uow() as uow:
        uow.events.trim(EMITTER, "a", 2)  # again: nothing more goes
        uow.events.trim(EMITTER, "b", 5)
        uow.commit()
    assert everything(store, "a") == ["1002-1002", "1001-1001"]
    assert everything(store, "b") == ["3-1", "2-1", "1-1"]


def test_a_trim_without_commit_trims_nothing(store: Backend) -> None:
    put(store, *(event(f"1-{i}") for i in range(1, 4)))
    with store.uow() as uow:
        uow.events.trim(EMITTER, "", 1)
    assert everything(store) == ["1-3", "1-2", "1-1"]


@pytest.fixture
def two_channels(store: Backend) -> Backend:
    """Ids 9-1 .. 12-3 in the default channel and in `x` (including 9-x, 10-x: string order differs)."""
    ids_ = [f"{ms}-{seq}" for ms in (9, 10, 11, 12) for seq in (1, 2, 3)]
    put(store, *(event(i) for i in ids_), *(event(i, "x") for i in ids_))
    return store


def delete(store: Backend, channel: str | None, start: str | None, end: str | None) -> int:
    with store.uow() as uow:
        deleted = uow.events.delete_range(EMITTER, channel, EventId.parse(start) if start else None,
                                          EventId.parse(end) if end else None)
        uow.commit()
    return deleted


def test_deleting_without_bounds_or_channel_empties_every_channel(two_channels: Backend) -> None:
    put(two_channels, event("1-1"), emitter="dc_other")
    assert delete(two_channels, None, None, None) == 24
    assert everything(two_channels) == [] and everything(two_channels, "x") == []
    assert everything(two_channels, emitter="dc_other") == ["1-1"]
    assert delete(two_channels, None, None, None) == 0  # idempotent
    put(two_channels, event("20-1", "x"))  # a channel used again is found again
    assert delete(two_channels, None, None, None) == 1


def test_deleting_from_a_start(two_channels: Backend) -> None:
    assert delete(two_channels, None, "10-2", None) == 16
    assert everything(two_channels) == ["10-1", "9-3", "9-2", "9-1"]
    assert everything(two_channels, "x") == ["10-1", "9-3", "9-2", "9-1"]


def test_deleting_up_to_an_end(two_channels: Backend) -> None:
    assert delete(two_channels, None, None, "10-2") == 10
    assert everything(two_channels) == ["12-3", "12-2", "12-1", "11-3", "11-2", "11-1", "10-3"]


def test_deleting_between_both_bounds_inclusive(two_channels: Backend) -> None:
    assert delete(two_channels, None, "9-3", "11-1") == 10
    assert everything(two_channels) == ["12-3", "12-2", "12-1", "11-3", "11-2", "9-2", "9-1"]


def test_deleting_one_id_deletes_exactly_that_event(two_channels: Backend) -> None:
    assert delete(two_channels, "", "10-2", "10-2") == 1
    assert "10-2" not in everything(two_channels)
    assert len(everything(two_channels)) == 11 and len(everything(two_channels, "x")) == 12
    assert delete(two_channels, "", "10-2", "10-2") == 0


def test_deleting_from_one_channel_leaves_the_others(two_channels: Backend) -> None:
    assert delete(two_channels, "x", None, None) == 12
    assert everything(two_channels, "x") == []
    assert len(everything(two_channels)) == 12
    assert delete(two_channels, "", "11-1", None) == 6
    assert everything(two_channels) == ["10-3", "10-2", "10-1", "9-3", "9-2", "9-1"]


def test_an_empty_or_reversed_range_deletes_nothing(two_channels: Backend) -> None:
    assert delete(two_channels, None, "11-1", "10-1") == 0
    assert delete(two_channels, "nope", None, None) == 0
    assert delete(two_channels, None, "13-1", None) == 0
    assert len(everything(two_channels)) == 12
