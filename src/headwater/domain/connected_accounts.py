"""Connected accounts (`apn_`): one app's credentials, owned by a user or an org, which app props
reference as `{"authProvisionId": "apn_..."}` and runs read as `this.<app>.$auth`.

A `ConnectedAccount` carries its credentials as stored: sealed by the Secrets port into
`{"$secret": <token>}`, as secret props are (services.connected_accounts seals and opens them);
`fields` names them, so answers can say what an account holds without any value. Every change
after creation is a conditional write on `version`: an OAuth refresh and a user's update cannot
overwrite each other unseen.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from headwater.domain import ids

Kind = Literal["keys", "oauth"]
Status = Literal["active", "needs_reconnect"]

KEYS: Kind = "keys"
OAUTH: Kind = "oauth"
ACTIVE: Status = "active"
NEEDS_RECONNECT: Status = "needs_reconnect"

# `$auth` keys of an OAuth account (issue 22; the original service's names)
OAUTH_ACCESS_TOKEN = "oauth_access_token"
OAUTH_REFRESH_TOKEN = "oauth_refresh_token"
OAUTH_UID = "oauth_uid"

REFERENCE = "authProvisionId"
SEALED = "$secret"

# error codes of a run, hook or call whose account cannot give credentials
ACCOUNT_NOT_FOUND = "ACCOUNT_NOT_FOUND"
ACCOUNT_NEEDS_RECONNECT = "ACCOUNT_NEEDS_RECONNECT"

MAX_NAME_CHARS = 200
MAX_FIELDS = 50
MAX_FIELD_NAME_CHARS = 100
MAX_CREDENTIALS_BYTES = 16 * 1024
_APP_SLUG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")  # registry apps: `_46elks`, `__1msg`
_FIELD_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.-]*")


@dataclass(frozen=True)
class ConnectedAccount:
    id: str
    owner: str  # the namespace that owns it: a user id or an org id, as for sources
    app: str  # the app's name slug (an app prop's `app`)
    name: str
    kind: Kind
    credentials: dict[str, Any]  # sealed: {"$secret": <token of the `$auth` object>}
    fields: tuple[str, ...]  # the names of the `$auth` fields, sorted
    expires_at: int | None  # when an OAuth access token expires (Unix s); None: it does not
    status: Status
    version: int  # the stored version: the next save is conditional on it
    created_at: int
    updated_at: int
    created_by: str = ""  # the user who made it
    extra: dict[str, Any] = field(default_factory=dict)  # nothing secret: what OAuth adds (scopes...)

    def to_json(self) -> dict[str, Any]:
        """The stored body (the stores keep `version` beside it)."""
        return {"id": self.id, "owner": self.owner, "app": self.app, "name": self.name, "kind": self.kind,
                "credentials": self.credentials, "fields": list(self.fields), "expires_at": self.expires_at,
                "status": self.status, "created_at": self.created_at, "updated_at": self.updated_at,
                "created_by": self.created_by, "extra": self.extra}

    @classmethod
    def from_json(cls, data: dict[str, Any], version: int) -> ConnectedAccount:
        return cls(id=data["id"], owner=data["owner"], app=data["app"], name=data["name"], kind=data["kind"],
                   credentials=data["credentials"], fields=tuple(data.get("fields") or ()),
                   expires_at=data.get("expires_at"), status=data.get("status") or ACTIVE, version=version,
                   created_at=data["created_at"], updated_at=data["updated_at"],
                   created_by=data.get("created_by") or "", extra=dict(data.get("extra") or {}))

    def to_api(self) -> dict[str, Any]:
        """What an answer says of an account: never a credential's value (DECISIONS, Accounts)."""
        return {"id": self.id, "app": self.app, "name": self.name, "kind": self.kind, "status": self.status,
                "fields": list(self.fields), "expires_at": self.expires_at, "owner_id": self.owner,
                "created_at": self.created_at, "updated_at": self.updated_at}


@dataclass(frozen=True)
class AccountUse:
    """Who would receive an account's credentials: code that runs in `namespace` (a source's or
    workflow's, or the one a caller acts in), through a reference `configured_by` put there (None:
    nobody answers for it, such as a value an expression gave at run time)."""

    namespace: str
    configured_by: str | None


