"""Apps' OAuth clients and connects in progress in SQLite (domain.oauth): JSON bodies keyed as
they are looked up; a pending connect is taken by deleting it (one taker wins)."""

from __future__ import annotations

import json
import sqlite3
import time

from headwater.adapters.local.sqlite.repositories import claimed
from headwater.domain.errors import Conflict
from headwater.domain.oauth import OAuthClient, PendingConnect


class SqliteOAuthClients:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def put(self, client: OAuthClient) -> None:
        self.conn.execute("INSERT OR REPLACE INTO oauth_clients (owner, app, body) VALUES (?, ?, ?)",
                          (client.owner, client.app, json.dumps(client.to_json())))

    def get(self, owner: str, app: str) -> OAuthClient | None:
        row = self.conn.execute("SELECT body FROM oauth_clients WHERE owner = ? AND app = ?", (owner, app)).fetchone()
        return OAuthClient.from_json(json.loads(row["body"])) if row else None

    def list(self, owner: str) -> list[OAuthClient]:
        rows = self.conn.execute("SELECT body FROM oauth_clients WHERE owner = ? ORDER BY app", (owner,))
        return [OAuthClient.from_json(json.loads(r["body"])) for r in rows]

    def remove(self, owner: str, app: str) -> None:
        self.conn.execute("DELETE FROM oauth_clients WHERE owner = ? AND app = ?", (owner, app))


class SqlitePendingConnects:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, pending: PendingConnect) -> None:
        self.conn.execute("DELETE FROM pending_connects WHERE expires_at < ?", (int(time.time()),))
        claimed(self.conn, "INSERT INTO pending_connects (state, expires_at, body) VALUES (?, ?, ?)",
                (pending.state, pending.expires_at, json.dumps(pending.to_json())), {"pending_connects.state": "state"})

    def get(self, state: str) -> PendingConnect | None:
        row = self.conn.execute("SELECT body FROM pending_connects WHERE state = ? AND expires_at >= ?",
                                (state, int(time.time()))).fetchone()
        return PendingConnect.from_json(json.loads(row["body"])) if row else None

    def take(self, state: str) -> None:
        if self.conn.execute("DELETE FROM pending_connects WHERE state = ?", (state,)).rowcount != 1:
            raise Conflict("That connect was completed already.", field="state")
