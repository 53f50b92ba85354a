"""SQLite repositories: rows in, dataclasses out."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from headwater.adapters.local.sqlite.database import Database
from headwater.domain.commands import Command, from_message, message_text
from headwater.domain.errors import Conflict
from headwater.domain.events import EventId
from headwater.domain.json_text import compact_json
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
from headwater.domain.pagination import MAX_SEQ, Page, PageRequest
from headwater.domain.routing import Attempt, Delivery, Subscription, Webhook
from headwater.domain.run_records import RunRecord
from headwater.domain.snapshots import SNAPSHOTS_KEPT, StateSnapshot, newest
from headwater.domain.workflows import Step, Workflow
from headwater.ports import Task

ROWS_PER_INSERT = 500  # a few values a row: far below SQLite's bound on a statement's variables


def chunks(rows: list[Any], size: int = ROWS_PER_INSERT) -> list[list[Any]]:
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def insert_rows(conn: sqlite3.Connection, head: str, rows: list[tuple[Any, ...]]) -> int | None:
    """`head` (`INSERT INTO t (a, b)`) with `rows` in one statement: under load every statement of
    the one writer costs a round trip for the GIL. Returns the last row's rowid."""
    row = "(" + ", ".join("?" * len(rows[0])) + ")"
    return conn.execute(f"{head} VALUES {', '.join([row] * len(rows))}", [v for r in rows for v in r]).lastrowid


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


def claimed(conn: sqlite3.Connection, sql: str, params: tuple, fields: dict[str, str]) -> sqlite3.Cursor:
    """An insert or update whose unique constraints are claims: a taken value raises Conflict
    naming its field (`fields` maps a constraint's column to the field name)."""
    try:
        return conn.execute(sql, params)
    except sqlite3.IntegrityError as e:
        text = str(e)
        for column, field in fields.items():
            if column in text:
                raise Conflict(f"That {field} is taken.", {field: ["is taken"]}, field=field) from None
        raise


class SqliteUsers:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, user: User) -> None:
        claimed(
            self.conn,
            "INSERT INTO users (id, username, email, tier, created_at) VALUES (?, ?, ?, ?, ?)",
            (user.id, user.username, user.email, user.tier, user.created_at),
            {"users.username": "username"},
        )

    def get(self, user_id: str) -> User | None:
        row = self.conn.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
        return User(**dict(row)) if row else None

    def org_ids(self, user_id: str) -> frozenset[str]:
        rows = self.conn.execute("SELECT org_id FROM memberships WHERE user_id = ?", (user_id,))
        return frozenset(r[0] for r in rows)


class SqliteOrgs:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, org: Org) -> None:
        claimed(
            self.conn,
            "INSERT INTO orgs (id, name, orgname, email, owner_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (org.id, org.name, org.orgname, org.email, org.owner_id, org.created_at),
            {"orgs.orgname": "orgname"},
        )

    def get(self, org_id: str) -> Org | None:
        row = self.conn.execute("SELECT * FROM orgs WHERE id = ?", (org_id,)).fetchone()
        return Org(**dict(row)) if row else None

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
        packages=json.loads(row["packages"]),
        file_name=row["file_name"],
    )


