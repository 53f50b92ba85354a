"""Validating configured prop values against a component's configurable_props (SPEC Prop settings).

Returns every problem at once, per prop, so a 422 can say all that is wrong in one answer. A
problem never quotes the value of a prop that is secret, an app's credentials, or a value that was
stored as a secret (the code being deployed may no longer mark it so): a 422 would hand it back.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from headwater.domain.connected_accounts import REFERENCE, reference
from headwater.domain.timers import Timer, TimerError
from headwater.domain.workflows import expression_of

MAX_VALUE_BYTES = 64 * 1024
SERVICE_TYPES = {"$.service.db", "$.interface.http", "$.interface.apphook", "alert"}
SCALARS = {"string": str, "object": dict}


@dataclass
class ValidatedProps:
    values: dict[str, Any] = field(default_factory=dict)
    timers: dict[str, Timer] = field(default_factory=dict)
    http_props: list[str] = field(default_factory=list)
    db_props: list[str] = field(default_factory=list)
    secret_props: list[str] = field(default_factory=list)
    app_props: list[str] = field(default_factory=list)
    account_props: list[str] = field(default_factory=list)  # app props naming a connected account
    errors: dict[str, list[str]] = field(default_factory=dict)

    def fail(self, name: str, problem: str) -> None:
        self.errors.setdefault(name, []).append(problem)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_problem(base: str, value: Any) -> str | None:
    if base in ("integer", "boolean", "object", "http_request") and expression_of(value) is not None:
        # Only workflow steps evaluate `{{ }}`; anywhere else it is text where a value belongs.
        return f"must be {'an' if base[0] in 'aeiou' else 'a'} {base}, not an unresolved {{{{ }}}} expression"
    if base == "string":
        return None if isinstance(value, str) else "must be a string"
    if base == "integer":
        return None if _is_int(value) else "must be an integer"
    if base == "boolean":
        return None if isinstance(value, bool) else "must be true or false"
    if base in ("object", "http_request"):
        return None if isinstance(value, dict) else "must be an object"
    return None


def _option_values(options: Any) -> list[Any] | None:
    if not isinstance(options, list):
        return None
    return [o.get("value") if isinstance(o, dict) else o for o in options]


def _check_value(prop: dict[str, Any], value: Any, out: ValidatedProps, unquoted: str | None = None,
                 options: bool = True) -> None:
    """`unquoted`: how to name a value that must not be quoted (a secret), None to quote it;
    `options`: whether the value must be one of the prop's options."""
    name, ptype = prop["name"], prop["type"]
    is_array = ptype.endswith("[]")
    base = ptype[:-2] if is_array else ptype
    items = value if is_array else [value]
    if is_array and not isinstance(value, list):
        out.fail(name, f"must be an array of {base} values")
        return
    allowed = _option_values(prop.get("options")) if options else None
    for item in items:
        problem = _type_problem(base, item)
        if problem:
            out.fail(name, problem if not is_array else f"every item {problem.removeprefix('must be ')}")
            return
        if base == "integer":
            if "min" in prop and _is_int(prop["min"]) and item < prop["min"]:
                out.fail(name, f"must be at least {prop['min']}")
            if "max" in prop and _is_int(prop["max"]) and item > prop["max"]:
                out.fail(name, f"must be at most {prop['max']}")
        if allowed is not None and item not in allowed:
            shown = unquoted or json.dumps(item)
            out.fail(name, f"{shown} is not one of the options {json.dumps(allowed)}")
            return


def validate(configurable_props: list[dict[str, Any]], configured: dict[str, Any],
             stored_secrets: Collection[str] = (), carried: Collection[str] = ()) -> ValidatedProps:
    """`stored_secrets`: props whose stored value is a secret (encrypted); `carried`: those of them
    whose value in `configured` is the stored one (the caller sent none, or the mask)."""
    out = ValidatedProps()
    known = {p["name"] for p in configurable_props}
    for name in configured:
        if name not in known:
            out.fail(name, "is not a prop of this component")
    for prop in configurable_props:
        name, ptype = prop["name"], prop["type"]
        given = name in configured and configured[name] is not None
        value = configured.get(name)
        if ptype == "$.service.db":
            out.db_props.append(name)
            continue
        if ptype == "$.interface.http":
            out.http_props.append(name)
            continue
        if ptype in SERVICE_TYPES:
            continue
        if given and len(json.dumps(value)) > MAX_VALUE_BYTES:
            out.fail(name, f"is over {MAX_VALUE_BYTES // 1024} KB")
            continue
        if ptype == "$.interface.timer":
            source = value if given else prop.get("default")
            if source is None:
                out.fail(name, "is required: give {\"intervalSeconds\": N} or {\"cron\": \"...\"}")
                continue
            try:
                timer = Timer.parse(source)
            except TimerError as e:
                out.fail(name, "the stored value is not a valid timer" if name in stored_secrets else str(e))
                continue
            out.timers[name] = timer
            out.values[name] = timer.stored()
            continue
        if ptype == "app":
            out.app_props.append(name)
            if not given:
                if prop.get("auth_type") == "none":  # the app defines no auth: nothing to connect
                    out.values[name] = {"$auth": {}}
                elif not prop.get("optional"):
                    out.fail(name, "is required: connect an account and give {\"authProvisionId\": \"apn_...\"}, "
                                   "or the credentials as {\"$auth\": {...}}")
                continue
            account_id = reference(value)
            if account_id is not None:  # a connected account: the service checks who may use it
                out.values[name] = {REFERENCE: account_id}
                out.account_props.append(name)
                continue
            if isinstance(value, dict) and REFERENCE in value:
                out.fail(name, "`authProvisionId` must be a connected account's id (\"apn_...\"), alone in the object")
                continue
            if not isinstance(value, dict) or not isinstance(value.get("$auth"), dict):
                out.fail(name, "must be an object {\"authProvisionId\": \"apn_...\"} naming a connected account, "
                               "or {\"$auth\": {...}} with the account's credentials")
                continue
            out.values[name] = {"$auth": value["$auth"]}
            continue
        if not given:
            if "default" in prop:
                value = prop["default"]
            elif prop.get("optional"):
                continue
            else:
                out.fail(name, "is required")
                continue
        quiet = bool(prop.get("secret")) or name in stored_secrets
        # the component's own default need not be among its options: registry components give an
        # optional prop `default: ""` (no filter) over a list of options that has no ""
        _check_value(prop, value, out, ("the stored value" if name in carried else "the value") if quiet else None,
                     options=given)
        if name not in out.errors:
            out.values[name] = value
            if prop.get("secret"):
                out.secret_props.append(name)
    return out


def step_problems(configurable_props: list[dict[str, Any]], values: dict[str, Any],
                  undefined: Collection[str] = ()) -> dict[str, list[str]]:
    """A workflow step's prop values checked against the types its action declares. Only values
    given are checked (a step may leave a prop to the action's own default); expressions still to
    be evaluated count as not given. `undefined`: props whose expression gave undefined, a fault
    when the action requires them."""
    out = ValidatedProps()
    for prop in configurable_props:
        name, value = prop["name"], values.get(prop["name"])
        if prop["type"] in SERVICE_TYPES or prop["type"] in ("app", "$.interface.timer"):
            continue
        if name in undefined and not prop.get("optional") and "default" not in prop:
            out.fail(name, "is required, but its {{ }} expression gave undefined")
        elif value is not None and expression_of(value) is None:
            _check_value(prop, value, out, "the value" if prop.get("secret") else None)
    return out.errors
