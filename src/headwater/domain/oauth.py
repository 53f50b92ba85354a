"""OAuth 2.0 for connected accounts (issue 22, part B): an app's OAuth client, a connect in
progress, the tokens a grant gives, and when an account's access token needs refreshing.

An `OAuthClient` is set per app by the operator (owner `OPERATOR`, for everybody) or by a user or
org for itself (theirs wins); its secret is sealed by the Secrets port as secret props are. A
`PendingConnect` is what the authorize redirect comes back to: keyed by its random `state`, bound
to the user who started it, holding the PKCE verifier (sealed), taken once, expiring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from headwater.domain.urls import check_http_url

OPERATOR = "*"  # the owner of the operator's clients, which serve every user
CONNECT_TTL_S = 600  # how long an authorize redirect may take to come back
REFRESH_MARGIN_S = 60  # a token that expires within this is refreshed before it is used
# A run whose account another caller is refreshing is given back to its queue (holding no worker)
# for this long in all, at most: longer than a refresh lasts (services.oauth.LEASE_S); then it fails.
REFRESH_WAIT_S = 90.0
MAX_SCOPES = 50
MAX_EXTRA_PARAMS = 20
# The authorize URL's parameters Headwater sets (issue 31): a client's configuration may not, in its
# `authorize_url` or its `extra_params`, and the URL builder drops any a stored one still has, so a
# provider that reads the first value of a parameter reads Headwater's. `scope` comes from `scopes`.
HEADWATER_PARAMS = frozenset({"response_type", "client_id", "redirect_uri", "state", "code_challenge",
                              "code_challenge_method"})
_RESERVED_PARAMS = HEADWATER_PARAMS | {"scope"}


def param_name(raw: str) -> str:
    """A query parameter's name as a lenient server may read it: percent-decoded, padding and case
    ignored."""
    return unquote_plus(raw).strip().lower()


def _segment_names(segment: str) -> list[str]:
    """The names in one `&`-separated query segment, split at `;` too (some servers do)."""
    return [param_name(part.partition("=")[0]) for part in segment.split(";")]


def reserved_in_query(query: str, reserved: frozenset[str] = _RESERVED_PARAMS) -> list[str]:
    """The reserved parameters a URL's query sets, sorted."""
    return sorted({n for segment in query.split("&") for n in _segment_names(segment)} & reserved)


def without_params(query: str, names: frozenset[str]) -> str:
    """The query without any segment that sets one of `names`; the others kept as written."""
    return "&".join(s for s in query.split("&") if s and not set(_segment_names(s)) & names)


@dataclass(frozen=True)
class OAuthClient:
    owner: str  # a user or org id, or OPERATOR
    app: str
    client_id: str
    client_secret: dict[str, Any]  # sealed {"$secret": token}; {} for a public client (PKCE alone)
    authorize_url: str
    token_url: str
    scopes: tuple[str, ...] = ()
    extra_params: dict[str, str] = field(default_factory=dict)
    updated_at: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"owner": self.owner, "app": self.app, "client_id": self.client_id,
                "client_secret": self.client_secret, "authorize_url": self.authorize_url,
                "token_url": self.token_url, "scopes": list(self.scopes), "extra_params": self.extra_params,
                "updated_at": self.updated_at}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OAuthClient:
        return cls(owner=data["owner"], app=data["app"], client_id=data["client_id"],
                   client_secret=dict(data.get("client_secret") or {}), authorize_url=data["authorize_url"],
                   token_url=data["token_url"], scopes=tuple(data.get("scopes") or ()),
                   extra_params=dict(data.get("extra_params") or {}), updated_at=data.get("updated_at") or 0)

    def to_api(self) -> dict[str, Any]:
        """Never the secret: only whether there is one."""
        return {"app": self.app, "owner_id": None if self.owner == OPERATOR else self.owner,
                "client_id": self.client_id, "has_client_secret": bool(self.client_secret),
                "authorize_url": self.authorize_url, "token_url": self.token_url, "scopes": list(self.scopes),
                "extra_params": self.extra_params, "updated_at": self.updated_at}