class SqliteComponents:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, component: Component) -> None:
        cur = self.conn.execute(
            "INSERT INTO components (id, namespace, created_by, key, code, code_hash, definition, "
            "component_url, created_at, updated_at, packages, file_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                json.dumps(component.packages, sort_keys=True),
                component.file_name,
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

    def registry(self, page: PageRequest) -> Page[Component]:
        rows, total = page_query(self.conn, "components", "id IN (SELECT component_id FROM registry)", (), page)
        return Page(items=[_component(r) for r in rows], seqs=[r["seq"] for r in rows], total_count=total)

    def publish(self, component: Component) -> None:
        self.conn.execute(
            "INSERT INTO registry (key, component_id) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET component_id = excluded.component_id",
            (component.key, component.id),
        )


class SqliteUsageLog:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None:
        self.conn.execute(
            "INSERT INTO usage (user_id, day, invocations, compute_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(user_id, day) DO UPDATE SET invocations = invocations + excluded.invocations, "
            "compute_ms = compute_ms + excluded.compute_ms",
            (user_id, day, invocations, compute_ms),
        )


class SqliteUsage:
    """Each method is one short transaction of its own (UsageRepository: atomic updates)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _write(self, sql: str, params: tuple) -> int:
        with self.db.writing() as conn:
            conn.execute("INSERT OR IGNORE INTO usage (user_id, day) VALUES (?, ?)", params[-2:])
            return conn.execute(sql, params).rowcount

    def record(self, user_id: str, day: str, invocations: int, compute_ms: int) -> None:
        self._write("UPDATE usage SET invocations = invocations + ?, compute_ms = compute_ms + ? "
                    "WHERE user_id = ? AND day = ?", (invocations, compute_ms, user_id, day))

    def totals(self, user_id: str, first_day: str, last_day: str) -> tuple[int, int]:
        row = self.db.connection().execute(
            "SELECT coalesce(sum(invocations), 0), coalesce(sum(compute_ms), 0) FROM usage "
            "WHERE user_id = ? AND day BETWEEN ? AND ?",
            (user_id, first_day, last_day),
        ).fetchone()
        return int(row[0]), int(row[1])

    def admit(self, user_id: str, day: str, cap: int) -> bool:
        return self._write("UPDATE usage SET admitted = admitted + 1 WHERE admitted < ? AND user_id = ? AND day = ?",
                           (cap, user_id, day)) == 1

    def release(self, user_id: str, day: str) -> None:
        self._write("UPDATE usage SET admitted = max(0, admitted - 1) WHERE user_id = ? AND day = ?", (user_id, day))


class SqliteIngestCounts:
    """The IngestCounts port: each add one short write transaction. A tenant's first add in a
    window also drops its windows that have expired, so the table holds about one row a tenant."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def add(self, tenant: str, window: int, n: int, allowance: int, expires_at: int) -> int:
        with self.db.writing() as conn:
            row = conn.execute("SELECT n FROM ingest_counts WHERE tenant = ? AND win = ?", (tenant, window)).fetchone()
            if row is None:
                conn.execute("DELETE FROM ingest_counts WHERE tenant = ? AND expires_at < ?",
                             (tenant, int(self.clock())))
                conn.execute("INSERT INTO ingest_counts (tenant, win, n, expires_at) VALUES (?, ?, 0, ?)",
                             (tenant, window, expires_at))
            before = int(row["n"]) if row else 0
            if before < allowance:
                conn.execute("UPDATE ingest_counts SET n = n + ? WHERE tenant = ? AND win = ?", (n, tenant, window))
            return before


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
        account_grants=json.loads(row["account_grants"]),
        **json.loads(row["health"]),
    )


class SqliteSources:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    _CLAIMS = {"sources.namespace, sources.name_slug": "name_slug", "sources.endpoint_id": "endpoint_id"}

    def add(self, s: Source) -> None:
        cur = claimed(
            self.conn,
            "INSERT INTO sources (id, namespace, user_id, component_id, name, name_slug, configured_props, "
            "prop_defs, endpoint_id, active, created_at, updated_at, account_grants, health) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (s.id, s.namespace, s.user_id, s.component_id, s.name, s.name_slug, json.dumps(s.configured_props),
             json.dumps(s.prop_defs), s.endpoint_id, int(s.active), s.created_at, s.updated_at,
             json.dumps(s.account_grants), json.dumps(s.health_settings())),
            self._CLAIMS,
        )
        s.seq = cur.lastrowid or 0

    def update(self, s: Source, previous: Source) -> None:
        claimed(
            self.conn,
            "UPDATE sources SET component_id = ?, name = ?, name_slug = ?, configured_props = ?, prop_defs = ?, "
            "endpoint_id = ?, active = ?, updated_at = ?, account_grants = ?, health = ? WHERE id = ?",
            (s.component_id, s.name, s.name_slug, json.dumps(s.configured_props), json.dumps(s.prop_defs),
             s.endpoint_id, int(s.active), s.updated_at, json.dumps(s.account_grants),
             json.dumps(s.health_settings()), s.id),
            self._CLAIMS,
        )

    def remove(self, source: Source) -> None:
        self.conn.execute("DELETE FROM sources WHERE id = ?", (source.id,))

    def get(self, source_id: str) -> Source | None:
        row = self.conn.execute("SELECT * FROM sources WHERE id = ?", (source_id,)).fetchone()
        return _source(row) if row else None

    def by_endpoint(self, endpoint_id: str) -> Source | None:
        row = self.conn.execute("SELECT * FROM sources WHERE endpoint_id = ?", (endpoint_id,)).fetchone()
        return _source(row) if row else None

    def list(self, namespace: str, page: PageRequest) -> Page[Source]:
        rows, total = page_query(self.conn, "sources", "namespace = ?", (namespace,), page)
        return Page(items=[_source(r) for r in rows], seqs=[r["seq"] for r in rows], total_count=total)


