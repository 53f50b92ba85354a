"""A run without deploying (services/trials.py) on the fakes: what it answers, that nothing but its
usage is kept, and that it is admitted, validated and sandboxed (the account's runner) like any run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from headwater.domain.errors import Invalid, QuotaExceeded
from headwater.domain.runs import RunResult
from headwater.ports import Instance, RunnerError
from headwater.services.clock import utc_day
from headwater.services.trials import EMPTY_REQUEST, TrialRequest
from tests.fakes import emits, world
from tests.services.test_services import HTTP, TIMER, component_code, principal


def test_a_run_answers_what_it_did_and_keeps_only_its_usage() -> None:
    w = world()
    ada = principal(w)
    seen: list[Instance] = []

    def script(instance: Instance, event: Any) -> RunResult:
        seen.append(instance)
        return RunResult(emits=emits((event, {"summary": "one"})), db_writes={"n": event["n"]},
                         logs=[{"level": "log", "message": "hi", "ts": 1}], duration_ms=2.5)

    w.runner.script = script
    code = component_code(configurable_props=[{"name": "db", "type": "$.service.db"},
                                              {"name": "greeting", "type": "string"}])
    data = asyncio.run(w.services.trials.run(ada, TrialRequest(code, {"n": 2}, {"greeting": "hey"}, {"old": 1}), None))
    assert data["emits"] == [{"event": {"n": 2}, "metadata": {"summary": "one"}}]
    assert (data["db_writes"], data["db"], data["logs"][0]["message"]) == ({"n": 2}, {"old": 1, "n": 2}, "hi")
    assert data["error"] is None and data["type"] == "source" and "return_value" not in data
    [instance] = seen
    assert (instance.account, instance.bill_to, instance.props, instance.db) == (ada.user.id, ada.user.id,
                                                                                 {"greeting": "hey"}, {"old": 1})
    assert ("describe", ada.user.id) in w.runner.accounts  # the code loads in the caller's own runner
    stored = w.store.data
    assert not (stored.components or stored.sources or stored.events or stored.states)
    assert w.usage.totals(ada.user.id, utc_day(), utc_day()) == (1, 3)


def test_an_action_gets_the_event_as_its_trigger_and_answers_its_return_value() -> None:
    w = world()
    w.runner.script = lambda instance, steps: RunResult(return_value=steps["trigger"]["event"], exports={"a": 1})
    data = asyncio.run(w.services.trials.run(principal(w), TrialRequest(component_code(type="action"), {"x": 1}), None))
    assert (data["type"], data["return_value"], data["exports"]) == ("action", {"x": 1}, {"a": 1})
    assert w.runner.calls[-1][0] == "step"


def test_without_an_event_a_timer_gets_its_tick_and_an_http_source_an_empty_request() -> None:
    w = world()
    got: list[Any] = []
    w.runner.script = lambda instance, event: got.append((instance.http, event)) or RunResult()
    ada = principal(w)
    asyncio.run(w.services.trials.run(ada, TrialRequest(component_code(configurable_props=TIMER),
                                            configured_props={"timer": {"intervalSeconds": 60}}), None))
    asyncio.run(w.services.trials.run(ada, TrialRequest(component_code(configurable_props=HTTP)), None))
    asyncio.run(w.services.trials.run(ada, TrialRequest(component_code()), None))
    (_, tick), (http, request), (_, plain) = got
    assert tick["interval_seconds"] == 60 and isinstance(tick["timestamp"], int)
    assert request == EMPTY_REQUEST and http["endpoint"].endswith("/http/not-deployed")
    assert plain == {}


def test_props_are_validated_like_a_deploys_and_nothing_runs_when_they_do_not_fit() -> None:
    w = world()
    code = component_code(configurable_props=[{"name": "n", "type": "integer"}])
    with pytest.raises(Invalid) as bad:
        asyncio.run(w.services.trials.run(principal(w), TrialRequest(code, configured_props={"n": "x", "colour": 1}),
                                          None))
    assert set(bad.value.details or {}) == {"n", "colour"}
    assert not [c for c in w.runner.calls if c[0] == "run"]


def test_a_free_user_past_the_daily_cap_is_refused_before_the_run() -> None:
    w = world(free_daily_invocations=1)
    bob = principal(w, tier="free")
    asyncio.run(w.services.trials.run(bob, TrialRequest(component_code()), None))
    with pytest.raises(QuotaExceeded):
        asyncio.run(w.services.trials.run(bob, TrialRequest(component_code()), None))
    assert len([c for c in w.runner.calls if c[0] == "run"]) == 1


def test_a_runner_failure_is_the_runs_error_and_still_counted() -> None:
    w = world()
    ada = principal(w)

    def crash(instance: Instance, event: Any) -> RunResult:
        raise RunnerError("TIMEOUT", "took too long")

    w.runner.script = crash
    data = asyncio.run(w.services.trials.run(ada, TrialRequest(component_code()), None))
    assert data["error"]["code"] == "TIMEOUT" and data["emits"] == []
    assert w.usage.totals(ada.user.id, utc_day(), utc_day())[0] == 1
