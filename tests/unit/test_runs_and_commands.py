"""The pure core of runs and commands: recording an outcome on a state, the commands' wire form."""

from __future__ import annotations

import json

import pytest

from headwater.adapters.local.lanes import MAX_RUN_BATCH, tenant_of
from headwater.domain.commands import (
    DeleteEvents,
    DeliverFirstAttempts,
    DeliverWebhook,
    FanOut,
    PurgeSource,
    RunSource,
    RunWorkflow,
    Send,
    SyncSchedule,
    TimerTick,
    from_message,
    to_message,
)
from headwater.domain.events import Emit, EventId
from headwater.domain.models import SourceState, StoredEvent, applied_key
from headwater.domain.routing import carried, fan_out_parts
from headwater.domain.runs import Limits, RunContext, RunResult, record
from headwater.ports import Task

CTX = RunContext("dc_x", "u_x", "1.0", dedupe="unique")


def test_record_assigns_increasing_ids_and_never_goes_back_in_time() -> None:
    state = SourceState(last_ms=5000, last_seq=7)
    result = RunResult(emits=[Emit({"a": 1}, {"id": 1}), Emit({"b": 2}, {"id": 2, "name": "side"})],
                       logs=[{"level": "info", "message": "m", "ts": 1}])
    out = record(state, CTX, result, trigger=None, now_ms=4000, task_id="t1")
    assert [e.id for e in out.events] == ["5000-8", "5000-9", "5000-10"]
    assert [e.channel for e in out.events] == ["", "side", "$logs"]
    assert out.state.last_seq == 10 and out.state.applied == [applied_key("t1")] and out.state.took("t1")
    assert state.last_seq == 7 and state.applied == []  # the input is not changed
    assert out.events[0].metadata == {"emitter_id": "dc_x", "emit_id": "5000-8", "name": "", "summary": None,
                                      "id": 1, "ts": 4000}


def test_record_dedupes_against_the_state_it_is_given() -> None:
    first = record(SourceState(), CTX, RunResult(emits=[Emit(1, {"id": "a"})]), None, 1000)
    again = record(first.state, CTX, RunResult(emits=[Emit(1, {"id": "a"}), Emit(2, {"id": "b"})]), None, 1001)
    assert [e.event for e in again.events] == [2]
    assert EventId.parse(again.events[0].id) > EventId.parse(first.events[0].id)


def test_record_merges_db_writes_and_deletes_nulls() -> None:
    out = record(SourceState(db={"a": 1, "b": 2}), CTX, RunResult(db_writes={"a": None, "c": 3}), None, 1)
    assert out.state.db == {"b": 2, "c": 3}


def test_an_error_becomes_one_errors_event_with_the_source_context() -> None:
    out = record(SourceState(), CTX, RunResult.failed("TIMEOUT", "slow", "at run (x.mjs:1)"), {"in": 1}, 77)
    [event] = out.events
    assert event.channel == "$errors"
    assert event.event["original_event"] == {"in": 1}
    assert event.event["original_context"]["source_id"] == "dc_x"
    assert event.event["error"] == {"code": "TIMEOUT", "cellId": None, "ts": 77, "stack": "at run (x.mjs:1)",
                                    "message": "slow"}


def test_applied_task_ids_are_bounded_and_cover_a_whole_local_batch() -> None:
    kept = Limits().applied_kept
    assert kept >= 2 * MAX_RUN_BATCH  # a replayed batch is known whole, with room
    state = SourceState(applied=[applied_key(str(i)) for i in range(kept)])
    assert record(state, CTX, RunResult(), None, 1, "new").state.applied[-1] == applied_key("new")
    assert len(record(state, CTX, RunResult(), None, 1, "new").state.applied) == kept
    fewer = RunContext("dc_1", "u_1", "0.1.0", limits=Limits(applied_kept=32))
    kept_fewer = record(state, fewer, RunResult(), None, 1, "new").state
    assert kept_fewer.applied == [*(applied_key(str(i)) for i in range(kept - 31, kept)), applied_key("new")]
    assert kept_fewer.took("new") and kept_fewer.took(str(kept - 1)) and not kept_fewer.took(str(kept - 32))


def test_a_state_keeps_short_keys_of_task_ids_and_still_knows_the_whole_ids_it_kept_before() -> None:
    sqs_id, routed = "0b2c1f7e-5a4d-4e0b-9c1a-2f6d8e7b3a10", "route:dc_" + "a" * 24 + ":1795803657485-19:dc_" + "b" * 24
    assert {len(applied_key(sqs_id)), len(applied_key(routed))} == {12}
    assert applied_key(sqs_id) != applied_key(routed)
    saved_before = SourceState.from_json({"applied": [sqs_id, routed]}, 3)  # a state from before the keys
    assert saved_before.took(sqs_id) and saved_before.took(routed) and not saved_before.took("other")
    after = record(saved_before, CTX, RunResult(), None, 1, "next").state
    assert after.took(sqs_id) and after.took("next") and after.applied[-1] == applied_key("next")
    full = SourceState()
    for i in range(Limits(applied_kept=32).applied_kept):
        full = record(full, RunContext("dc_1", "u_1", "0.1.0", limits=Limits(applied_kept=32)), RunResult(), None,
                      1, f"{sqs_id[:-2]}{i:02d}").state
    # 32 SQS message ids whole: 1.5 KB; the health counters (domain.health) add under 100 bytes here
    assert len(json.dumps(full.to_json())) < 800


