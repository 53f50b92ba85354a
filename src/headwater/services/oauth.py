"""OAuth 2.0 that keeps working (issue 22, part B): apps' OAuth clients, the connect flow
(authorization code with PKCE and `state`), and the refresh of an account's access token before
a run, hook, `options` or `additionalProps` call uses it.

A refresh happens once per account however many calls need it at the same moment, on one machine
or many: the caller that finds the token expiring takes the account's refresh lease (the lease
port, keyed by the account id), reads the account again (a caller that waited finds it refreshed
and uses the winner's tokens), refreshes, and saves conditionally on the version it read (a user's
update or a reconnect meanwhile wins; the refresh's tokens are then dropped). The lease matters
for providers that rotate refresh tokens: a refresh token used twice revokes the whole grant.

A source's run never waits for another caller's refresh (it would hold a task worker for a refresh
it does not own, as long as a slow token endpoint makes it last): it uses the current token while
that is valid, and otherwise raises RefreshUnderWay, for which the run gives its batch back to the
queue (runs.py). Other callers (hooks, `options`, workflow steps) wait for the lease, at most LEASE_S.

A refresh the provider refuses for good marks the account `needs_reconnect` and puts an
ACCOUNT_NEEDS_RECONNECT `$errors` event on every source using it; one that fails for now is
retried by the adapter, and then the call goes on with the current token while it is valid, or
fails with ACCOUNT_REFRESH_FAILED without marking the account. Connecting again heals it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import secrets as random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from headwater.domain import connected_accounts as model
from headwater.domain import ids
from headwater.domain.connected_accounts import ConnectedAccount
from headwater.domain.errors import BadRequest, Conflict, HeadwaterError, Invalid, NotFound
from headwater.domain.messages import AccountNeedsReconnect
from headwater.domain.models import Principal, Source
from headwater.domain.oauth import (
    CONNECT_TTL_S,
    OPERATOR,
    OAuthClient,
    PendingConnect,
    TokenSet,
    client_problems,
    needs_refresh,
    refresh_margin,
)
from headwater.domain.pagination import PageRequest
from headwater.ports import (
    Busy,
    OAuthClientPort,
    OAuthEndpoints,
    OAuthGrantError,
    OAuthUnavailable,
    Secrets,
    SourceLease,
    UnitOfWorkFactory,
)
from headwater.services.connected_accounts import AccountUnusable, RefreshUnderWay
from headwater.services.messagebus import MessageBus
from headwater.services.runs import Runs
from headwater.services.sealed_accounts import SealedAccounts
from headwater.services.tenant_slots import TenantSlots
from headwater.settings import Settings

ACCOUNT_REFRESH_FAILED = "ACCOUNT_REFRESH_FAILED"
CALLBACK_PATH = "/v1/oauth/callback"
LEASE_S = 90.0  # longer than the adapter's attempts (15 s each, three) and their pauses
# A tenant's (the connect owner's) code exchanges in flight at once; more wait up to EXCHANGE_WAIT_S.
EXCHANGES_PER_TENANT = 4
EXCHANGE_WAIT_S = 10.0
_STATE = re.compile(r"[A-Za-z0-9_-]{16,128}")  # what `start` makes (token_urlsafe), with room


class ProviderUnavailable(HeadwaterError):
    """The provider's token endpoint could not be used just now (a connect's code exchange)."""

    status = 503


@dataclass(frozen=True)
class Started:
    authorize_url: str
    state: str
    expires_at: int
    redirect_uri: str


class OAuthConnections:
    def __init__(self, uow: UnitOfWorkFactory, sealed: SealedAccounts, client: OAuthClientPort,
                 lease: SourceLease, secrets: Secrets, settings: Settings,
                 clock: Callable[[], float] = time.time,
                 messages: MessageBus | None = None) -> None:
        """`messages`: where an account that needs reconnecting is told (AccountNeedsReconnect)."""
        self.uow = uow
        self.sealed = sealed
        self.client = client
        self.lease = lease
        self.secrets = secrets
        self.settings = settings
        self.clock = clock
        self.exchanges = TenantSlots(EXCHANGES_PER_TENANT, EXCHANGE_WAIT_S, "OAuth connects")
        # Told of an account marked needs_reconnect and of the source whose run found it out, if any
        # (the composition root puts the `$errors` events; that run's failure is that source's).
        self.messages = messages or MessageBus()

    @property
    def redirect_uri(self) -> str:
        return self.settings.base_url.rstrip("/") + CALLBACK_PATH

    # apps' OAuth clients

    def set_client(self, owner: str, app: str, body: dict[str, Any]) -> OAuthClient:
        """`owner`: a user or org id, or OPERATOR. Replaces the owner's client for the app."""
        problems = client_problems(body) if isinstance(body, dict) else {"body": ["must be an object"]}
        if (problem := model.app_problem(app)) is not None:
            problems["app"] = [problem]
        if problems:
            raise Invalid(f"The OAuth client is not valid: {', '.join(problems)}.", problems)
        secret = body.get("client_secret")
        client = OAuthClient(owner=owner, app=app, client_id=body["client_id"].strip(),
                             client_secret={model.SEALED: self.secrets.encrypt(secret)} if secret else {},
                             authorize_url=body["authorize_url"], token_url=body["token_url"],
                             scopes=tuple(body.get("scopes") or ()), extra_params=dict(body.get("extra_params") or {}),
                             updated_at=int(self.clock()))
        with self.uow() as uow:
            uow.oauth_clients.put(client)
            uow.commit()
        return client

    def client_for(self, owner: str, app: str) -> OAuthClient | None:
        """The owner's own client for the app, else the operator's."""
        with self.uow(readonly=True) as uow:
            return uow.oauth_clients.get(owner, app) or uow.oauth_clients.get(OPERATOR, app)

    def clients(self, owner: str) -> list[OAuthClient]:
        """The clients the owner's connects use: its own, and the operator's for other apps."""
        with self.uow(readonly=True) as uow:
            own = uow.oauth_clients.list(owner)
            operator = [] if owner == OPERATOR else uow.oauth_clients.list(OPERATOR)
        apps = {c.app for c in own}
        return sorted(own + [c for c in operator if c.app not in apps], key=lambda c: c.app)

    def remove_client(self, owner: str, app: str) -> None:
        if model.app_problem(app) is not None:
            raise NotFound(f"No OAuth client for app {app[:100]}.")
        with self.uow(readonly=True) as uow:
            found = uow.oauth_clients.get(owner, app)
        if found is None:
            raise NotFound(f"No OAuth client of {'the operator' if owner == OPERATOR else 'yours'} for app {app}.")
        with self.uow() as uow:
            uow.oauth_clients.remove(owner, app)
            uow.commit()

    def _endpoints(self, client: OAuthClient) -> OAuthEndpoints:
        secret = self.secrets.decrypt(client.client_secret[model.SEALED]) if client.client_secret else None
        return OAuthEndpoints(client.client_id, secret, client.authorize_url, client.token_url, client.scopes,
                              client.extra_params)

    # the connect flow

    def start(self, principal: Principal, owner: str, app: Any, name: Any = None,
              account: ConnectedAccount | None = None) -> Started:
        """The authorize URL of a new connect (or of a reconnect of `account`), for the caller only:
        its `state` is random, single use, and expires in CONNECT_TTL_S."""
        if (problem := model.app_problem(app)) is not None:
            raise Invalid(f"The app is not valid: {problem}.", {"app": [problem]})
        if name is not None and (problem := model.name_problem(name)) is not None:
            raise Invalid(f"The name is not valid: {problem}.", {"name": [problem]})
        client = self.client_for(owner, app)
        if client is None:
            raise Invalid(f"App {app} has no OAuth client: the operator or you set one first "
                          f"(PUT /v1/oauth/clients/{app}).", {"app": ["has no OAuth client"]})
        state, verifier = random.token_urlsafe(32), random.token_urlsafe(64)
        expires_at = int(self.clock()) + CONNECT_TTL_S
        pending = PendingConnect(state=state, owner=owner, user_id=principal.user.id, app=app,
                                 account_id=account.id if account else None,
                                 verifier={model.SEALED: self.secrets.encrypt(verifier)},
                                 redirect_uri=self.redirect_uri, expires_at=expires_at,
                                 name=(name or "").strip())
        url = self.client.authorization_url(self._endpoints(client), self.redirect_uri, state, verifier)
        with self.uow() as uow:
            uow.pending_connects.add(pending)
            uow.commit()
        return Started(url, state, expires_at, self.redirect_uri)

    async def complete(self, state: str, code: str | None, error: str | None) -> ConnectedAccount:
        """The redirect back from the provider: the connect's state is taken (once), the code
        exchanged, and the account created, or renewed for a reconnect.

        A coroutine: the code exchange is awaited holding no thread, and the store's calls around
        it are made on worker threads, briefly. The exchange takes a turn of the connect's owner
        (TenantSlots: EXCHANGES_PER_TENANT at once), so a tenant's slow token endpoint delays only
        its own connects; a callback that gets no turn in time is refused (503, Retry-After)
        before its state is taken, and can be sent again."""
        unknown = BadRequest("This connect is unknown, was completed already or expired: start it again.")
        if not _STATE.fullmatch(state or ""):  # checked before any store read (DynamoDB's key bounds)
            raise unknown
        pending = await asyncio.to_thread(self._pending, state)
        if pending is None:
            raise unknown
        if error or not code:
            await asyncio.to_thread(self._take, state, unknown)
            raise BadRequest(f"The provider did not authorize the connect ({(error or 'no code')[:100]}).")
        async with self.exchanges.hold(pending.owner):
            endpoints, verifier = await asyncio.to_thread(self._taken, pending, unknown)
            try:
                tokens = await self.client.exchange(endpoints, code, pending.redirect_uri, verifier)
            except OAuthGrantError as e:
                raise Invalid(f"The provider refused the authorization code: {e}") from None
            except OAuthUnavailable as e:
                raise ProviderUnavailable(f"The provider's token endpoint failed: {e}. Start the connect again.") \
                    from None
            return await asyncio.to_thread(self._connected, pending, tokens)

    def _pending(self, state: str) -> PendingConnect | None:
        with self.uow(readonly=True) as uow:
            return uow.pending_connects.get(state)

    def _take(self, state: str, unknown: BadRequest) -> None:
        """The connect's state, spent: taken once, by whoever gets here first."""
        try:
            with self.uow() as uow:
                uow.pending_connects.take(state)
                uow.commit()
        except Conflict:
            raise unknown from None

    def _taken(self, pending: PendingConnect, unknown: BadRequest) -> tuple[OAuthEndpoints, str]:
        """The state taken, and what the code exchange needs: the app's client and the verifier."""
        self._take(pending.state, unknown)
        client = self.client_for(pending.owner, pending.app)
        if client is None:
            raise Invalid(f"App {pending.app} no longer has an OAuth client.")
        return self._endpoints(client), self.secrets.decrypt(pending.verifier[model.SEALED])

    def _connected(self, pending: PendingConnect, tokens: TokenSet) -> ConnectedAccount:
        """The account the exchanged tokens make: a new one, or the reconnected one renewed."""
        if pending.account_id:
            return self._renew(pending.account_id, tokens)
        now = int(self.clock())
        credentials = tokens.credentials()
        account = ConnectedAccount(
            id=ids.new_id("connected_account"), owner=pending.owner, app=pending.app,
            name=pending.name or pending.app, kind=model.OAUTH, credentials=self.sealed.seal(credentials),
            fields=model.field_names(credentials), expires_at=tokens.expires_at, status=model.ACTIVE, version=1,
            created_at=now, updated_at=now, created_by=pending.user_id, extra=_extra(tokens, now))
        with self.uow() as uow:
            uow.connected_accounts.add(account)
            uow.commit()
        return account

    def _renew(self, account_id: str, tokens: TokenSet) -> ConnectedAccount:
        """A reconnect: the account keeps its id (sources using it go on) with the new tokens."""
        def read() -> ConnectedAccount:
            with self.uow(readonly=True) as uow:
                account = uow.connected_accounts.get(account_id)
            if account is None:
                raise NotFound(f"The account {account_id} was deleted while it was being reconnected.")
            return account

        def renewed(account: ConnectedAccount) -> ConnectedAccount:
            now = int(self.clock())
            credentials = {**self.sealed.open(account), **tokens.credentials()}
            if not tokens.refresh_token:
                credentials.pop(model.OAUTH_REFRESH_TOKEN, None)
            return dataclasses.replace(
                account, kind=model.OAUTH, credentials=self.sealed.seal(credentials),
                fields=model.field_names(credentials), expires_at=tokens.expires_at, status=model.ACTIVE,
                updated_at=now, version=account.version + 1, extra={**account.extra, **_extra(tokens, now)})

        return self.sealed.save_changed(read, renewed,
                                           f"Account {account_id} kept changing meanwhile; connect again.")

    # refresh before use

    def fresh(self, account: ConnectedAccount, for_run: str | None = None) -> ConnectedAccount:
        """The account with an access token that does not expire within the margin: refreshed
        first when needed (once, whoever else needs it now). A permanent failure comes back as
        the account marked needs_reconnect; a transient one with a token that has expired raises
        AccountUnusable(ACCOUNT_REFRESH_FAILED). `for_run`: the source whose run needs it, which
        does not wait for another caller's refresh (RefreshUnderWay when its token expired)."""
        if not self._due(account):
            return account
        lease = self.lease.hold(account.id, LEASE_S, 0.0 if for_run else LEASE_S)
        try:
            lease.__enter__()
        except Busy:  # being refreshed (or its holder is stuck, or died holding it: its lease expires)
            if self._usable(account):
                return account
            message = (f"The access token of connected account {account.id} ({account.app}) expired and "
                       "another refresh of it is still under way.")
            raise (RefreshUnderWay if for_run else AccountUnusable)(ACCOUNT_REFRESH_FAILED, message) from None
        try:
            with self.uow(readonly=True) as uow:
                current = uow.connected_accounts.get(account.id)
            if current is None or not self._due(current):
                return current or account  # gone (the caller says so), or refreshed by the holder before us
            return self._refresh(current, for_run)
        finally:
            lease.__exit__(None, None, None)

    def _due(self, account: ConnectedAccount) -> bool:
        lifetime = account.extra.get("token_lifetime_s")
        margin = refresh_margin(self.settings.oauth_refresh_margin_s,
                                lifetime if isinstance(lifetime, int | float) else None)
        return (account.kind == model.OAUTH and account.status == model.ACTIVE
                and needs_refresh(account.expires_at, self.clock(), margin))

    def _refresh(self, account: ConnectedAccount, for_run: str | None) -> ConnectedAccount:
        credentials = self.sealed.open(account)
        refresh_token = credentials.get(model.OAUTH_REFRESH_TOKEN)
        client = self.client_for(account.owner, account.app)
        if client is None or not isinstance(refresh_token, str) or not refresh_token:
            if self._usable(account):
                return account
            why = "has no refresh token" if client else f"has no OAuth client for app {account.app}"
            return self._needs_reconnect(account, f"its access token expired and it {why}", for_run)
        try:
            tokens = self.client.refresh(self._endpoints(client), refresh_token)
        except OAuthGrantError as e:
            return self._needs_reconnect(account, str(e), for_run)
        except OAuthUnavailable as e:
            if self._usable(account):
                return account  # the next call tries again
            raise AccountUnusable(ACCOUNT_REFRESH_FAILED,
                                  f"The access token of connected account {account.id} ({account.app}) expired "
                                  f"and refreshing it failed for now: {e}") from None
        now = int(self.clock())
        renewed_credentials = {**credentials, **tokens.credentials(refresh_token)}
        renewed = dataclasses.replace(
            account, credentials=self.sealed.seal(renewed_credentials),
            fields=model.field_names(renewed_credentials), expires_at=tokens.expires_at, updated_at=now,
            version=account.version + 1, extra={**account.extra, **_extra(tokens, now)})
        return self._save_or_reread(renewed, account.version)

    def _usable(self, account: ConnectedAccount) -> bool:
        return account.expires_at is None or account.expires_at > self.clock()

    def _needs_reconnect(self, account: ConnectedAccount, why: str, for_run: str | None) -> ConnectedAccount:
        marked = dataclasses.replace(account, status=model.NEEDS_RECONNECT, updated_at=int(self.clock()),
                                     version=account.version + 1,
                                     extra={**account.extra, "needs_reconnect_reason": why[:300]})
        saved = self._save_or_reread(marked, account.version)
        if saved.status == model.NEEDS_RECONNECT:
            self.messages.publish(AccountNeedsReconnect(
                saved, f"The connected account {account.id} ({account.app}) needs to be reconnected: refreshing "
                       f"its token failed ({why[:300]}).", for_run))
        return saved

    def _save_or_reread(self, account: ConnectedAccount, expected_version: int) -> ConnectedAccount:
        """Saved on the version read; when another writer got there first (an update, a
        reconnect), theirs stands and is what the caller uses."""
        try:
            with self.uow() as uow:
                uow.connected_accounts.save(account, expected_version)
                uow.commit()
            return account
        except Conflict as e:
            if e.field != "version":
                raise
        with self.uow(readonly=True) as uow:
            current = uow.connected_accounts.get(account.id)
        if current is None:
            raise AccountUnusable(model.ACCOUNT_NOT_FOUND, f"The connected account {account.id} was deleted.")
        return current


