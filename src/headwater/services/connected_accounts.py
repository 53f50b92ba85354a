"""Connected accounts (issue 22): create, read, update and delete them for their owner, check the
`{"authProvisionId": "apn_..."}` an app prop gives, and turn references into the `$auth` a run,
hook, `options` or `additionalProps` call gets.

`credentials_for` is the one place a run's credentials come from, read from the store at each
call (never from a cache another machine's update would leave stale); an OAuth refresh belongs
there. Credentials are sealed by the Secrets port before they reach the store, as secret props are,
and no answer, error or log line carries one.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from headwater.domain import connected_accounts as model
from headwater.domain import ids
from headwater.domain.connected_accounts import AccountUse, AccountUses, ConnectedAccount
from headwater.domain.errors import HeadwaterError, Invalid, NotFound
from headwater.domain.models import Principal, Source
from headwater.domain.pagination import Page, PageRequest
from headwater.ports import UnitOfWorkFactory
from headwater.services.accounts import Accounts
from headwater.services.clock import now_s
from headwater.services.sealed_accounts import SealedAccounts

Fresh = Callable[[ConnectedAccount, str | None], ConnectedAccount]


class AccountUnusable(HeadwaterError):
    """An account a run needs cannot give credentials (deleted, or waiting for a reconnect):
    `code` is the run's error code."""

    status = 422

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class RefreshUnderWay(AccountUnusable):
    """ACCOUNT_REFRESH_FAILED for a run that does not wait: another caller is refreshing the
    account's expired token right now (the run gives its batch back to its queue for a moment)."""


@dataclass
class AccountChange:
    """The body of PATCH /accounts/{id}: `credentials` is a merge patch (a null removes a field)."""

    name: str | None = None
    credentials: dict[str, Any] | None = None


