"""A source's `this.db` for its owner (issue 34, item 2), on the fakes: kept across updates, a
snapshot at each deploy, update and restore (the newest 10 kept), a merge patch bounded like runs'
writes and racing them without losing either side's writes, and a restore that is an update."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.domain.errors import Conflict, Invalid, NotFound
from headwater.domain.models import Principal
from headwater.domain.runs import RunResult
from headwater.services.recording import Outcome, commit_outcomes
from headwater.services.sources import SourceRequest
from tests.fakes import FakeUnitOfWork, World, to_end, world
from tests.services.test_services import component_code, deploy, principal, run_task

COUNTER = {"hooks": ["activate", "deactivate"]}


def counting(w: World) -> list[tuple[str, dict[str, Any]]]:
    """Runs add one to `count`; hooks are recorded with the db they saw."""
    seen: list[tuple[str, dict[str, Any]]] = []
    w.runner.script = lambda instance, event: RunResult(db_writes={"count": instance.db.get("count", 0) + 1})

    def hook(instance: Any, name: str) -> RunResult:
        seen.append((name, dict(instance.db)))
        return RunResult(db_writes={"activated": True} if name == "activate" else {})
    w.runner.hooks = hook
    return seen


def run(w: World, source_id: str, n: int, prefix: str = "t") -> None:
    for i in range(n):
        to_end(w.services.runs.run_batch([run_task(source_id, {}, f"{prefix}{i}")]))


def db(w: World, source_id: str) -> dict[str, Any]:
    with w.store.uow(readonly=True) as uow:
        return uow.state.get(source_id).db


def update(w: World, who: Principal, source_id: str, version: str) -> None:
    req = SourceRequest(component_code=component_code(version=version, **COUNTER))
    to_end(w.services.sources.update(who, source_id, req))


def test_the_db_is_kept_across_updates_and_each_deploy_and_update_takes_a_snapshot() -> None:
    w = world()
    counting(w)
    ada = principal(w)
    source = deploy(w, ada, **COUNTER)
    run(w, source.id, 3)
    update(w, ada, source.id, "2")
    assert db(w, source.id) == {"count": 3, "activated": True}
    snapshots = w.services.states.snapshots(ada, source.id)
    assert [s.reason for s in snapshots] == ["update", "deploy"]
    assert snapshots[0].db == {"count": 3, "activated": True}  # the state the update replaced
    assert snapshots[0].component_id == source.component_id and snapshots[0].component_version == "1"
    assert snapshots[1].db == {"activated": True}  # the state the deploy left
    for i in range(12):
        update(w, ada, source.id, f"{i + 3}")
    assert len(w.services.states.snapshots(ada, source.id)) == 10


def test_a_patch_merges_keys_and_the_next_run_sees_it() -> None:
    w = world()
    counting(w)
    ada = principal(w)
    source = deploy(w, ada, **COUNTER)
    run(w, source.id, 2)
    state = to_end(w.services.states.patch(ada, source.id, {"count": 40, "activated": None, "cfg": {"a": 1}}))
    assert state.db == {"count": 40, "cfg": {"a": 1}}
    to_end(w.services.states.patch(ada, source.id, {"cfg": {"b": 2, "a": None}}))
    run(w, source.id, 1, "u")
    assert db(w, source.id) == {"count": 41, "cfg": {"b": 2}}


def test_a_patch_over_the_bound_changes_nothing() -> None:
    w = world(db_max_bytes=100)
    counting(w)
    ada = principal(w)
    source = deploy(w, ada, **COUNTER)
    before = db(w, source.id)
    with pytest.raises(Invalid) as refused:
        to_end(w.services.states.patch(ada, source.id, {"big": "x" * 200}))
    assert "over the limit of 100 bytes" in refused.value.message
    assert db(w, source.id) == before


def test_a_patch_racing_a_runs_commit_keeps_both_writes() -> None:
    w = world()
    counting(w)
    ada = principal(w)
    source = deploy(w, ada, **COUNTER)
    raced: list[int] = []

    def run_commits_first(uow: FakeUnitOfWork, source_id: str) -> None:
        """The patch's save is about to commit: a run (whose lease ran out) commits first."""
        if raced:
            return
        raced.append(1)
        ctx = w.services.runs.context(source, w.services.runs.component(source.component_id))  # type: ignore[arg-type]
        commit_outcomes(w.store.uow, source_id, [Outcome(ctx, RunResult(db_writes={"run": "wrote"}))], lambda: 1)
    w.store.before_commit = run_commits_first
    to_end(w.services.states.patch(ada, source.id, {"owner": "wrote"}))
    assert raced and db(w, source.id) == {"activated": True, "run": "wrote", "owner": "wrote"}


