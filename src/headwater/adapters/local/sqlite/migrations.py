"""Schema migrations, applied in order; `PRAGMA user_version` records how many ran."""

from __future__ import annotations

import sqlite3

MIGRATIONS: list[str] = [
    """
    CREATE TABLE users (
        id TEXT PRIMARY KEY,
        username TEXT NOT NULL UNIQUE,
        email TEXT NOT NULL,
        tier TEXT NOT NULL CHECK (tier IN ('free', 'paid')),
        created_at INTEGER NOT NULL
    );
    CREATE TABLE api_keys (
        key_hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users(id),
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
    );
    CREATE TABLE orgs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        orgname TEXT NOT NULL UNIQUE,
        email TEXT NOT NULL,
        owner_id TEXT NOT NULL REFERENCES users(id),
        created_at INTEGER NOT NULL
    );
    CREATE TABLE memberships (
        org_id TEXT NOT NULL REFERENCES orgs(id),
        user_id TEXT NOT NULL REFERENCES users(id),
        PRIMARY KEY (org_id, user_id)
    );
    CREATE TABLE components (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        created_by TEXT,
        key TEXT,
        code TEXT NOT NULL,
        code_hash TEXT NOT NULL,
        definition TEXT NOT NULL,
        component_url TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX components_by_namespace ON components(namespace, seq);
    CREATE INDEX components_by_key ON components(namespace, key, seq);
    CREATE TABLE usage (
        user_id TEXT NOT NULL REFERENCES users(id),
        day TEXT NOT NULL,
        invocations INTEGER NOT NULL DEFAULT 0,
        compute_ms INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (user_id, day)
    );
    CREATE TABLE registry (
        key TEXT PRIMARY KEY,
        component_id TEXT NOT NULL REFERENCES components(id)
    );
    """,
    """
    CREATE TABLE sources (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        user_id TEXT NOT NULL REFERENCES users(id),
        component_id TEXT NOT NULL REFERENCES components(id),
        name TEXT NOT NULL,
        name_slug TEXT NOT NULL,
        configured_props TEXT NOT NULL,
        prop_defs TEXT NOT NULL,
        endpoint_id TEXT UNIQUE,
        active INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        UNIQUE (namespace, name_slug)
    );
    CREATE INDEX sources_by_namespace ON sources(namespace, seq);
    CREATE TABLE source_state (
        source_id TEXT PRIMARY KEY,
        db TEXT NOT NULL DEFAULT '{}',
        dedupe TEXT NOT NULL DEFAULT '{}',
        last_ms INTEGER NOT NULL DEFAULT 0,
        last_seq INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE events (
        emitter_id TEXT NOT NULL,
        channel TEXT NOT NULL,
        ms INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        indexed_at_ms INTEGER NOT NULL,
        event TEXT NOT NULL,
        metadata TEXT NOT NULL,
        PRIMARY KEY (emitter_id, channel, ms, seq)
    ) WITHOUT ROWID;
    CREATE TABLE tasks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        source_id TEXT,
        payload TEXT NOT NULL,
        run_at REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX tasks_by_source ON tasks(source_id, id);
    CREATE TABLE timers (
        source_id TEXT PRIMARY KEY,
        spec TEXT NOT NULL,
        next_at REAL NOT NULL
    );
    """,
    # The store contract without interactive transactions: versioned state, typed commands in the
    # task table (the outbox), runs admitted under the free-tier cap counted in the store.
    """
    ALTER TABLE source_state ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE source_state ADD COLUMN extra TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE usage ADD COLUMN admitted INTEGER NOT NULL DEFAULT 0;
    UPDATE tasks SET kind = 'run_source',
        payload = json_set(payload, '$.type', 'run_source', '$.source_id', source_id) WHERE kind = 'run';
    UPDATE tasks SET payload = json_set(payload, '$.type', 'delete_events', '$.source_id', source_id)
        WHERE kind = 'delete_events';
    """,
    # Routing: subscriptions, webhooks and their deliveries.
    """
    CREATE TABLE subscriptions (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        emitter_id TEXT NOT NULL,
        listener_id TEXT NOT NULL,
        event_name TEXT NOT NULL,
        auto INTEGER NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX subscriptions_by_namespace ON subscriptions(namespace, created_at);
    CREATE TABLE webhooks (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        user_id TEXT NOT NULL,
        url TEXT NOT NULL,
        signing_secret TEXT NOT NULL,
        name TEXT,
        description TEXT,
        active INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX webhooks_by_namespace ON webhooks(namespace, seq);
    CREATE TABLE deliveries (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        webhook_id TEXT NOT NULL,
        body TEXT NOT NULL,
        version INTEGER NOT NULL
    );
    CREATE INDEX deliveries_by_webhook ON deliveries(webhook_id, seq);
    """,
    """
    ALTER TABLE tasks ADD COLUMN origin TEXT;
    ALTER TABLE tasks ADD COLUMN created_at REAL;
    CREATE TABLE workflows (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        body TEXT NOT NULL,
        UNIQUE (namespace, name)
    );
    """,
    """
    ALTER TABLE components ADD COLUMN packages TEXT NOT NULL DEFAULT '{}';
    """,
    # Connected accounts (issue 22): the record is a JSON body, its credentials sealed inside it.
    """
    CREATE TABLE connected_accounts (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        owner TEXT NOT NULL,
        version INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX connected_accounts_by_owner ON connected_accounts(owner, seq);
    """,
    # OAuth clients per app and connects in progress (issue 22, part B); secrets sealed in the bodies.
    """
    CREATE TABLE oauth_clients (
        owner TEXT NOT NULL,
        app TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (owner, app)
    );
    CREATE TABLE pending_connects (
        state TEXT PRIMARY KEY,
        expires_at INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    """,
    # the file name a component deployed as code is shown under in stacks (issue 23, source maps)
    """
    ALTER TABLE components ADD COLUMN file_name TEXT;
    """,
    # requests let in per tenant and fixed window, the ingest budget's shared count (issue 21)
    """
    CREATE TABLE ingest_counts (
        tenant TEXT NOT NULL,
        win INTEGER NOT NULL,
        n INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (tenant, win)
    );
    """,
    # who configured each of a source's account references (issue 31: checked where credentials are used)
    """
    ALTER TABLE sources ADD COLUMN account_grants TEXT NOT NULL DEFAULT '{}';
    """,
    # a request's task run by the serving process that answers it (issue 32: several processes)
    """
    ALTER TABLE tasks ADD COLUMN answered_by TEXT;
    CREATE INDEX tasks_answered ON tasks(answered_by) WHERE answered_by IS NOT NULL;
    """,
    # the scheduler reads only the timers due (issue 32: 1,000 timers were read whole 200 times a second)
    """
    CREATE INDEX timers_due ON timers(next_at);
    """,
    # runs on record, the newest 100 per source or workflow (issue 33); a rowid table: a record is
    # a KB or more, and a WITHOUT ROWID table keeps whole rows in its key's b-tree (slow to insert)
    """
    CREATE TABLE runs (
        owner_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (owner_id, seq)
    );
    """,
    # issue 33: a source's health settings, and the sources watched for stalls by when to look next
    """
    ALTER TABLE sources ADD COLUMN health TEXT NOT NULL DEFAULT '{}';
    CREATE TABLE stall_watch (
        source_id TEXT PRIMARY KEY,
        check_at REAL NOT NULL
    );
    CREATE INDEX stall_watch_due ON stall_watch(check_at);
    INSERT INTO stall_watch (source_id, check_at) SELECT source_id, 0 FROM timers;
    """,
    # issue 34: snapshots of sources' this.db, a ring of 10 slots per source (domain.snapshots)
    """
    CREATE TABLE state_snapshots (
        source_id TEXT NOT NULL,
        slot INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (source_id, slot)
    );
    """,
    # issue 34: a subscription made with replay=retained whose backfill is not over
    """
    ALTER TABLE subscriptions ADD COLUMN backfilling INTEGER NOT NULL DEFAULT 0;
    """,
]


def migrate(conn: sqlite3.Connection) -> None:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        conn.executescript(f"BEGIN IMMEDIATE; {script}; PRAGMA user_version = {number}; COMMIT;")