_STATE_COLUMNS = frozenset({"db", "dedupe", "last_ms", "last_seq"})  # the rest of the state is in `extra`


class SqliteState:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def get(self, source_id: str) -> SourceState:
        row = self.conn.execute(
            "SELECT db, dedupe, last_ms, last_seq, extra, version FROM source_state WHERE source_id = ?", (source_id,)
        ).fetchone()
        if row is None:
            return SourceState()
        data = {"db": json.loads(row[0]), "dedupe": json.loads(row[1]), "last_ms": row[2], "last_seq": row[3],
                **json.loads(row[4])}
        return SourceState.from_json(data, row[5])

    def save(self, source_id: str, state: SourceState, expected_version: int) -> None:
        data = state.to_json()
        extra = compact_json({k: v for k, v in data.items() if k not in _STATE_COLUMNS})
        cur = self.conn.execute(
            "INSERT INTO source_state (source_id, db, dedupe, last_ms, last_seq, extra, version) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7 + 1) "
            "ON CONFLICT(source_id) DO UPDATE SET db = ?2, dedupe = ?3, last_ms = ?4, last_seq = ?5, extra = ?6, "
            "version = ?7 + 1 WHERE version = ?7",
            (source_id, compact_json(state.db), compact_json(state.dedupe), state.last_ms, state.last_seq, extra,
             expected_version),
        )
        if cur.rowcount != 1:
            raise Conflict(f"Source {source_id} changed meanwhile.", field="version")

    def remove(self, source_id: str) -> None:
        self.conn.execute("DELETE FROM source_state WHERE source_id = ?", (source_id,))


def _stored_event(row: sqlite3.Row) -> StoredEvent:
    return StoredEvent(
        id=f"{row['ms']}-{row['seq']}",
        indexed_at_ms=row["indexed_at_ms"],
        event=json.loads(row["event"]),
        metadata=json.loads(row["metadata"]),
        channel=row["channel"],
    )