def client_problems(body: dict[str, Any]) -> dict[str, list[str]]:
    """What is wrong with an OAuth client's settings (the secret is never quoted)."""
    problems: dict[str, list[str]] = {}

    def fail(name: str, problem: str) -> None:
        problems.setdefault(name, []).append(problem)

    if not isinstance(body.get("client_id"), str) or not body["client_id"].strip() or len(body["client_id"]) > 500:
        fail("client_id", "is required: a string of at most 500 characters")
    secret = body.get("client_secret")
    if secret is not None and (not isinstance(secret, str) or not secret or len(secret) > 2000):
        fail("client_secret", "must be a non-empty string of at most 2000 characters, or null for a public client")
    for name in ("authorize_url", "token_url"):
        url = body.get(name)
        problem = check_http_url(url) if isinstance(url, str) else "is required: an http(s) URL"
        if problem:
            fail(name, problem)
    authorize = body.get("authorize_url")
    if isinstance(authorize, str) and "authorize_url" not in problems:
        parts = urlsplit(authorize)
        if taken := reserved_in_query(parts.query):
            fail("authorize_url", f"its query cannot set {', '.join(taken)} (Headwater sets them; scopes go in "
                                  "`scopes`)")
        if parts.fragment or authorize.endswith("#"):
            fail("authorize_url", "cannot have a fragment (`#...`): Headwater's parameters go in the query")
    scopes = body.get("scopes", [])
    if (not isinstance(scopes, list) or len(scopes) > MAX_SCOPES
            or not all(isinstance(s, str) and s and " " not in s for s in scopes)):
        fail("scopes", f"must be a list of at most {MAX_SCOPES} scope names without spaces")
    extra = body.get("extra_params", {})
    if not isinstance(extra, dict) or len(extra) > MAX_EXTRA_PARAMS or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
        fail("extra_params", f"must be an object of at most {MAX_EXTRA_PARAMS} string parameters")
    elif taken := sorted(k for k in extra if param_name(k) in _RESERVED_PARAMS):
        fail("extra_params", f"cannot set {', '.join(taken)} (Headwater sets them)")
    return problems


@dataclass(frozen=True)
class PendingConnect:
    state: str  # the random `state` parameter, the record's key
    owner: str  # the namespace the account will belong to
    user_id: str  # who started it: only their redirect completes it
    app: str
    account_id: str | None  # the account a reconnect renews; None: a new account
    verifier: dict[str, Any]  # sealed PKCE code verifier
    redirect_uri: str
    expires_at: int
    name: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "owner": self.owner, "user_id": self.user_id, "app": self.app,
                "account_id": self.account_id, "verifier": self.verifier, "redirect_uri": self.redirect_uri,
                "expires_at": self.expires_at, "name": self.name}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PendingConnect:
        return cls(state=data["state"], owner=data["owner"], user_id=data["user_id"], app=data["app"],
                   account_id=data.get("account_id"), verifier=data["verifier"], redirect_uri=data["redirect_uri"],
                   expires_at=data["expires_at"], name=data.get("name") or "")


@dataclass(frozen=True)
class TokenSet:
    """What a token endpoint answered, kept as the account's `$auth` and expiry."""

    access_token: str
    refresh_token: str | None
    expires_at: int | None
    scope: str | None = None
    uid: str | None = None

    def credentials(self, previous_refresh_token: str | None = None) -> dict[str, Any]:
        """The `$auth` object: a refresh answer without a refresh token keeps the previous one."""
        out: dict[str, Any] = {"oauth_access_token": self.access_token}
        refresh = self.refresh_token or previous_refresh_token
        if refresh:
            out["oauth_refresh_token"] = refresh
        if self.uid:
            out["oauth_uid"] = self.uid
        return out


def needs_refresh(expires_at: int | None, now_s: float, margin_s: float = REFRESH_MARGIN_S) -> bool:
    return expires_at is not None and expires_at - margin_s <= now_s


def refresh_margin(configured_s: float, lifetime_s: float | None) -> float:
    """How long before expiry a token is refreshed: the configured margin, but at most half of a
    short-lived token's lifetime (a token that lives 2 s would otherwise never be used)."""
    return configured_s if lifetime_s is None else min(configured_s, lifetime_s / 2)
