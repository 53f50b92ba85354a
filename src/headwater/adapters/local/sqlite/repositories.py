"""SQLite repositories: rows in, dataclasses out."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

from headwater.domain.events import EventId
from headwater.domain.models import (
    REGISTRY_NAMESPACE,
    Component,
    ComponentDefinition,
    Org,
    Source,
    SourceState,
    StoredEvent,
    User,
)
from headwater.domain.pagination import Page, PageRequest
from headwater.ports import Task


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


def _source(row: sqlite3.Row) -> Source:
    return Source(
        id=row["id"],
        namespace=row["namespace"],
        user_id=row["user_id"],
        component_id=row["component_id"],
        name=row["name"],
        name_slug=row["name_slug"],
        configured_props=json.loads(row["configured_props"]),
        prop_defs=json.loads(row["prop_defs"]),
        endpoint_id=row["endpoint_id"],
        active=bool(row["active"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        seq=row["seq"],
    )


class SqliteSources:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, s: Source) -> None:
        cur = self.conn.execute(
            "INSERT INTO sources (id, namespace, user_id, component_id, name, name_slug, configured_props, "
            "prop_defs, endpoint_id, active, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (s.id, s.namespace, s.user_id, s.component_id, s.name, s.name_slug, json.dumps(s.configured_props),
             json.dumps(s.prop_defs), s.endpoint_id, int(s.active), s.created_at, s.updated_at),
        )
        s.seq = cur.lastrowid or 0

    def update(self, s: Source) -> None:
        self.conn.execute(
            "UPDATE sources SET component_id = ?, name = ?, name_slug = ?, configured_props = ?, prop_defs = ?, "
            "endpoint_id = ?, active = ?, updated_at = ? WHERE id = ?",
            (s.component_id, s.name, s.name_slug, json.dumps(s.configured_props), json.dumps(s.prop_defs),
             s.endpoint_id, int(s.active), s.updated_at, s.id),
        )

    def remove(self, source_id: str) -> None:
        for sql in (
            "DELETE FROM sources WHERE id = ?",
            "DELETE FROM source_state WHERE source_id = ?",
            "DELETE FROM events WHERE emitter_id = ?",
            "DELETE FROM timers WHERE source_id = ?",
        ):
            self.conn.execute(sql, (source_id,))

    def get(self, source_id: str) -> Source | None:
        row = self.conn.execute("SELECT * FROM sources WHERE id = ?", (source_id,)).fetchone()
        return _source(row) if row else None

    def by_endpoint(self, endpoint_id: str) -> Source | None:
        row = self.conn.execute("SELECT * FROM sources WHERE endpoint_id = ?", (endpoint_id,)).fetchone()
        return _source(row) if row else None

    def slugs(self, namespace: str) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT name_slug FROM sources WHERE namespace = ?", (namespace,))}

    def list(self, namespace: str, page: PageRequest) -> Page[Source]:
        rows, total = page_query(self.conn, "sources", "namespace = ?", (namespace,), page)
        return Page(items=[_source(r) for r in rows], seqs=[r["seq"] for r in rows], total_count=total)


class SqliteState:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def get(self, source_id: str) -> SourceState:
        row = self.conn.execute("SELECT db, dedupe FROM source_state WHERE source_id = ?", (source_id,)).fetchone()
        return SourceState(db=json.loads(row[0]), dedupe=json.loads(row[1])) if row else SourceState()

    def save(self, source_id: str, state: SourceState) -> None:
        self.conn.execute(
            "INSERT INTO source_state (source_id, db, dedupe) VALUES (?, ?, ?) "
            "ON CONFLICT(source_id) DO UPDATE SET db = excluded.db, dedupe = excluded.dedupe",
            (source_id, json.dumps(state.db), json.dumps(state.dedupe)),
        )


def _stored_event(row: sqlite3.Row) -> StoredEvent:
    return StoredEvent(
        id=f"{row['ms']}-{row['seq']}",
        indexed_at_ms=row["indexed_at_ms"],
        event=json.loads(row["event"]),
        metadata=json.loads(row["metadata"]),
    )


class SqliteEvents:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def append(self, emitter_id: str, channel: str, event: Any, metadata: dict[str, Any], now_ms: int) -> EventId:
        """Assigns the next `<ms>-<seq>` of the emitter (ms never goes back, seq always grows)."""
        row = self.conn.execute(
            "INSERT INTO source_state (source_id, last_ms, last_seq) VALUES (?, ?, 1) "
            "ON CONFLICT(source_id) DO UPDATE SET last_ms = max(last_ms, excluded.last_ms), last_seq = last_seq + 1 "
            "RETURNING last_ms, last_seq",
            (emitter_id, now_ms),
        ).fetchone()
        event_id = EventId(row[0], row[1])
        metadata = {**metadata, "emit_id": str(event_id)} if "emit_id" not in metadata else metadata
        self.conn.execute(
            "INSERT INTO events (emitter_id, channel, ms, seq, indexed_at_ms, event, metadata) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (emitter_id, channel, event_id.ms, event_id.seq, now_ms, json.dumps(event), json.dumps(metadata)),
        )
        return event_id

    def trim(self, emitter_id: str, channel: str, keep: int) -> None:
        self.conn.execute(
            "DELETE FROM events WHERE emitter_id = ?1 AND channel = ?2 AND (ms, seq) < ("
            "SELECT ms, seq FROM events WHERE emitter_id = ?1 AND channel = ?2 "
            "ORDER BY ms DESC, seq DESC LIMIT 1 OFFSET ?3)",
            (emitter_id, channel, keep - 1),
        )

    def newest(self, emitter_id: str, channel: str, limit: int) -> list[StoredEvent]:
        rows = self.conn.execute(
            "SELECT * FROM events WHERE emitter_id = ? AND channel = ? ORDER BY ms DESC, seq DESC LIMIT ?",
            (emitter_id, channel, limit),
        ).fetchall()
        return [_stored_event(r) for r in rows]

    def count(self, emitter_id: str, channel: str) -> int:
        return self.conn.execute(
            "SELECT count(*) FROM events WHERE emitter_id = ? AND channel = ?", (emitter_id, channel)
        ).fetchone()[0]

    def after(self, emitter_id: str, channel: str, event_id: EventId, limit: int) -> list[StoredEvent]:
        """Oldest first: the retained events newer than event_id (SSE replay)."""
        rows = self.conn.execute(
            "SELECT * FROM events WHERE emitter_id = ? AND channel = ? AND (ms, seq) > (?, ?) "
            "ORDER BY ms, seq LIMIT ?",
            (emitter_id, channel, event_id.ms, event_id.seq, limit),
        ).fetchall()
        return [_stored_event(r) for r in rows]

    def delete_range(
        self, emitter_id: str, channel: str | None, start: EventId | None, end: EventId | None
    ) -> int:
        sql = "DELETE FROM events WHERE emitter_id = ?"
        params: list[Any] = [emitter_id]
        if channel is not None:
            sql += " AND channel = ?"
            params.append(channel)
        if start is not None:
            sql += " AND (ms, seq) >= (?, ?)"
            params += [start.ms, start.seq]
        if end is not None:
            sql += " AND (ms, seq) <= (?, ?)"
            params += [end.ms, end.seq]
        return self.conn.execute(sql, params).rowcount


class SqliteTasks:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, kind: str, source_id: str | None, payload: dict[str, Any], run_at: float) -> int:
        cur = self.conn.execute(
            "INSERT INTO tasks (kind, source_id, payload, run_at) VALUES (?, ?, ?, ?)",
            (kind, source_id, json.dumps(payload), run_at),
        )
        return cur.lastrowid or 0

    def done(self, task_id: int) -> None:
        self.conn.execute("DELETE FROM tasks WHERE id = ?", (task_id,))

    def retry(self, task_id: int, run_at: float) -> None:
        self.conn.execute("UPDATE tasks SET attempts = attempts + 1, run_at = ? WHERE id = ?", (run_at, task_id))

    def pending(self, task_ids: list[int] | None = None) -> list[Task]:
        if task_ids is None:
            rows = self.conn.execute("SELECT * FROM tasks ORDER BY id").fetchall()
        else:
            marks = ",".join("?" * len(task_ids))
            rows = self.conn.execute(f"SELECT * FROM tasks WHERE id IN ({marks}) ORDER BY id", task_ids).fetchall()
        return [Task(r["id"], r["kind"], r["source_id"], json.loads(r["payload"]), r["run_at"], r["attempts"])
                for r in rows]

    def pending_for(self, source_id: str, kind: str) -> int:
        return self.conn.execute(
            "SELECT count(*) FROM tasks WHERE source_id = ? AND kind = ?", (source_id, kind)
        ).fetchone()[0]


class SqliteTimers:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def set(self, source_id: str, spec: dict[str, Any], next_at: float) -> None:
        self.conn.execute(
            "INSERT INTO timers (source_id, spec, next_at) VALUES (?, ?, ?) "
            "ON CONFLICT(source_id) DO UPDATE SET spec = excluded.spec, next_at = excluded.next_at",
            (source_id, json.dumps(spec), next_at),
        )

    def remove(self, source_id: str) -> None:
        self.conn.execute("DELETE FROM timers WHERE source_id = ?", (source_id,))

    def advance(self, source_id: str, expected_at: float, next_at: float) -> bool:
        """Moves a timer on only if nobody else did: one fire per tick."""
        cur = self.conn.execute(
            "UPDATE timers SET next_at = ? WHERE source_id = ? AND next_at = ?", (next_at, source_id, expected_at)
        )
        return cur.rowcount == 1

    def all(self) -> list[tuple[str, dict[str, Any], float]]:
        rows = self.conn.execute("SELECT source_id, spec, next_at FROM timers ORDER BY next_at").fetchall()
        return [(r[0], json.loads(r[1]), r[2]) for r in rows]
