"""The storage contract, connected accounts: kept as given, listed per owner newest first, saved
only on the version the writer read (a refresh and an update never overwrite each other unseen)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from headwater.domain import ids
from headwater.domain.connected_accounts import ACTIVE, KEYS, NEEDS_RECONNECT, OAUTH, ConnectedAccount
from headwater.domain.errors import Conflict
from headwater.domain.pagination import PageRequest
from tests.contract import builders
from tests.contract.conftest import Backend


def account(owner: str, app: str = "slack", kind: str = KEYS, **changes: object) -> ConnectedAccount:
    made = ConnectedAccount(id=ids.new_id("connected_account"), owner=owner, app=app, name=f"{app} account",
                            kind=kind, credentials={"$secret": "sealed-token"}, fields=("api_key",),  # type: ignore[arg-type]
                            expires_at=None, status=ACTIVE, version=1, created_at=1_700_000_000,
                            updated_at=1_700_000_000, created_by=owner)
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


def add(store: Backend, *accounts: ConnectedAccount) -> None:
    with store.uow() as uow:
        for a in accounts:
            uow.connected_accounts.add(a)
        uow.commit()


def test_an_account_comes_back_as_it_was_added(store: Backend) -> None:
    alice = builders.user(store)
    oauth = account(alice.id, "github", OAUTH, fields=("oauth_access_token", "oauth_refresh_token", "oauth_uid"),
                    expires_at=1_700_003_600, extra={"scopes": ["repo"], "n": 1.5})
    add(store, account(alice.id), oauth)
    with store.uow(readonly=True) as uow:
        assert uow.connected_accounts.get(oauth.id) == oauth
        assert uow.connected_accounts.get("apn_missing") is None


def test_lists_page_newest_first_per_owner(store: Backend) -> None:
    alice, bob = builders.user(store), builders.user(store)
    org = builders.org(store, alice)
    made = [account(alice.id, f"app{i}") for i in range(5)]
    for a in made:
        add(store, a)
    add(store, account(bob.id), account(org.id))
    with store.uow(readonly=True) as uow:
        page = uow.connected_accounts.list(alice.id, PageRequest(limit=2))
        assert [a.id for a in page.items] == [made[4].id, made[3].id] and page.total_count == 5
        older = uow.connected_accounts.list(alice.id, PageRequest(limit=2, after=page.seqs[-1]))
        assert [a.id for a in older.items] == [made[2].id, made[1].id]
        newer = uow.connected_accounts.list(alice.id, PageRequest(limit=2, before=older.seqs[0]))
        assert [a.id for a in newer.items] == [made[4].id, made[3].id]
        assert [a.owner for a in uow.connected_accounts.list(org.id, PageRequest()).items] == [org.id]
        assert uow.connected_accounts.list("u_nobody", PageRequest()).total_count == 0


def test_the_lists_of_several_owners_merge_newest_first(store: Backend) -> None:
    """A user's accounts and their orgs' in one list (GET /v1/accounts), paged by one cursor."""
    alice, bob = builders.user(store), builders.user(store)
    org = builders.org(store, alice)
    made = [account(owner, f"app{i}") for i, owner in enumerate([alice.id, org.id, bob.id, org.id, alice.id])]
    for a in made:
        add(store, a)
    mine = [made[4].id, made[3].id, made[1].id, made[0].id]  # bob's is not among them
    with store.uow(readonly=True) as uow:
        page = uow.connected_accounts.list_many([alice.id, org.id], PageRequest(limit=3))
        assert [a.id for a in page.items] == mine[:3] and page.total_count == 4
        rest = uow.connected_accounts.list_many([alice.id, org.id], PageRequest(limit=3, after=page.seqs[-1]))
        assert [a.id for a in rest.items] == mine[3:]
        back = uow.connected_accounts.list_many([org.id, alice.id], PageRequest(limit=2, before=rest.seqs[0]))
        assert [a.id for a in back.items] == mine[1:3]
        assert uow.connected_accounts.list_many([bob.id], PageRequest()).items == [made[2]]


def test_save_is_conditional_on_the_version_read(store: Backend) -> None:
    alice = builders.user(store)
    first = account(alice.id)
    add(store, first)
    renamed = dataclasses.replace(first, name="renamed", credentials={"$secret": "other"}, updated_at=1_700_000_100)
    with store.uow() as uow:
        uow.connected_accounts.save(renamed, expected_version=1)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.connected_accounts.get(first.id) == dataclasses.replace(renamed, version=2)
        # the list attributes survive a save
        assert [a.name for a in uow.connected_accounts.list(alice.id, PageRequest()).items] == ["renamed"]
    with pytest.raises(Conflict) as e, store.uow() as uow:  # a writer that read version 1
        uow.connected_accounts.save(dataclasses.replace(first, status=NEEDS_RECONNECT), expected_version=1)
        uow.commit()
    assert e.value.field == "version"
    with store.uow(readonly=True) as uow:
        assert uow.connected_accounts.get(first.id).name == "renamed"  # type: ignore[union-attr]


def test_of_two_concurrent_saves_on_one_version_exactly_one_wins(store: Backend) -> None:
    """Part of what makes an OAuth refresh happen once: many writers, one version, one winner."""
    alice = builders.user(store)
    first = account(alice.id)
    add(store, first)
    wins: list[int] = []
    conflicts: list[int] = []
    start = threading.Barrier(6)

    def save(i: int) -> None:
        start.wait()
        try:
            with store.uow() as uow:
                uow.connected_accounts.save(dataclasses.replace(first, name=f"writer {i}"), expected_version=1)
                uow.commit()
            wins.append(i)
        except Conflict:
            conflicts.append(i)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(conflicts) == 5
    with store.uow(readonly=True) as uow:
        stored = uow.connected_accounts.get(first.id)
    assert stored is not None and stored.version == 2 and stored.name == f"writer {wins[0]}"


def test_a_removed_account_is_gone_and_a_save_does_not_bring_it_back(store: Backend) -> None:
    alice = builders.user(store)
    first = account(alice.id)
    add(store, first)
    for _ in range(2):  # idempotent
        with store.uow() as uow:
            uow.connected_accounts.remove(first.id)
            uow.commit()
    with pytest.raises(Conflict), store.uow() as uow:
        uow.connected_accounts.save(first, expected_version=1)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.connected_accounts.get(first.id) is None
        assert uow.connected_accounts.list(alice.id, PageRequest()).total_count == 0


def test_nothing_is_written_without_commit(store: Backend) -> None:
    alice = builders.user(store)
    first = account(alice.id)
    with store.uow() as uow:
        uow.connected_accounts.add(first)
    with store.uow(readonly=True) as uow:
        assert uow.connected_accounts.get(first.id) is None
