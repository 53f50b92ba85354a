"""Workflows (DECISIONS Workflows): a named list of action steps run in order on a trigger event.

The file format is YAML (`name`, optional `trigger`, `steps` of `name`, `component`, `props`).
A prop value that is exactly `{{ <expression> }}` is a JavaScript expression over `steps`,
evaluated at run time in the runner (never here). No I/O in this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from headwater.domain.errors import Invalid

_EXPRESSION = re.compile(r"^\s*\{\{(.+)\}\}\s*$", re.DOTALL)
_STEP_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
RESERVED_STEP_NAMES = {"trigger"}


@dataclass
class Step:
    name: str
    component: str  # as written: a path relative to the file, a registry key, or an sc_ id
    props: dict[str, Any] = field(default_factory=dict)
    component_id: str = ""  # the saved component it resolved to at deploy


@dataclass
class Workflow:
    id: str
    namespace: str
    user_id: str
    name: str
    deployment_id: str
    steps: list[Step]
    trigger: str | None = None
    created_at: int = 0
    updated_at: int = 0
    seq: int = 0

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "deployment_id": self.deployment_id, "trigger": self.trigger,
                "steps": [{"name": s.name, "component_id": s.component_id} for s in self.steps],
                "created_at": self.created_at, "updated_at": self.updated_at}


def parse_workflow(data: Any) -> tuple[str, str | None, list[Step]]:
    """(name, trigger, steps) of a parsed workflow file; Invalid naming each problem."""
    problems: dict[str, list[str]] = {}
    if not isinstance(data, dict):
        raise Invalid("A workflow file is a YAML mapping with `name` and `steps`.", {"file": ["not a mapping"]})
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        problems["name"] = ["required: a non-empty string"]
    trigger = data.get("trigger")
    if trigger is not None and (not isinstance(trigger, str) or not trigger.startswith(("dc_", "p_"))):
        problems["trigger"] = ["must be a source (dc_) or workflow (p_) id"]
    raw_steps = data.get("steps")
    steps: list[Step] = []
    if not isinstance(raw_steps, list) or not raw_steps:
        problems["steps"] = ["required: a non-empty list"]
    else:
        seen: set[str] = set()
        for i, raw in enumerate(raw_steps):
            where = f"steps[{i}]"
            if not isinstance(raw, dict):
                problems[where] = ["must be a mapping with name and component"]
                continue
            step_name, component, props = raw.get("name"), raw.get("component"), raw.get("props") or {}
            if not isinstance(step_name, str) or not _STEP_NAME.match(step_name) or step_name in RESERVED_STEP_NAMES:
                problems[f"{where}.name"] = ["must be an identifier other than `trigger`"]
            elif step_name in seen:
                problems[f"{where}.name"] = [f"{step_name!r} is used twice"]
            else:
                seen.add(step_name)
            if not isinstance(component, str) or not component.strip():
                problems[f"{where}.component"] = ["required: a path, a registry key or an sc_ id"]
            if not isinstance(props, dict):
                problems[f"{where}.props"] = ["must be a mapping"]
                props = {}
            steps.append(Step(str(step_name), str(component), props))
    if problems:
        raise Invalid("The workflow file is not valid.", problems)
    return str(name), trigger, steps


def expression_of(value: Any) -> str | None:
    """The JavaScript of a `{{ ... }}` prop value, else None."""
    if isinstance(value, str):
        match = _EXPRESSION.match(value)
        if match:
            return match.group(1).strip()
    return None


def evaluator_code(props: dict[str, Any]) -> str | None:
    """An action that returns the step's props with each `{{ }}` value evaluated over `steps`
    (run in the user's own sandbox like any of their code); None when no prop is an expression."""
    entries = {k: expression_of(v) for k, v in props.items()}
    if not any(entries.values()):
        return None
    import json
    lines = [f"    {json.dumps(k)}: ({expr})," for k, expr in entries.items() if expr]
    return ("export default { name: \"props\", version: \"1\", type: \"action\",\n"
            "  async run({ steps }) {\n    return {\n" + "\n".join(lines) + "\n    };\n  },\n};\n")


def evaluated_props(props: dict[str, Any], returned: Any) -> tuple[dict[str, Any], list[str]]:
    """The step's props with each expression replaced by its value, and the props whose expression
    gave `undefined` (absent from the evaluator's JSON): those are left out, never passed on as
    their `{{ }}` text."""
    values = returned if isinstance(returned, dict) else {}
    expressions = [k for k, v in props.items() if expression_of(v) is not None]
    out = {k: v for k, v in props.items() if k not in expressions}
    out.update({k: values[k] for k in expressions if k in values})
    return out, [k for k in expressions if k not in values]


def error_event(workflow: Workflow, trigger: Any, error: dict[str, Any], step: str | None, ms: int,
                platform_version: str) -> dict[str, Any]:
    """SPEC's workflow error event: original_event, original_context, error."""
    return {
        "original_event": trigger,
        "original_context": {
            "id": f"{ms}",
            "ts": ms,
            "workflow_id": workflow.id,
            "deployment_id": workflow.deployment_id,
            "source_type": "COMPONENT",
            "verified": False,
            "owner_id": workflow.user_id,
            "platform_version": platform_version,
        },
        "error": {
            "code": error.get("code") or "RUNTIME_ERROR",
            "cellId": step,
            "ts": ms,
            "stack": error.get("stack") or "",
            "message": error.get("message") or "",
        },
    }
