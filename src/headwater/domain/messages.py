"""Messages services publish on the message bus (services/messagebus.py) for others to act on."""

from __future__ import annotations

from dataclasses import dataclass

from headwater.domain.connected_accounts import ConnectedAccount


@dataclass(frozen=True)
class AccountNeedsReconnect:
    """An OAuth account's refresh failed for good: the sources using it say so, but `for_run`,
    whose failed run says it already."""

    account: ConnectedAccount
    message: str
    for_run: str | None = None