@dataclass(frozen=True)
class AccountUses:
    """The uses of every reference among one call's props. `granted`: prop -> (account id, user)
    for the references a user configured and was checked for (a source's stored grants); any
    other reference is `default_by`'s (the caller's own, for what a caller gives in a request; None
    for references nobody configured). A grant counts only for the account it was given for."""

    namespace: str
    default_by: str | None = None
    granted: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def of(self, prop: str, account_id: str) -> AccountUse:
        grant = self.granted.get(prop)
        by = grant[1] if grant is not None and grant[0] == account_id else self.default_by
        return AccountUse(self.namespace, by)


def grants_of(stored: Mapping[str, Mapping[str, str]]) -> dict[str, tuple[str, str]]:
    """A source's stored `account_grants` as AccountUses takes them (malformed entries count for nothing)."""
    return {prop: (g["account"], g["by"]) for prop, g in stored.items()
            if isinstance(g, Mapping) and isinstance(g.get("account"), str) and isinstance(g.get("by"), str)}


def may_use(account: ConnectedAccount, use: AccountUse, owner_orgs: frozenset[str]) -> bool:
    """DECISIONS (Accounts): an org's account by what runs in that org; a personal account by what
    runs in its owner's namespace, or in one of the owner's orgs through a reference the owner
    configured. `owner_orgs`: the orgs the account's owner belongs to (read only for that case)."""
    if account.owner == use.namespace:
        return True
    return (ids.has_prefix(account.owner, "user") and use.configured_by == account.owner
            and use.namespace in owner_orgs)


def needs_owner_orgs(account: ConnectedAccount, use: AccountUse) -> bool:
    """Whether `may_use` needs the owner's orgs: a personal account its owner configured elsewhere."""
    return (account.owner != use.namespace and ids.has_prefix(account.owner, "user")
            and use.configured_by == account.owner)


def unusable_here(account: ConnectedAccount) -> str:
    """Why an account the caller can see may not be used where it was given (its owner is the
    caller or one of the caller's orgs, so naming it reveals nothing)."""
    if ids.has_prefix(account.owner, "org"):
        return f"{account.id} is an account of {account.owner}: only what runs in {account.owner} may use it"
    return f"{account.id} is a personal account: only its owner's sources and workflows, and what its owner " \
           "configures in an org of theirs, may use it"


def reference(value: Any) -> str | None:
    """The account id of an app prop's `{"authProvisionId": "apn_..."}`, else None."""
    if isinstance(value, dict) and set(value) == {REFERENCE} and isinstance(value[REFERENCE], str):
        return value[REFERENCE]
    return None


def is_account_id(value: str) -> bool:
    return ids.has_prefix(value, "connected_account") and len(value) <= 100


def app_problem(app: Any) -> str | None:
    if not isinstance(app, str) or not _APP_SLUG.fullmatch(app):
        return "must be an app's name slug (letters, digits, `_`, `-`, `.`; at most 100)"
    return None


def name_problem(name: Any) -> str | None:
    if not isinstance(name, str) or not name.strip():
        return "must be a non-empty string"
    if len(name) > MAX_NAME_CHARS:
        return f"must be at most {MAX_NAME_CHARS} characters"
    return None


def credentials_problems(credentials: Any, patch: bool = False) -> list[str]:
    """Problems of a credentials object; none quotes a value (they are secrets). In a `patch`,
    null removes a field."""
    if not isinstance(credentials, dict):
        return ["must be an object of the app's credential fields"]
    problems = []
    if len(credentials) > MAX_FIELDS:
        problems.append(f"has more than {MAX_FIELDS} fields")
    for name, value in credentials.items():
        if len(name) > MAX_FIELD_NAME_CHARS or not _FIELD_NAME.fullmatch(name):
            problems.append(f"field names must be identifiers of at most {MAX_FIELD_NAME_CHARS} characters")
            break
        if value is None and patch:
            continue
        if not isinstance(value, str | int | float | bool):
            problems.append(f"field {name!r} must be a string, a number or a boolean")
    if not problems and len(json.dumps(credentials)) > MAX_CREDENTIALS_BYTES:
        problems.append(f"are over {MAX_CREDENTIALS_BYTES // 1024} KB")
    return problems


def merged(credentials: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7396) of flat credentials: a field given replaces, null removes."""
    out = dict(credentials)
    for name, value in patch.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def field_names(credentials: dict[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(credentials))