class ConnectedAccounts:
    def __init__(self, uow: UnitOfWorkFactory, accounts: Accounts, sealed: SealedAccounts,
                 fresh: Fresh | None = None) -> None:
        """`fresh`: an OAuth account's tokens made fresh before use (OAuthConnections.fresh); its
        second argument is the source whose run needs them, which records its own failure."""
        self.uow = uow
        self.accounts = accounts
        self.sealed = sealed
        self.fresh: Fresh = fresh or (lambda account, for_run: account)
        self.seal, self.open, self.save_changed = sealed.seal, sealed.open, sealed.save_changed

    # the API's

    def create(self, principal: Principal, app: Any, name: Any, credentials: Any,
               org_id: str | None) -> ConnectedAccount:
        owner = self.accounts.namespace(principal, org_id)
        problems: dict[str, list[str]] = {}
        if (problem := model.app_problem(app)) is not None:
            problems["app"] = [problem]
        if name is not None and (problem := model.name_problem(name)) is not None:
            problems["name"] = [problem]
        if credentials is None:
            credentials = {}
        if found := model.credentials_problems(credentials):
            problems["credentials"] = found
        if problems:
            raise Invalid(f"The account is not valid: {', '.join(problems)}.", problems)
        ts = now_s()
        account = ConnectedAccount(
            id=ids.new_id("connected_account"), owner=owner, app=app, name=(name or app).strip(), kind=model.KEYS,
            credentials=self.seal(credentials), fields=model.field_names(credentials), expires_at=None,
            status=model.ACTIVE, version=1, created_at=ts, updated_at=ts, created_by=principal.user.id)
        with self.uow() as uow:
            uow.connected_accounts.add(account)
            uow.commit()
        return account

    def get(self, principal: Principal, account_id: str) -> ConnectedAccount:
        """An account of the caller or the caller's org; any other is not found (never revealed)."""
        account = self._read(account_id)
        if account is None or not principal.can_see(account.owner):
            raise NotFound(f"No account {account_id}.")
        return account

    def list(self, principal: Principal, org_id: str | None, page: PageRequest) -> Page[ConnectedAccount]:
        """The caller's own accounts, or an org's."""
        owner = self.accounts.namespace(principal, org_id)
        with self.uow(readonly=True) as uow:
            return uow.connected_accounts.list(owner, page)

    def usable(self, principal: Principal, page: PageRequest) -> Page[ConnectedAccount]:
        """Every account the caller may use: their own and their orgs', in one list."""
        with self.uow(readonly=True) as uow:
            return uow.connected_accounts.list_many({principal.user.id, *principal.org_ids}, page)

    def update(self, principal: Principal, account_id: str, change: AccountChange) -> ConnectedAccount:
        problems: dict[str, list[str]] = {}
        if change.name is not None and (problem := model.name_problem(change.name)) is not None:
            problems["name"] = [problem]
        if change.credentials is not None and (found := model.credentials_problems(change.credentials, patch=True)):
            problems["credentials"] = found
        if problems:
            raise Invalid(f"The change is not valid: {', '.join(problems)}.", problems)
        def changed(account: ConnectedAccount) -> ConnectedAccount:
            updated = dataclasses.replace(account, updated_at=now_s(), version=account.version + 1)
            if change.name is not None:
                updated = dataclasses.replace(updated, name=change.name.strip())
            if change.credentials is not None:
                credentials = model.merged(self.open(account), change.credentials)
                if found := model.credentials_problems(credentials):  # the sum may be over the bounds
                    raise Invalid(f"The change is not valid: credentials {found[0]}.", {"credentials": found})
                updated = dataclasses.replace(updated, credentials=self.seal(credentials),
                                              fields=model.field_names(credentials))
            return updated

        return self.save_changed(lambda: self.get(principal, account_id), changed,
                                 f"Account {account_id} kept changing meanwhile; try again.")

    def delete(self, principal: Principal, account_id: str) -> None:
        """Sources that use it fail their next run with an ACCOUNT_NOT_FOUND error event."""
        self.get(principal, account_id)
        with self.uow() as uow:
            uow.connected_accounts.remove(account_id)
            uow.commit()

    # app props

    def check(self, principal: Principal, configured: dict[str, Any], prop_defs: builtins.list[dict[str, Any]],
              namespace: str, kept: Mapping[str, tuple[str, str]] | None = None) -> dict[str, dict[str, str]]:
        """Every `{"authProvisionId": ...}` among the configured props names an account the caller
        may see (else 404: whether it exists is not revealed), may use in `namespace` (else 422
        naming the prop) and of the prop's app (else 422). `kept`: the grants of references the
        source had already (prop -> (account id, user)), which an editor may keep without seeing
        them. Answers the grants of every reference: kept ones as they were, the others the caller's."""
        apps = {p["name"]: p.get("app") for p in prop_defs if p.get("type") == "app"}
        kept = kept or {}
        grants: dict[str, dict[str, str]] = {}
        wrong: dict[str, list[str]] = {}
        for name, value in configured.items():
            account_id = model.reference(value)
            if account_id is None:
                continue
            app = apps.get(name)
            grant = kept.get(name)
            if grant is not None and grant[0] == account_id:
                known = self._read(account_id)
                if known is not None and app and known.app != app:
                    wrong[name] = [f"{account_id} is an account of app {known.app!r}, not {app!r}"]
                grants[name] = {"account": account_id, "by": grant[1]}
                continue
            account = self.get(principal, account_id)
            if not self._may_use(account, AccountUse(namespace, principal.user.id)):
                wrong[name] = [model.unusable_here(account)]
            elif app and account.app != app:
                wrong[name] = [f"{account_id} is an account of app {account.app!r}, not {app!r}"]
            else:
                grants[name] = {"account": account_id, "by": principal.user.id}
        if wrong:
            raise Invalid(f"Some props name an account they may not use here: {', '.join(wrong)}.", wrong)
        return grants

    def may_use(self, user_id: str, account_id: str, namespace: str) -> bool:
        """Whether `user_id` may put the account into code that runs in `namespace` (an account that
        is gone gives no credentials to anybody: nothing to refuse)."""
        account = self._read(account_id)
        return account is None or self._may_use(account, AccountUse(namespace, user_id))

    def credentials_for(self, account_id: str, use: AccountUse, for_run: str | None = None) -> dict[str, Any]:
        """The account's current `$auth`, read now, for code that runs as `use` says: the one place
        credentials are handed over, so the one place who may use them is checked (DECISIONS,
        Accounts), whatever path put the reference there. AccountUnusable when it cannot give them;
        a refused account and a deleted one are told apart by nothing. `for_run`: the source whose
        run this is (its run's failure is its `$errors` event)."""
        account = self._read(account_id)
        if account is None or not self._may_use(account, use):
            raise AccountUnusable(model.ACCOUNT_NOT_FOUND,
                                  f"The connected account {account_id} cannot be used here: it was deleted, or it is "
                                  "not an account this may use. Connect an account and give it to the app prop.")
        if account.kind == model.OAUTH:
            account = self.fresh(account, for_run)
        if account.status == model.NEEDS_RECONNECT:
            reason = account.extra.get("needs_reconnect_reason")
            raise AccountUnusable(model.ACCOUNT_NEEDS_RECONNECT,
                                  f"The connected account {account_id} ({account.app}) needs to be reconnected"
                                  + (f": refreshing its token failed ({reason})." if reason else "."))
        return self.open(account)

    def values_to_mask(self, account_id: str) -> dict[str, Any]:
        """The account's current `$auth`, only to mask what code printed of it in an answer (a
        trial's live events): never handed to code, so no use is checked and no token refreshed;
        {} when there is no such account."""
        account = self._read(account_id)
        return self.open(account) if account is not None else {}

    def _may_use(self, account: ConnectedAccount, use: AccountUse) -> bool:
        owner_orgs: frozenset[str] = frozenset()
        if model.needs_owner_orgs(account, use):
            with self.uow(readonly=True) as uow:
                owner_orgs = uow.users.org_ids(account.owner)
        return model.may_use(account, use, owner_orgs)

    def _read(self, account_id: str) -> ConnectedAccount | None:
        """None for what cannot be an account id (a store key has bounds: DynamoDB's 2 KB)."""
        if not model.is_account_id(account_id):
            return None
        with self.uow(readonly=True) as uow:
            return uow.connected_accounts.get(account_id)

    def resolve(self, props: dict[str, Any], app_props: Collection[str], uses: AccountUses,
                for_run: str | None = None) -> dict[str, Any]:
        """`props` as the runner takes them: each account reference of an app prop becomes
        `{"$auth": ...}`, for the use `uses` says of it (references elsewhere stay as they are)."""
        if not references(props):
            return props
        return {name: {"$auth": self.credentials_for(account_id, uses.of(name, account_id), for_run)}
                if (account_id := model.reference(value)) is not None and name in app_props
                else value
                for name, value in props.items()}


def references(props: dict[str, Any]) -> bool:
    """Whether any prop value is an account reference (resolving it needs the store)."""
    return any(model.reference(value) is not None for value in props.values())


def app_prop_names(prop_defs: list[dict[str, Any]]) -> list[str]:
    return [p["name"] for p in prop_defs if p.get("type") == "app"]


def source_grants(source: Source) -> dict[str, tuple[str, str]]:
    """Who configured each of the source's account references. A source saved before grants were
    kept has none: its references count as its creator's, as they were checked then."""
    if source.account_grants:
        return model.grants_of(source.account_grants)
    return {name: (account_id, source.user_id) for name, value in source.configured_props.items()
            if (account_id := model.reference(value)) is not None}


def source_uses(source: Source) -> AccountUses:
    """A source's references are used by what runs in its namespace, as their grants say; one
    with no grant (a path that put it there unchecked) by nobody: only the namespace's own accounts."""
    return AccountUses(source.namespace, None, source_grants(source))
