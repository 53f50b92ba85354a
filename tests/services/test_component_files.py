"""`component_file`: kept with the component a code deploy saves, handed to the runner with each
run (its stacks name the file), refused when it is not a base name or comes without code."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.domain.errors import BadRequest, Invalid
from headwater.domain.runs import RunResult
from headwater.ports import Instance
from headwater.services.sources import SourceRequest
from tests.fakes import to_end, world
from tests.services.test_services import HTTP, component_code, principal, run_task


def test_the_file_name_is_kept_and_travels_with_each_run_and_a_redeploy_can_change_it() -> None:
    w = world()
    seen: list[Instance] = []

    def script(instance: Instance, event: Any) -> RunResult:
        seen.append(instance)
        return RunResult()

    w.runner.script = script
    ada = principal(w)
    code = component_code(configurable_props=HTTP)
    source = to_end(w.services.sources.create(ada, SourceRequest(component_code=code, component_file="orders.mjs"),
                                              None))
    assert w.services.components.get(ada, source.component_id).to_api()["component_file"] == "orders.mjs"
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "1")]))
    to_end(w.services.sources.update(ada, source.id, SourceRequest(component_code=code, component_file="hook.ts")))
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "2")]))
    assert [i.file_name for i in seen] == ["orders.mjs", "hook.ts"]


@pytest.mark.parametrize(("fields", "error"), [
    ({"component_code": component_code(), "component_file": "../orders.mjs"}, Invalid),
    ({"component_code": component_code(), "component_file": "orders.py"}, Invalid),
    ({"component_id": "sc_x", "component_file": "orders.mjs"}, BadRequest),
    ({"component_file": "orders.mjs"}, BadRequest),
])
def test_a_file_name_that_is_not_one_or_comes_without_code_is_refused(fields: dict[str, Any],
                                                                       error: type[Exception]) -> None:
    w = world()
    with pytest.raises(error) as raised:
        to_end(w.services.sources.create(principal(w), SourceRequest(**fields), None))
    assert "component_file" in (raised.value.details or {}), raised.value  # type: ignore[attr-defined]