def test_a_restore_is_an_update_and_can_be_undone() -> None:
    w = world()
    seen = counting(w)
    ada = principal(w)
    source = deploy(w, ada, **COUNTER)
    run(w, source.id, 3)
    update(w, ada, source.id, "2")
    good = w.services.states.snapshots(ada, source.id)[0]
    to_end(w.services.states.patch(ada, source.id, {"count": -999}))  # the bad state
    seen.clear()
    state, undo = to_end(w.services.states.restore(ada, source.id, good.id))
    assert state.db == {"count": 3, "activated": True}
    assert seen == [("deactivate", {"count": -999, "activated": True}), ("activate", {"count": 3, "activated": True})]
    assert w.services.sources.get(ada, source.id).updated_at >= source.updated_at
    snapshots = w.services.states.snapshots(ada, source.id)
    assert snapshots[0].id == undo and snapshots[0].reason == "restore"
    assert snapshots[0].db == {"count": -999, "activated": True}
    run(w, source.id, 1, "after")
    assert db(w, source.id)["count"] == 4
    state, _ = to_end(w.services.states.restore(ada, source.id, undo))  # the restore undone
    assert state.db["count"] == -999


def test_a_restore_of_an_unknown_snapshot_or_one_over_the_bound_is_refused() -> None:
    w = world(db_max_bytes=200)
    counting(w)
    ada = principal(w)
    source = deploy(w, ada, **COUNTER)
    to_end(w.services.states.patch(ada, source.id, {"big": "x" * 150}))
    update(w, ada, source.id, "2")
    big = w.services.states.snapshots(ada, source.id)[0]
    w.services.settings.db_max_bytes = 100
    with pytest.raises(Invalid):
        to_end(w.services.states.restore(ada, source.id, big.id))
    with pytest.raises(NotFound):
        to_end(w.services.states.restore(ada, source.id, "ss_none"))


def test_another_namespace_sees_no_state_and_a_purge_takes_the_snapshots() -> None:
    w = world()
    counting(w)
    ada = principal(w)
    eve = Principal(w.services.accounts.create_user("eve", "eve@example.com", "paid")[0])
    source = deploy(w, ada, **COUNTER)
    snapshot = w.services.states.snapshots(ada, source.id)[0]
    for attempt in (lambda: w.services.states.get(eve, source.id),
                    lambda: w.services.states.snapshots(eve, source.id),
                    lambda: to_end(w.services.states.patch(eve, source.id, {"x": 1})),
                    lambda: to_end(w.services.states.restore(eve, source.id, snapshot.id))):
        with pytest.raises(NotFound):
            attempt()
    assert db(w, source.id) == {"activated": True}
    to_end(w.services.sources.delete(ada, source.id))
    w.queue.drain()
    with w.store.uow(readonly=True) as uow:
        assert uow.snapshots.list(source.id) == []


def test_a_patch_or_restore_that_keeps_losing_the_race_is_a_409_and_writes_nothing_of_its_own() -> None:
    w = world()
    counting(w)
    ada = principal(w)
    source = deploy(w, ada, **COUNTER)
    snapshot = w.services.states.snapshots(ada, source.id)[0]
    ctx = w.services.runs.context(source, w.services.runs.component(source.component_id))  # type: ignore[arg-type]
    racing = [True]

    def another_writer_commits_first(uow: FakeUnitOfWork, source_id: str) -> None:
        if racing[0]:
            racing[0] = False  # not while it commits itself
            commit_outcomes(w.store.uow, source_id, [Outcome(ctx, RunResult(db_writes={"other": 1}))], lambda: 1)
            racing[0] = True
    w.store.before_commit = another_writer_commits_first
    with pytest.raises(Conflict) as patch_lost:
        to_end(w.services.states.patch(ada, source.id, {"mine": 1}))
    with pytest.raises(Conflict) as restore_lost:
        to_end(w.services.states.restore(ada, source.id, snapshot.id))
    assert patch_lost.value.status == restore_lost.value.status == 409
    racing[0] = False
    assert "mine" not in db(w, source.id) and db(w, source.id)["other"] == 1
    assert [s.reason for s in w.services.states.snapshots(ada, source.id)] == ["deploy"]
