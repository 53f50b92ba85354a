"""SourceTrials on the fakes (services/source_trials.py): a new version runs on the source's
recorded inputs from `this.db` as it was before the first of them, is billed to the caller, and
leaves the source untouched; a gap in the records is said, not guessed over."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.domain.errors import Conflict, Invalid, NotFound
from headwater.domain.events import Emit
from headwater.domain.models import Principal
from headwater.domain.runs import RunResult
from headwater.ports import Instance
from headwater.services.source_trials import SourceTrialRequest
from tests.fakes import World, to_end, world
from tests.services.test_services import HTTP, component_code, deploy, principal, run_task


def live(instance: Instance, event: Any) -> RunResult:
    count = instance.db.get("count", 0) + 1
    return RunResult(emits=[Emit({"n": event["n"], "count": count}, {"id": f"o-{event['n']}"})],
                     db_writes={"count": count})


def tried(instance: Instance, event: Any) -> RunResult:
    """Counts twice as fast, leaves out n=2, and emits a note for n=1."""
    count = instance.db.get("count", 0) + 2
    emits = [] if event["n"] == 2 else [Emit({"n": event["n"], "count": count}, {"id": f"o-{event['n']}"})]
    if event["n"] == 1:
        emits.append(Emit({"note": 1}, {"id": "note-1", "name": "notes"}))
    return RunResult(emits=emits, db_writes={"count": count})


def recorded(w: World, runs: int) -> tuple[Any, Any]:
    w.runner.script = live
    ada = principal(w)
    source = deploy(w, ada, configurable_props=HTTP)
    for n in range(1, runs + 1):
        to_end(w.services.runs.run_batch([run_task(source.id, {"n": n}, f"t{n}")]))
    return ada, source


def snapshot(w: World, source_id: str) -> tuple[Any, ...]:
    with w.store.uow(readonly=True) as uow:
        state = uow.state.get(source_id)
        return (state.db, state.runs, state.last_seq, uow.events.count(source_id, ""), len(w.queue.pending),
                len(w.store.data.runs))


def test_a_trial_diffs_each_run_from_the_state_before_the_first_and_changes_nothing() -> None:
    w = world()
    ada, source = recorded(w, 3)
    before = snapshot(w, source.id)
    w.runner.script, w.runner.bills[:] = tried, []
    trial = to_end(w.services.source_trials.trial(ada, source.id, SourceTrialRequest(
        component_code=component_code(configurable_props=HTTP, version="2"), runs=2)))
    assert trial["state_exact"] and trial["runs_tried"] == 2
    first, second = trial["runs"]  # runs 2 and 3, from count 1 (what run 1 left), not 3 (now)
    assert [r["trigger"]["n"] for r in trial["runs"]] == [2, 3]
    assert (first["removed"][0]["id"], first["added"], first["changed"]) == ("o-2", [], [])
    [changed] = second["changed"]
    assert changed["live"]["event"] == {"n": 3, "count": 3} and changed["trial"]["event"] == {"n": 3, "count": 5}
    assert snapshot(w, source.id) == before
    assert {who for op, who in w.runner.bills if op == "run"} == {ada.user.id}


def test_the_added_emit_of_a_new_channel_and_the_default_of_all_runs() -> None:
    w = world()
    ada, source = recorded(w, 2)
    w.runner.script = tried
    trial = to_end(w.services.source_trials.trial(ada, source.id, SourceTrialRequest(
        component_code=component_code(configurable_props=HTTP))))
    assert trial["runs_requested"] == 10 and trial["runs_tried"] == 2
    [added] = trial["runs"][0]["added"]
    assert (added["channel"], added["trial"]["event"]) == ("notes", {"note": 1})
    assert trial["totals"] == {"added": 1, "removed": 1, "changed": 1, "unchanged": 0, "unknown": 0, "errors": 0}


def test_a_missing_record_is_said_and_a_record_without_undo_log_too() -> None:
    w = world()
    ada, source = recorded(w, 3)
    del w.store.data.runs[(source.id, 2)]
    trial = to_end(w.services.source_trials.trial(ada, source.id, SourceTrialRequest(
        component_code=component_code(configurable_props=HTTP), runs=3)))
    assert not trial["state_exact"] and "not on record" in trial["state_note"]
    w2 = world()
    ada2, source2 = recorded(w2, 2)
    w2.store.data.runs[(source2.id, 2)].db_before = None  # recorded before undo logs
    trial = to_end(w2.services.source_trials.trial(ada2, source2.id, SourceTrialRequest(
        component_code=component_code(configurable_props=HTTP), runs=2)))
    assert not trial["state_exact"] and "before their values were kept" in trial["state_note"]


def test_refusals() -> None:
    w = world()
    ada, source = recorded(w, 1)
    request = SourceTrialRequest(component_code=component_code(configurable_props=HTTP))
    user, _ = w.services.accounts.create_user("bob", "bob@example.com", "paid")
    stranger = Principal(user)
    with pytest.raises(NotFound):
        to_end(w.services.source_trials.trial(stranger, source.id, request))
    with pytest.raises(Invalid):
        to_end(w.services.source_trials.trial(ada, source.id, SourceTrialRequest(component_code="x", runs=101)))
    with pytest.raises(Invalid):
        to_end(w.services.source_trials.trial(ada, source.id, SourceTrialRequest(
            component_code=component_code(type="action"))))
    quiet = deploy(w, ada, configurable_props=HTTP)
    with pytest.raises(Conflict):
        to_end(w.services.source_trials.trial(ada, quiet.id, request))


def test_a_state_patch_after_the_first_run_tried_is_said_not_exact() -> None:
    w = world()
    ada, source = recorded(w, 2)
    to_end(w.services.states.patch(ada, source.id, {"count": 40}))
    request = SourceTrialRequest(component_code=component_code(configurable_props=HTTP), runs=2)
    trial = to_end(w.services.source_trials.trial(ada, source.id, request))
    assert not trial["state_exact"] and "outside runs" in trial["state_note"]
    to_end(w.services.runs.run_batch([run_task(source.id, {"n": 3}, "t3")]))
    newest = to_end(w.services.source_trials.trial(ada, source.id, SourceTrialRequest(
        component_code=component_code(configurable_props=HTTP), runs=1)))
    assert newest["state_exact"]  # run 3 came after the patch: its state before is the patched one
    assert newest["runs"][0]["changed"] == [] and newest["runs"][0]["unchanged"] == 1