@pytest.mark.parametrize("command", [
    RunSource("dc_a", {"body": [1, {"x": None}]}, 30000, "http", "u_a", "2026-11-23"),
    TimerTick("dc_a", 1700000000.5, "tok"),
    SyncSchedule("dc_a"),
    DeleteEvents("dc_a", "", "1-1", None),
    PurgeSource("dc_a"),
    RunSource("dc_a", {}, 30000, "manual", namespace="o_acme"),
    TimerTick("dc_a", 1700000000.5, namespace="u_a"),
    DeliverWebhook("del_1", attempt=0, namespace="u_a"),
    DeliverFirstAttempts(("del_1", "del_2"), "u_a"),
    RunWorkflow("p_a", {"n": 1}, "key", 1, "u_a"),
    Send("p_a", "http", {"url": "https://example.com"}, "k", 2, "u_a"),
    FanOut("dc_a", "u_a", "", ("1-1",), 2, None, ({"id": "1-1", "indexed_at_ms": 1, "event": {"n": [1]},
                                                  "metadata": {}, "channel": ""},)),
])
def test_commands_round_trip_through_their_message(command: object) -> None:
    assert from_message(json.loads(json.dumps(to_message(command)))) == command  # type: ignore[arg-type]


def test_a_command_queued_by_an_older_version_has_no_tenant_and_counts_as_one_of_its_own_lane() -> None:
    """Messages written before commands named their tenant (no `namespace` field) still decode."""
    old = {"type": "run_source", "source_id": "dc_a", "event": {}, "timeout_ms": 1000, "trigger": "http",
           "reserved_by": None, "reserved_day": None, "route_key": None, "hops": 0}
    command = from_message(old)
    assert command.tenant is None and tenant_of(Task("1", command)) == "lane:dc_a"
    assert tenant_of(Task("2", from_message({"type": "deliver_webhook", "delivery_id": "del_1"}))) == "lane:task:2"
    assert tenant_of(Task("3", from_message({**old, "namespace": "u_a"}))) == "u_a"
    assert tenant_of(Task("4", FanOut("dc_a", "o_acme", "", ("1-1",)))) == "o_acme"


def test_a_fan_out_carries_its_events_in_parts_that_fit_a_message() -> None:
    sizes = [30, 30, 30, 30, 30, 300, 30, 30]  # KiB: four small ones fill a part; a large one goes alone
    events = [StoredEvent(f"1-{n}", 1, "x" * (size * 1024), {"summary": "s"}) for n, size in enumerate(sizes)]
    parts = fan_out_parts(events)
    assert [[e.id for e in part] for part in parts] == [["1-0", "1-1", "1-2", "1-3"], ["1-4"], ["1-5"],
                                                         ["1-6", "1-7"]]
    assert StoredEvent(**carried(events[0])) == events[0]
    assert fan_out_parts([]) == []


def test_a_scheduler_tick_with_an_iso_time_and_unknown_messages() -> None:
    tick = from_message({"type": "timer_tick", "source_id": "dc_a", "due_at": "2026-01-01T00:00:00Z"})
    assert tick == TimerTick("dc_a", 1767225600.0)
    with pytest.raises(ValueError, match="unknown command"):
        from_message({"type": "nope"})
    assert RunSource("dc_a", None, 1, "manual").lane == "dc_a"


def test_bounds_refuse_oversized_events_and_extra_channels_and_cut_long_log_lines() -> None:
    ctx = RunContext("dc_x", "u_x", "1.0", limits=Limits(max_event_bytes=100, max_log_bytes=10, max_channels=2))
    state = SourceState(channels=["a"])
    result = RunResult(
        emits=[Emit("x" * 200), Emit(1, {"name": "b"}), Emit(2, {"name": "c"}), Emit(3, {"name": "a"}), Emit(4)],
        logs=[{"level": "log", "message": "é" * 20}],
    )
    out = record(state, ctx, result, None, 1)
    kept = [(e.channel, e.event) for e in out.events if e.channel not in ("$errors", "$logs")]
    assert kept == [("b", 1), ("a", 3), ("", 4)]
    assert out.state.channels == ["a", "b"]
    errors = [e.event["error"]["code"] for e in out.events if e.channel == "$errors"]
    assert errors == ["EVENT_TOO_LARGE", "CHANNEL_LIMIT"]
    [log] = [e.event["message"] for e in out.events if e.channel == "$logs"]
    assert log.startswith("ééééé") and log.endswith("[cut: 30 more bytes]")