def _extra(tokens: TokenSet, now: int) -> dict[str, Any]:
    """What the account keeps of a token answer besides the tokens (nothing secret)."""
    out: dict[str, Any] = {"refreshed_at": now}
    if tokens.expires_at is not None:
        out["token_lifetime_s"] = max(0, tokens.expires_at - now)
    if tokens.scope is not None:
        out["scope"] = tokens.scope
    return out


def sources_using(uow_factory: UnitOfWorkFactory, owner: str, account_id: str) -> Iterator[Source]:
    """The sources whose app props name the account: in the owner's namespace and, for a user's
    account, in those of the user's orgs (a member may use their own account in an org's source)."""
    with uow_factory(readonly=True) as uow:
        namespaces = [owner, *sorted(uow.users.org_ids(owner))] if ids.has_prefix(owner, "user") else [owner]
    for namespace in namespaces:
        after: int | None = None
        while True:
            with uow_factory(readonly=True) as uow:
                page = uow.sources.list(namespace, PageRequest(limit=100, after=after))
            for source in page.items:
                if any(model.reference(v) == account_id for v in source.configured_props.values()):
                    yield source
            if len(page.items) < 100 or not page.seqs:
                break
            after = page.seqs[-1]


def reconnect_errors(uow: UnitOfWorkFactory, runs: Runs, account: ConnectedAccount, message: str,
                     for_run: str | None = None) -> None:
    """An ACCOUNT_NEEDS_RECONNECT `$errors` event on every source using the account but `for_run`,
    whose failed run is its event (one, not two)."""
    for source in sources_using(uow, account.owner, account.id):
        if source.id == for_run:
            continue
        runs.fail(source, {"connected_account": account.id, "app": account.app},
                  model.ACCOUNT_NEEDS_RECONNECT, message)
