"""SQLite repositories: rows in, dataclasses out."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

from headwater.domain.models import REGISTRY_NAMESPACE, Component, ComponentDefinition, Org, User
from headwater.domain.pagination import Page, PageRequest


def page_query(
    conn: sqlite3.Connection, table: str, where: str, params: tuple, page: PageRequest
) -> tuple[list[sqlite3.Row], int]:
    """Newest-first paging by `seq`: the SQL form of domain.pagination.paginate."""
    (total,) = conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()
    if page.after is not None:
        sql = f"SELECT * FROM {table} WHERE {where} AND seq < ? ORDER BY seq DESC LIMIT ?"
        rows = conn.execute(sql, (*params, page.after, page.limit)).fetchall()
    elif page.before is not None:
        sql = f"SELECT * FROM {table} WHERE {where} AND seq > ? ORDER BY seq ASC LIMIT ?"
        rows = conn.execute(sql, (*params, page.before, page.limit)).fetchall()[::-1]
    else:
        sql = f"SELECT * FROM {table} WHERE {where} ORDER BY seq DESC LIMIT ?"
        rows = conn.execute(sql, (*params, page.limit)).fetchall()
    return rows, total


class SqliteUsers:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, user: User) -> None:
        self.conn.execute(
            "INSERT INTO users (id, username, email, tier, created_at) VALUES (?, ?, ?, ?, ?)",
            (user.id, user.username, user.email, user.tier, user.created_at),
        )

    def get(self, user_id: str) -> User | None:
        row = self.conn.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
        return User(**dict(row)) if row else None

    def by_username(self, username: str) -> User | None:
        row = self.conn.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
        return User(**dict(row)) if row else None

    def org_ids(self, user_id: str) -> frozenset[str]:
        rows = self.conn.execute("SELECT org_id FROM memberships WHERE user_id = ?", (user_id,))
        return frozenset(r[0] for r in rows)


class SqliteOrgs:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, org: Org) -> None:
        self.conn.execute(
            "INSERT INTO orgs (id, name, orgname, email, owner_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (org.id, org.name, org.orgname, org.email, org.owner_id, org.created_at),
        )

    def get(self, org_id: str) -> Org | None:
        row = self.conn.execute("SELECT * FROM orgs WHERE id = ?", (org_id,)).fetchone()
        return Org(**dict(row)) if row else None

    def orgnames(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT orgname FROM orgs")}

    def add_member(self, org_id: str, user_id: str) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO memberships (org_id, user_id) VALUES (?, ?)", (org_id, user_id)
        )

    def for_user(self, user_id: str) -> list[Org]:
        rows = self.conn.execute(
            "SELECT o.* FROM orgs o JOIN memberships m ON m.org_id = o.id "
            "WHERE m.user_id = ? ORDER BY o.created_at, o.id",
            (user_id,),
        )
        return [Org(**dict(r)) for r in rows]


class SqliteApiKeys:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, key_hash: str, user_id: str, created_at: int) -> None:
        self.conn.execute(
            "INSERT INTO api_keys (key_hash, user_id, created_at) VALUES (?, ?, ?)",
            (key_hash, user_id, created_at),
        )

    def user_for(self, key_hash: str) -> str | None:
        row = self.conn.execute(
            "SELECT user_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL", (key_hash,)
        ).fetchone()
        return row[0] if row else None

    def revoke(self, key_hash: str, revoked_at: int) -> bool:
        cur = self.conn.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_hash = ? AND revoked_at IS NULL",
            (revoked_at, key_hash),
        )
        return cur.rowcount > 0


def _component(row: sqlite3.Row) -> Component:
    return Component(
        id=row["id"],
        namespace=row["namespace"],
        created_by=row["created_by"],
        code=row["code"],
        code_hash=row["code_hash"],
        definition=ComponentDefinition(**json.loads(row["definition"])),
        component_url=row["component_url"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        seq=row["seq"],
    )


class SqliteComponents:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, component: Component) -> None:
        cur = self.conn.execute(
            "INSERT INTO components (id, namespace, created_by, key, code, code_hash, definition, "
            "component_url, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                component.id,
                component.namespace,
                component.created_by,
                component.key,
                component.code,
                component.code_hash,
                json.dumps(dataclasses.asdict(component.definition)),
                component.component_url,
                component.created_at,
                component.updated_at,
            ),
        )
        component.seq = cur.lastrowid or 0

    def get(self, component_id: str) -> Component | None:
        row = self.conn.execute("SELECT * FROM components WHERE id = ?", (component_id,)).fetchone()
        return _component(row) if row else None

    def latest_by_key(self, namespace: str, key: str) -> Component | None:
        if namespace == REGISTRY_NAMESPACE:
            row = self.conn.execute(
                "SELECT c.* FROM components c JOIN registry r ON r.component_id = c.id WHERE r.key = ?",
                (key,),
            ).fetchone()
        else:
            row = self.conn.execute(
                "SELECT * FROM components WHERE namespace = ? AND key = ? ORDER BY seq DESC LIMIT 1",
                (namespace, key),
            ).fetchone()
        return _component(row) if row else None

    def list(self, namespace: str, page: PageRequest) -> Page[Component]:
        rows, total = page_query(self.conn, "components", "namespace = ?", (namespace,), page)
        return Page(items=[_component(r) for r in rows], seqs=[r["seq"] for r in rows], total_count=total)

    def publish(self, component: Component) -> None:
        self.conn.execute(
            "INSERT INTO registry (key, component_id) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET component_id = excluded.component_id",
            (component.key, component.id),
        )


class SqliteUsage:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None:
        self.conn.execute(
            "INSERT INTO usage (user_id, day, invocations, compute_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(user_id, day) DO UPDATE SET invocations = invocations + excluded.invocations, "
            "compute_ms = compute_ms + excluded.compute_ms",
            (user_id, day, invocations, compute_ms),
        )

    def totals(self, user_id: str, first_day: str, last_day: str) -> tuple[int, int]:
        row = self.conn.execute(
            "SELECT coalesce(sum(invocations), 0), coalesce(sum(compute_ms), 0) FROM usage "
            "WHERE user_id = ? AND day BETWEEN ? AND ?",
            (user_id, first_day, last_day),
        ).fetchone()
        return int(row[0]), int(row[1])
