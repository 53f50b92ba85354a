"""Configured props in their three forms: stored (secrets encrypted), for the runner (plain), for
the API (DECISIONS response form: http endpoint_url, timer cron/interval_seconds, secrets masked).

A value stored as a secret stays a secret until the caller sends a new value for it, whatever the
code deployed later declares: new code that drops `secret: true` (or turns an app prop into a plain
one) must not turn the stored value into plaintext in the store and in every answer.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from headwater.domain.models import Source
from headwater.domain.props import ValidatedProps
from headwater.domain.timers import Timer
from headwater.ports import Secrets

MASK = "********"
SECRET = "$secret"


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and (
        SECRET in value or (isinstance(value.get("$auth"), dict) and SECRET in value["$auth"]))


def stored_secrets(stored: dict[str, Any]) -> set[str]:
    """The props whose stored value is encrypted (a secret prop's, or an app's credentials)."""
    return {name for name, value in stored.items() if _is_secret(value)}


def carried_secrets(given: dict[str, Any] | None, stored: dict[str, Any]) -> set[str]:
    """The stored secrets an update keeps as they are: all of them when it sends no props, else
    those it sends back masked (a new value is the caller's to declare as it likes)."""
    secret = stored_secrets(stored)
    if given is None:
        return secret
    return {name for name in secret if given.get(name) == MASK
            or (isinstance(given.get(name), dict) and given[name].get("$auth") == MASK)}


def to_stored(validated: ValidatedProps, secrets: Secrets, previous: dict[str, Any] | None = None,
              carried: Collection[str] = ()) -> dict[str, Any]:
    """Encrypts secret and app values; a secret given back as the mask keeps its stored value, and
    a `carried` one stays encrypted even when the prop is no longer declared secret."""
    previous = previous or {}
    stored: dict[str, Any] = {}
    for name, value in validated.values.items():
        if name in validated.secret_props:
            keep = value == MASK and isinstance(previous.get(name), dict) and SECRET in previous[name]
            stored[name] = previous[name] if keep else {SECRET: secrets.encrypt(value)}
        elif name in validated.account_props:  # the account's id: its credentials are sealed in the account
            stored[name] = value
        elif name in validated.app_props:
            stored[name] = {"$auth": {SECRET: secrets.encrypt(value["$auth"])}}
        elif name in carried and name not in validated.timers:  # a timer is read as stored (schedules)
            stored[name] = {SECRET: secrets.encrypt(value)}
        else:
            stored[name] = value
    return stored


def unmask(configured: dict[str, Any], previous: dict[str, Any], secrets: Secrets) -> dict[str, Any]:
    """Before validation: a masked secret sent back on update means 'keep the stored one'."""
    out = dict(configured)
    for name, value in configured.items():
        old = previous.get(name)
        if value == MASK and isinstance(old, dict) and SECRET in old:
            out[name] = secrets.decrypt(old[SECRET])
        elif (isinstance(value, dict) and value.get("$auth") == MASK and isinstance(old, dict)
              and isinstance(old.get("$auth"), dict) and SECRET in old["$auth"]):
            out[name] = {"$auth": secrets.decrypt(old["$auth"][SECRET])}
    return out


def for_runner(stored: dict[str, Any], secrets: Secrets) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for name, value in stored.items():
        if isinstance(value, dict) and SECRET in value:
            plain[name] = secrets.decrypt(value[SECRET])
        elif isinstance(value, dict) and isinstance(value.get("$auth"), dict) and SECRET in value["$auth"]:
            plain[name] = {"$auth": secrets.decrypt(value["$auth"][SECRET])}
        else:
            plain[name] = value
    return plain


def for_api(source: Source, endpoint_base: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for prop in source.prop_defs:
        name, ptype = prop["name"], prop["type"]
        if ptype == "$.interface.http" and source.endpoint_id:
            out[name] = {"endpoint_url": f"{endpoint_base}/http/{source.endpoint_id}"}
        elif ptype == "$.interface.timer" and name in source.configured_props:
            out[name] = Timer.parse(source.configured_props[name]).response()
        elif name in source.configured_props:
            value = source.configured_props[name]
            if isinstance(value, dict) and SECRET in value:
                out[name] = MASK
            elif isinstance(value, dict) and isinstance(value.get("$auth"), dict) and SECRET in value["$auth"]:
                out[name] = {"$auth": MASK}
            else:
                out[name] = value
    return out
