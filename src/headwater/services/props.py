"""Configured props in their three forms: stored (secrets encrypted), for the runner (plain), for
the API (DECISIONS response form: http endpoint_url, timer cron/interval_seconds, secrets masked)."""

from __future__ import annotations

from typing import Any

from headwater.domain.models import Source
from headwater.domain.props import ValidatedProps
from headwater.domain.timers import Timer
from headwater.ports import Secrets

MASK = "********"
SECRET = "$secret"


def to_stored(validated: ValidatedProps, secrets: Secrets, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Encrypts secret and app values; a secret given back as the mask keeps its stored value."""
    previous = previous or {}
    stored: dict[str, Any] = {}
    for name, value in validated.values.items():
        if name in validated.secret_props:
            keep = value == MASK and isinstance(previous.get(name), dict) and SECRET in previous[name]
            stored[name] = previous[name] if keep else {SECRET: secrets.encrypt(value)}
        elif name in validated.app_props:
            stored[name] = {"$auth": {SECRET: secrets.encrypt(value["$auth"])}}
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
