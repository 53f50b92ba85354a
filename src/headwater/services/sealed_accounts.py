"""Connected accounts' credentials as they are kept: sealed (encrypted by the Secrets port) and
saved conditionally on the version they were read at. What the API's account service and the
OAuth service (connects, refreshes) both write with, so neither needs the other for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.domain import connected_accounts as model
from headwater.domain.connected_accounts import ConnectedAccount
from headwater.domain.errors import Conflict
from headwater.ports import Secrets, UnitOfWorkFactory
from headwater.services.contention import retry_on_conflict

_SAVE_ATTEMPTS = 5


class SealedAccounts:
    def __init__(self, uow: UnitOfWorkFactory, secrets: Secrets) -> None:
        self.uow = uow
        self.secrets = secrets

    def seal(self, credentials: dict[str, Any]) -> dict[str, Any]:
        return {model.SEALED: self.secrets.encrypt(credentials)}

    def open(self, account: ConnectedAccount) -> dict[str, Any]:
        value = self.secrets.decrypt(account.credentials[model.SEALED])
        return dict(value) if isinstance(value, dict) else {}

    def save_changed(self, read: Callable[[], ConnectedAccount],
                     change: Callable[[ConnectedAccount], ConnectedAccount], gave_up: str) -> ConnectedAccount:
        """Saves `change(account)` on the condition that the account is still at the version
        `read` gave; re-read and re-applied on what another writer (a refresh, a reconnect) left."""
        def save(_: int) -> ConnectedAccount:
            account = read()
            updated = change(account)
            with self.uow() as uow:
                uow.connected_accounts.save(updated, account.version)
                uow.commit()
            return updated

        return retry_on_conflict(save, _SAVE_ATTEMPTS, lambda: Conflict(gave_up, field="version"), pause=None)
