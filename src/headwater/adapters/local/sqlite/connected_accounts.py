"""Connected accounts in SQLite: the record as a JSON body, with what lists and conditions need
(owner, seq, version) as columns of their own."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection

from headwater.adapters.local.sqlite.repositories import claimed, page_query
from headwater.domain.connected_accounts import ConnectedAccount
from headwater.domain.errors import Conflict
from headwater.domain.pagination import Page, PageRequest


def _account(row: sqlite3.Row) -> ConnectedAccount:
    return ConnectedAccount.from_json(json.loads(row["body"]), row["version"])


class SqliteConnectedAccounts:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, account: ConnectedAccount) -> None:
        claimed(self.conn, "INSERT INTO connected_accounts (id, owner, version, body) VALUES (?, ?, ?, ?)",
                (account.id, account.owner, account.version, json.dumps(account.to_json())),
                {"connected_accounts.id": "id"})

    def get(self, account_id: str) -> ConnectedAccount | None:
        row = self.conn.execute("SELECT * FROM connected_accounts WHERE id = ?", (account_id,)).fetchone()
        return _account(row) if row else None

    def list(self, owner: str, page: PageRequest) -> Page[ConnectedAccount]:
        rows, total = page_query(self.conn, "connected_accounts", "owner = ?", (owner,), page)
        return Page([_account(r) for r in rows], [r["seq"] for r in rows], total)

    def list_many(self, owners: Collection[str], page: PageRequest) -> Page[ConnectedAccount]:
        chosen = sorted(set(owners))
        where = f"owner IN ({', '.join('?' * len(chosen))})" if chosen else "0"
        rows, total = page_query(self.conn, "connected_accounts", where, tuple(chosen), page)
        return Page([_account(r) for r in rows], [r["seq"] for r in rows], total)

    def save(self, account: ConnectedAccount, expected_version: int) -> None:
        cur = self.conn.execute(
            "UPDATE connected_accounts SET body = ?1, version = ?2 + 1 WHERE id = ?3 AND version = ?2",
            (json.dumps(account.to_json()), expected_version, account.id))
        if cur.rowcount != 1:
            raise Conflict(f"Account {account.id} changed meanwhile.", field="version")

    def remove(self, account_id: str) -> None:
        self.conn.execute("DELETE FROM connected_accounts WHERE id = ?", (account_id,))
