"""`this.db` of one source is bounded (DECISIONS, Limits; docs/security.md, "this.db is bounded").

A run (or a hook, or one run of a batch) whose writes would make the source's db more than
HEADWATER_DB_MAX_BYTES of JSON has none of its writes applied and leaves a `$errors` event
DB_TOO_LARGE; its emits and logs still stand. The rule is applied where run outcomes are committed
(domain.runs.record), so both backends get it: service tests on the in-memory fakes, then black-box
on the local service and the emulated AWS deployment at the default limit (1 MB). Here, the
service tests; tests/e2e/security/test_db_bound.py has the black-box ones.
"""

from __future__ import annotations

import json
from typing import Any

from headwater.domain.events import Emit
from headwater.domain.models import SourceState
from headwater.domain.runs import RunResult
from tests.fakes import World, to_end, world
from tests.services.test_services import deploy, principal, run_task

LIMIT = 1000


def state_and_errors(w: World, source_id: str) -> tuple[SourceState, list[dict[str, Any]]]:
    with w.store.uow(readonly=True) as uow:
        state = uow.state.get(source_id)
        errors = [e.event["error"] for e in uow.events.newest(source_id, "$errors", 100)]
    return state, errors


def emitted(w: World, source_id: str) -> list[Any]:
    with w.store.uow(readonly=True) as uow:
        return [e.event for e in uow.events.newest(source_id, "", 100)]


def size(db: dict[str, Any]) -> int:
    return len(json.dumps(db, separators=(",", ":")).encode())


def writes(event: dict[str, Any]) -> dict[str, Any]:
    return {event["key"]: "x" * event["size"]}


# the rule, on the fakes


def test_a_run_over_the_bound_keeps_no_write_but_its_emits_stand() -> None:
    w = world(db_max_bytes=LIMIT)
    w.runner.script = lambda instance, event: RunResult(emits=[Emit({"ran": event["key"]})],
                                                       db_writes={**writes(event), "marker": 1})
    ada = principal(w)
    source = deploy(w, ada)
    to_end(w.services.runs.run_batch([run_task(source.id, {"key": "small", "size": 10}, "t1")]))
    to_end(w.services.runs.run_batch([run_task(source.id, {"key": "big", "size": 2000}, "t2")]))
    state, errors = state_and_errors(w, source.id)
    assert state.db == {"small": "x" * 10, "marker": 1}  # none of the second run's writes, not even `marker`
    assert [e["code"] for e in errors] == ["DB_TOO_LARGE"]
    would_be = size({"small": "x" * 10, "marker": 1, "big": "x" * 2000})
    assert f"{would_be} bytes" in errors[0]["message"] and f"limit of {LIMIT} bytes" in errors[0]["message"]
    assert emitted(w, source.id) == [{"ran": "big"}, {"ran": "small"}]


def test_in_a_batch_only_the_run_over_the_bound_loses_its_writes() -> None:
    w = world(db_max_bytes=LIMIT)
    w.runner.script = lambda instance, event: RunResult(db_writes=writes(event))
    ada = principal(w)
    source = deploy(w, ada)
    tasks = [run_task(source.id, {"key": key, "size": size}, f"t{key}")
             for key, size in (("a", 100), ("b", 5000), ("c", 100))]
    to_end(w.services.runs.run_batch(tasks))
    state, errors = state_and_errors(w, source.id)
    assert set(state.db) == {"a", "c"}
    assert [e["code"] for e in errors] == ["DB_TOO_LARGE"]


def test_many_small_runs_cannot_add_up_past_the_bound() -> None:
    w = world(db_max_bytes=LIMIT)
    w.runner.script = lambda instance, event: RunResult(db_writes=writes(event))
    ada = principal(w)
    source = deploy(w, ada)
    for i in range(20):
        to_end(w.services.runs.run_batch([run_task(source.id, {"key": f"k{i}", "size": 90}, f"t{i}")]))
    state, errors = state_and_errors(w, source.id)
    assert len(state.db) < 20 and len(errors) == 20 - len(state.db)
    assert size(state.db) <= LIMIT


def test_a_hook_over_the_bound_keeps_no_write_and_the_next_hook_sees_what_is_kept() -> None:
    w = world(db_max_bytes=LIMIT)
    seen: dict[str, Any] = {}

    def hooks(instance: Any, hook: str) -> RunResult:
        seen[hook] = dict(instance.db)
        return RunResult(db_writes={"big": "x" * 5000} if hook == "deploy" else {"ok": True})

    w.runner.hooks = hooks
    ada = principal(w)
    source = deploy(w, ada, hooks=["deploy", "activate"])
    state, errors = state_and_errors(w, source.id)
    assert seen["activate"] == {}
    assert state.db == {"ok": True}
    assert [e["code"] for e in errors] == ["DB_TOO_LARGE"]


def test_an_oversized_db_from_before_may_still_shrink() -> None:
    """A db stored before the bound (or under a higher one) is not stuck: deleting keys goes through."""
    w = world(db_max_bytes=LIMIT)
    w.runner.script = lambda instance, event: RunResult(db_writes=event)
    ada = principal(w)
    source = deploy(w, ada)
    with w.store.uow() as uow:
        version = uow.state.get(source.id).version
        uow.state.save(source.id, SourceState(db={"a": "x" * 3000, "b": "y" * 3000}), version)
        uow.commit()
    to_end(w.services.runs.run_batch([run_task(source.id, {"a": None}, "t1")]))
    state, errors = state_and_errors(w, source.id)
    assert state.db == {"b": "y" * 3000} and errors == []
    to_end(w.services.runs.run_batch([run_task(source.id, {"c": "z" * 10}, "t2")]))
    state, errors = state_and_errors(w, source.id)
    assert "c" not in state.db and [e["code"] for e in errors] == ["DB_TOO_LARGE"]