class SqliteEvents:
    """Puts are held and written together (`insert_rows`) before anything else touches the table:
    trim, a read, the commit."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._held: list[tuple[Any, ...]] = []

    def put(self, emitter_id: str, event: StoredEvent) -> None:
        event_id = EventId.parse(event.id)
        self._held.append((emitter_id, event.channel, event_id.ms, event_id.seq, event.indexed_at_ms,
                           compact_json(event.event) if event.encoded is None else event.encoded,
                           compact_json(event.metadata)))

    def flush(self) -> None:
        held, self._held = self._held, []
        for rows in chunks(held):
            insert_rows(self.conn, "INSERT OR IGNORE INTO events "
                        "(emitter_id, channel, ms, seq, indexed_at_ms, event, metadata)", rows)

    def trim(self, emitter_id: str, channel: str, keep: int) -> None:
        self.flush()
        self.conn.execute(
            "DELETE FROM events WHERE emitter_id = ?1 AND channel = ?2 AND (ms, seq) < ("
            "SELECT ms, seq FROM events WHERE emitter_id = ?1 AND channel = ?2 "
            "ORDER BY ms DESC, seq DESC LIMIT 1 OFFSET ?3)",
            (emitter_id, channel, keep - 1),
        )

    def get(self, emitter_id: str, channel: str, event_id: str) -> StoredEvent | None:
        self.flush()
        try:
            parsed = EventId.parse(event_id)
        except ValueError:
            return None
        row = self.conn.execute(
            "SELECT * FROM events WHERE emitter_id = ? AND channel = ? AND ms = ? AND seq = ?",
            (emitter_id, channel, parsed.ms, parsed.seq),
        ).fetchone()
        return _stored_event(row) if row else None

    def newest(self, emitter_id: str, channel: str, limit: int) -> list[StoredEvent]:
        self.flush()
        rows = self.conn.execute(
            "SELECT * FROM events WHERE emitter_id = ? AND channel = ? ORDER BY ms DESC, seq DESC LIMIT ?",
            (emitter_id, channel, limit),
        ).fetchall()
        return [_stored_event(r) for r in rows]

    def count(self, emitter_id: str, channel: str) -> int:
        self.flush()
        return self.conn.execute(
            "SELECT count(*) FROM events WHERE emitter_id = ? AND channel = ?", (emitter_id, channel)
        ).fetchone()[0]

    def after(self, emitter_id: str, channel: str, event_id: EventId, limit: int) -> list[StoredEvent]:
        """Oldest first: the retained events newer than event_id (SSE replay)."""
        self.flush()
        rows = self.conn.execute(
            "SELECT * FROM events WHERE emitter_id = ? AND channel = ? AND (ms, seq) > (?, ?) "
            "ORDER BY ms, seq LIMIT ?",
            (emitter_id, channel, event_id.ms, event_id.seq, limit),
        ).fetchall()
        return [_stored_event(r) for r in rows]

    def delete_range(
        self, emitter_id: str, channel: str | None, start: EventId | None, end: EventId | None
    ) -> int:
        self.flush()
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


class SqliteRunRecords:
    """Puts are held and written together (`insert_rows`) before anything else touches the table."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._held: list[tuple[str, int, str]] = []

    def put(self, owner_id: str, record: RunRecord) -> None:
        self._held.append((owner_id, record.seq, record.to_text()))

    def flush(self) -> None:
        held, self._held = self._held, []
        for rows in chunks(held):
            insert_rows(self.conn, "INSERT OR IGNORE INTO runs (owner_id, seq, body)", rows)

    def trim(self, owner_id: str, below_seq: int) -> None:
        self.flush()
        self.conn.execute("DELETE FROM runs WHERE owner_id = ? AND seq < ?", (owner_id, below_seq))

    def get(self, owner_id: str, seq: int, floor: int) -> RunRecord | None:
        self.flush()
        if seq < floor or seq > MAX_SEQ:
            return None
        row = self.conn.execute("SELECT body FROM runs WHERE owner_id = ? AND seq = ?", (owner_id, seq)).fetchone()
        return RunRecord.from_text(row["body"]) if row else None

    def list(self, owner_id: str, page: PageRequest, floor: int) -> Page[RunRecord]:
        self.flush()
        rows, total = page_query(self.conn, "runs", "owner_id = ? AND seq >= ?", (owner_id, floor), page)
        return Page(items=[RunRecord.from_text(r["body"]) for r in rows], seqs=[r["seq"] for r in rows],
                    total_count=total)

    def remove_all(self, owner_id: str) -> None:
        self.flush()
        self.conn.execute("DELETE FROM runs WHERE owner_id = ?", (owner_id,))


