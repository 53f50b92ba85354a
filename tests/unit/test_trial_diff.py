"""domain.trial_diff: `this.db` before a run from the undo logs, and the emit diff of a trial."""

from __future__ import annotations

from headwater.domain.run_records import RunRecord, masked
from headwater.domain.trial_diff import Emitted, diff, state_before


def rec(seq: int, before: dict | None = None, keys: int = 0) -> RunRecord:
    return RunRecord(seq=seq, ended_ms=seq, kind="http", outcome="success", duration_ms=1.0, db_before=before,
                     db_keys_count=keys)


def test_the_state_before_a_run_is_the_current_one_undone_newest_first() -> None:
    records = [rec(3, {"values": {"n": 2}}, 1), rec(2, None), rec(1, {"values": {"n": 0}, "absent": ["seen"]}, 2)]
    state = state_before({"n": 3, "seen": True, "kept": 1}, records, 1, 3)
    assert (state.db, state.exact, state.reason) == ({"n": 0, "kept": 1}, True, None)
    assert state_before({"n": 3}, records, 2, 3).db == {"n": 2}


def test_the_state_is_said_approximate_when_a_record_misses_or_cannot_undo() -> None:
    gap = state_before({"n": 3}, [rec(3), rec(1)], 1, 3)
    assert not gap.exact and "runs 2..2" in (gap.reason or "")
    old = state_before({"n": 3}, [rec(1, None, keys=1)], 1, 1)
    assert not old.exact and "before their values were kept" in (old.reason or "")
    cut = state_before({"n": 3}, [rec(1, {"incomplete": 70000}, keys=1)], 1, 1)
    assert not cut.exact and "70000 bytes" in (cut.reason or "")
    newest_missing = state_before({}, [rec(2)], 2, 3)
    assert not newest_missing.exact


def test_emits_pair_by_channel_and_id_then_by_order() -> None:
    live = [Emitted("", "a", {"v": 1}), Emitted("", "b", {"v": 2}), Emitted("x", None, 1), Emitted("x", None, 2)]
    trial = [Emitted("", "b", {"v": 2}), Emitted("", "c", {"v": 3}), Emitted("x", None, 1), Emitted("x", None, 5),
             Emitted("x", None, 6)]
    out = diff(trial, live)
    assert out.unchanged == 2
    assert [(c["channel"], c["live"]["event"], c["trial"]["event"]) for c in out.changed] == [("x", 2, 5)]
    assert [(a["channel"], a["id"]) for a in out.added] == [("", "c"), ("x", None)]
    assert [(r["channel"], r["id"]) for r in out.removed] == [("", "a")]


def test_a_summary_change_is_a_change_and_unretained_live_events_are_unknown() -> None:
    out = diff([Emitted("", "a", 1, "new")], [Emitted("", "a", 1, "old")])
    assert len(out.changed) == 1
    out = diff([Emitted("", "a", 1)], [Emitted("", None, None, event_id="5-1", known=False)])
    assert (out.added, out.removed, out.unknown[0]["live_event_id"]) == ([], [], "5-1")


def test_masked_replaces_secrets_everywhere_longest_first() -> None:
    assert masked({"k-secret1": ["a secret1 and secret12"], "n": 1}, {"secret1", "secret12"}) == {
        "k-[secret]": ["a [secret] and [secret]"], "n": 1}


def test_a_change_of_this_db_outside_runs_is_said_when_the_trial_reaches_back_past_it() -> None:
    from headwater.domain.models import SourceState

    state = SourceState(db={"n": 3}, runs=2)
    state.db_changed_outside_runs()  # a state patch after run 2
    again = SourceState.from_json(state.to_json(), 1)
    assert again.db_outside_runs == 2
    records = [rec(3, {"values": {"n": 2}}, 1), rec(2, None), rec(1, None)]
    across = state_before({"n": 3}, records, 1, 3, again.db_outside_runs)
    assert not across.exact and "outside runs" in (across.reason or "")
    assert state_before({"n": 3}, records, 3, 3, again.db_outside_runs).exact  # the window starts after it
    assert "db_outside_runs" not in SourceState(runs=5).to_json()
