"""The storage contract, OAuth (issue 22, part B): apps' OAuth clients per (owner, app), created
or replaced, listed per owner; connects in progress taken exactly once (of many takers one
wins), gone once expired; the refresh lease (the source lease's port, on an account id) held by
one at a time."""

from __future__ import annotations

import secrets
import threading
import time

import pytest

from headwater.domain.errors import Conflict
from headwater.domain.oauth import OPERATOR, OAuthClient, PendingConnect
from headwater.ports import Busy
from tests.contract.conftest import Backend


def client(owner: str, app: str, **changes: object) -> OAuthClient:
    made = OAuthClient(owner=owner, app=app, client_id=f"id-{app}", client_secret={"$secret": "sealed"},
                       authorize_url="https://example.com/authorize", token_url="https://example.com/token",
                       scopes=("read", "write"), extra_params={"prompt": "consent"}, updated_at=1_700_000_000)
    return OAuthClient.from_json({**made.to_json(), **changes})


def pending(expires_in_s: int = 600) -> PendingConnect:
    return PendingConnect(state=secrets.token_urlsafe(24), owner="user_a", user_id="user_a", app="github",
                          account_id=None, verifier={"$secret": "sealed"}, redirect_uri="http://127.0.0.1/cb",
                          expires_at=int(time.time()) + expires_in_s, name="mine")


def test_clients_are_kept_replaced_listed_and_removed(store: Backend) -> None:
    with store.uow() as uow:
        uow.oauth_clients.put(client(OPERATOR, "github"))
        uow.oauth_clients.put(client(OPERATOR, "gitlab"))
        uow.oauth_clients.put(client("user_a", "github", client_id="own"))
        uow.commit()
    with store.uow() as uow:
        uow.oauth_clients.put(client(OPERATOR, "gitlab", scopes=["api"], client_secret={}))
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.oauth_clients.get(OPERATOR, "github") == client(OPERATOR, "github")
        assert uow.oauth_clients.get("user_a", "github") == client("user_a", "github", client_id="own")
        assert uow.oauth_clients.get("user_b", "github") is None
        assert [c.app for c in uow.oauth_clients.list(OPERATOR)] == ["github", "gitlab"]
        assert uow.oauth_clients.list(OPERATOR)[1] == client(OPERATOR, "gitlab", scopes=["api"], client_secret={})
    with store.uow() as uow:
        uow.oauth_clients.remove(OPERATOR, "github")
        uow.oauth_clients.remove(OPERATOR, "missing")
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert [c.app for c in uow.oauth_clients.list(OPERATOR)] == ["gitlab"]
        assert uow.oauth_clients.get("user_a", "github") is not None


def test_a_pending_connect_is_taken_once(store: Backend) -> None:
    made = pending()
    with store.uow() as uow:
        uow.pending_connects.add(made)
        uow.commit()
    with pytest.raises(Conflict) as taken, store.uow() as uow:
        uow.pending_connects.add(made)
        uow.commit()
    assert taken.value.field == "state"
    with store.uow(readonly=True) as uow:
        assert uow.pending_connects.get(made.state) == made
    results: list[str] = []
    start = threading.Barrier(5)

    def take() -> None:
        start.wait()
        try:
            with store.uow() as uow:
                uow.pending_connects.take(made.state)
                uow.commit()
            results.append("took")
        except Conflict as e:
            results.append(e.field or "")

    threads = [threading.Thread(target=take) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["state"] * 4 + ["took"]
    with store.uow(readonly=True) as uow:
        assert uow.pending_connects.get(made.state) is None


def test_an_expired_connect_is_not_found(store: Backend) -> None:
    old = pending(expires_in_s=-5)
    with store.uow() as uow:
        uow.pending_connects.add(old)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.pending_connects.get(old.state) is None


def test_the_refresh_lease_has_one_holder(store: Backend) -> None:
    with store.lease.hold("apn_account1", 30), pytest.raises(Busy):
        errors: list[BaseException] = []

        def other() -> None:
            try:
                with store.lease.hold("apn_account1", 30, 0.05):
                    pass
            except BaseException as e:  # noqa: BLE001 - checked below
                errors.append(e)
        t = threading.Thread(target=other)
        t.start()
        t.join()
        raise errors[0]
    with store.lease.hold("apn_account1", 30, 0.05):  # free again
        pass