class SqliteSnapshots:
    """A ring of SNAPSHOTS_KEPT slots per source: snapshot `n` replaces snapshot `n - kept`."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def put(self, source_id: str, snapshot: StateSnapshot) -> None:
        self.conn.execute("INSERT OR REPLACE INTO state_snapshots (source_id, slot, seq, body) VALUES (?, ?, ?, ?)",
                          (source_id, snapshot.seq % SNAPSHOTS_KEPT, snapshot.seq, json.dumps(snapshot.to_json())))

    def list(self, source_id: str) -> list[StateSnapshot]:
        rows = self.conn.execute("SELECT body FROM state_snapshots WHERE source_id = ?", (source_id,)).fetchall()
        return newest([StateSnapshot.from_json(json.loads(row[0])) for row in rows])

    def get(self, source_id: str, snapshot_id: str) -> StateSnapshot | None:
        return next((s for s in self.list(source_id) if s.id == snapshot_id), None)

    def remove_all(self, source_id: str) -> None:
        self.conn.execute("DELETE FROM state_snapshots WHERE source_id = ?", (source_id,))


class SqliteSubscriptions:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, sub: Subscription) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO subscriptions (id, namespace, emitter_id, listener_id, event_name, auto, "
            "created_at, backfilling) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (sub.id, sub.namespace, sub.emitter_id, sub.listener_id, sub.event_name, int(sub.auto), sub.created_at,
             int(sub.backfilling)),
        )

    def remove(self, subscription_id: str) -> bool:
        return self.conn.execute("DELETE FROM subscriptions WHERE id = ?", (subscription_id,)).rowcount > 0

    def for_namespace(self, namespace: str) -> list[Subscription]:
        rows = self.conn.execute(
            "SELECT * FROM subscriptions WHERE namespace = ? ORDER BY created_at, id", (namespace,)
        ).fetchall()
        return [Subscription(r["id"], r["namespace"], r["emitter_id"], r["listener_id"], r["event_name"],
                             r["created_at"], bool(r["auto"]), bool(r["backfilling"])) for r in rows]

    def remove_naming(self, resource_id: str) -> None:
        self.conn.execute("DELETE FROM subscriptions WHERE emitter_id = ?1 OR listener_id = ?1", (resource_id,))

    def finish_backfill(self, subscription_id: str) -> None:
        self.conn.execute("UPDATE subscriptions SET backfilling = 0 WHERE id = ?", (subscription_id,))


def _webhook(row: sqlite3.Row) -> Webhook:
    return Webhook(id=row["id"], namespace=row["namespace"], user_id=row["user_id"], url=row["url"],
                   signing_secret=row["signing_secret"], name=row["name"], description=row["description"],
                   active=bool(row["active"]), created_at=row["created_at"], updated_at=row["updated_at"],
                   seq=row["seq"])


class SqliteWebhooks:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, w: Webhook) -> None:
        cur = self.conn.execute(
            "INSERT INTO webhooks (id, namespace, user_id, url, signing_secret, name, description, active, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (w.id, w.namespace, w.user_id, w.url, w.signing_secret, w.name, w.description, int(w.active),
             w.created_at, w.updated_at),
        )
        w.seq = cur.lastrowid or 0

    def get(self, webhook_id: str) -> Webhook | None:
        row = self.conn.execute("SELECT * FROM webhooks WHERE id = ?", (webhook_id,)).fetchone()
        return _webhook(row) if row else None

    def update(self, w: Webhook) -> None:
        self.conn.execute(
            "UPDATE webhooks SET url = ?, name = ?, description = ?, active = ?, updated_at = ? WHERE id = ?",
            (w.url, w.name, w.description, int(w.active), w.updated_at, w.id),
        )

    def remove(self, webhook_id: str) -> None:
        self.conn.execute("DELETE FROM webhooks WHERE id = ?", (webhook_id,))

    def list(self, namespace: str, page: PageRequest) -> Page[Webhook]:
        rows, total = page_query(self.conn, "webhooks", "namespace = ?", (namespace,), page)
        return Page(items=[_webhook(r) for r in rows], seqs=[r["seq"] for r in rows], total_count=total)


def delivery_to_json(d: Delivery) -> str:
    return json.dumps({**dataclasses.asdict(d), "version": None})


def delivery_from_json(text: str, version: int) -> Delivery:
    data = json.loads(text)
    data["attempts"] = [Attempt(**a) for a in data["attempts"]]
    data["version"] = version
    return Delivery(**data)


class SqliteDeliveries:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, d: Delivery) -> None:
        claimed(self.conn, "INSERT INTO deliveries (id, webhook_id, body, version) VALUES (?, ?, ?, 1)",
                (d.id, d.webhook_id, delivery_to_json(d)), {"deliveries.id": "delivery"})

    def get(self, delivery_id: str) -> Delivery | None:
        row = self.conn.execute("SELECT body, version FROM deliveries WHERE id = ?", (delivery_id,)).fetchone()
        return delivery_from_json(row[0], row[1]) if row else None

    def save(self, d: Delivery, expected_version: int) -> None:
        cur = self.conn.execute("UPDATE deliveries SET body = ?, version = version + 1 WHERE id = ? AND version = ?",
                                (delivery_to_json(d), d.id, expected_version))
        if cur.rowcount != 1:
            raise Conflict(f"Delivery {d.id} changed meanwhile.", field="version")

    def for_webhook(self, webhook_id: str, page: PageRequest) -> Page[Delivery]:
        rows, total = page_query(self.conn, "deliveries", "webhook_id = ?", (webhook_id,), page)
        return Page(items=[delivery_from_json(r["body"], r["version"]) for r in rows], seqs=[r["seq"] for r in rows],
                    total_count=total)


def _workflow(row: sqlite3.Row) -> Workflow:
    data = json.loads(row["body"])
    data["steps"] = [Step(**s) for s in data["steps"]]
    return Workflow(**{**data, "seq": row["seq"]})


class SqliteWorkflows:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, w: Workflow) -> None:
        cur = claimed(self.conn, "INSERT INTO workflows (id, namespace, name, body) VALUES (?, ?, ?, ?)",
                      (w.id, w.namespace, w.name, json.dumps(dataclasses.asdict(w))),
                      {"workflows.namespace, workflows.name": "name"})
        w.seq = cur.lastrowid or 0

    def update(self, w: Workflow) -> None:
        self.conn.execute("UPDATE workflows SET body = ? WHERE id = ?", (json.dumps(dataclasses.asdict(w)), w.id))

    def get(self, workflow_id: str) -> Workflow | None:
        row = self.conn.execute("SELECT * FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
        return _workflow(row) if row else None

    def by_name(self, namespace: str, name: str) -> Workflow | None:
        row = self.conn.execute("SELECT * FROM workflows WHERE namespace = ? AND name = ?",
                                (namespace, name)).fetchone()
        return _workflow(row) if row else None

    def list(self, namespace: str) -> list[Workflow]:
        rows = self.conn.execute("SELECT * FROM workflows WHERE namespace = ? ORDER BY seq DESC", (namespace,))
        return [_workflow(r) for r in rows]

    def remove(self, workflow: Workflow) -> None:
        self.conn.execute("DELETE FROM workflows WHERE id = ?", (workflow.id,))


class SqliteOutbox:
    """Commands go into the task table in the unit of work's transaction; the unit of work hands
    them to the task queue once it has committed. `origin` marks them as this process's."""

    def __init__(self, conn: sqlite3.Connection, origin: str) -> None:
        self.conn = conn
        self.origin = origin
        self.added: list[Task] = []

    def add(self, command: Command, delay_s: float = 0.0) -> None:
        not_before = time.time() + delay_s if delay_s > 0 else 0.0
        cur = self.conn.execute(
            "INSERT INTO tasks (kind, source_id, payload, run_at, origin, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (command.name, command.lane, message_text(command), not_before, self.origin, time.time()),
        )
        self.added.append(Task(str(cur.lastrowid), command, 0, not_before))


def task_from_row(row: sqlite3.Row) -> Task:
    return Task(str(row["id"]), from_message(json.loads(row["payload"])), row["attempts"], row["run_at"])
