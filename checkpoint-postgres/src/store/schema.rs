//! The store's tables: LangGraph's `store` table, numbered in `store_migrations` as
//! langgraph-checkpoint-postgres numbers it, then Waypoint's additions under
//! `waypoint_store_migrations` (not `waypoint_migrations`, which the saver uses in the same
//! schema). The crate's one migration runner applies them.

use futures::future::BoxFuture;
use sqlx::PgConnection;

use crate::error::Failure;
use crate::schema::{Migrations, Tables, scalar};

/// The store's tables.
pub(crate) const STORE_TABLES: Tables = Tables {
    migrations: &[
        Migrations {
            table: "store_migrations",
            first: 0,
            steps: LANGGRAPH_MIGRATIONS,
        },
        Migrations {
            table: "waypoint_store_migrations",
            first: 1,
            steps: WAYPOINT_MIGRATIONS,
        },
    ],
    owned: &[
        ("store", "store_migrations"),
        ("waypoint_store_vectors", "waypoint_store_migrations"),
        ("waypoint_store_changes", "waypoint_store_migrations"),
        (
            "waypoint_store_changes_trimmed",
            "waypoint_store_migrations",
        ),
        ("waypoint_store_lexical", "waypoint_store_migrations"),
        ("waypoint_store_index_snapshot", "waypoint_store_migrations"),
    ],
    lock: lock_key,
};

/// LangGraph's store migrations; a migration's version (the row it adds to
/// `store_migrations`) is its position. Same statements, so either side may run setup first.
const LANGGRAPH_MIGRATIONS: &[&[&str]] = &[
    &["CREATE TABLE IF NOT EXISTS store (
    -- 'prefix' represents the doc's 'namespace'
    prefix text NOT NULL,
    key text NOT NULL,
    value jsonb NOT NULL,
    created_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key)
);"],
    &[
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS store_prefix_idx ON store USING btree (prefix text_pattern_ops);",
    ],
    &["ALTER TABLE store
ADD COLUMN IF NOT EXISTS expires_at TIMESTAMP WITH TIME ZONE,
ADD COLUMN IF NOT EXISTS ttl_minutes INT;"],
    &[
        "CREATE INDEX IF NOT EXISTS idx_store_expires_at ON store (expires_at)
WHERE expires_at IS NOT NULL;",
    ],
];

/// Waypoint's additions, each one or more statements, each idempotent; a migration's version
/// is its position plus one. Never edit one that has shipped: append a new one.
const WAYPOINT_MIGRATIONS: &[&[&str]] = &[
    // Fractional TTLs kept exactly (LangGraph's `INT` rounds them); LangGraph's own refresh,
    // `(ttl_minutes || ' minutes')::interval`, reads a double as well.
    &["ALTER TABLE store ALTER COLUMN ttl_minutes TYPE double precision"],
    // Vectors of the in-process index, little-endian f32s, gone with their item.
    &["CREATE TABLE IF NOT EXISTS waypoint_store_vectors (
    prefix text NOT NULL,
    key text NOT NULL,
    field_name text NOT NULL,
    embedding bytea NOT NULL,
    PRIMARY KEY (prefix, key, field_name),
    FOREIGN KEY (prefix, key) REFERENCES store (prefix, key) ON DELETE CASCADE
)"],
    // The change log other processes replay into their index. Readers page by writer
    // transaction id (`xid`), not by `seq`: sequence numbers are handed out before commit,
    // so a reader could see seq 5 committed while seq 4 is still in flight, and skip it;
    // `seq` only completes the primary key (logical replication needs one to replicate the
    // trimming). `waypoint_store_changes_trimmed` remembers how far the sweeper trimmed.
    &[
        "CREATE TABLE IF NOT EXISTS waypoint_store_changes (
    seq bigserial,
    xid bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    prefix text NOT NULL,
    key text NOT NULL,
    changed_at timestamptz NOT NULL,
    PRIMARY KEY (xid, seq)
)",
        "CREATE TABLE IF NOT EXISTS waypoint_store_changes_trimmed (
    id integer PRIMARY KEY CHECK (id = 1),
    through_xid bigint NOT NULL
)",
        "INSERT INTO waypoint_store_changes_trimmed (id, through_xid) VALUES (1, -1) ON CONFLICT DO NOTHING",
    ],
    // Search pages newest first without sorting: one namespace's items in order, and every
    // item in order (the root and wide prefixes).
    &[
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_store_prefix_updated_at_idx ON store (prefix, updated_at DESC, key COLLATE \"C\")",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_store_updated_at_idx ON store (updated_at DESC, prefix COLLATE \"C\", key COLLATE \"C\")",
    ],
    // Every writer's changes reach the log, Python's included: a trigger appends them, in the
    // writer's transaction (so its `xid`). `waypoint_embedded_at` is the `updated_at` of the
    // value the stored vectors were made from: any other writer (Python, a store without an
    // index) moves `updated_at` and leaves it behind, which marks the item for embedding, and
    // the partial index finds such items newest first. Items that already have vectors were
    // embedded by Waypoint: they are taken as current. The log trigger fires for what a
    // reader's index depends on (the row, its value, `updated_at`, the embedded mark), not
    // for TTL refreshes; a TRUNCATE marks the whole log as trimmed, so readers reload.
    &[
        "ALTER TABLE store ADD COLUMN IF NOT EXISTS waypoint_embedded_at timestamptz",
        "UPDATE store s SET waypoint_embedded_at = s.updated_at
WHERE s.waypoint_embedded_at IS NULL
    AND EXISTS (SELECT 1 FROM waypoint_store_vectors v WHERE v.prefix = s.prefix AND v.key = s.key)",
        "CREATE OR REPLACE FUNCTION @schema@.waypoint_store_log_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO @schema@.waypoint_store_changes (prefix, key, changed_at)
        VALUES (OLD.prefix, OLD.key, clock_timestamp());
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND (NEW.prefix, NEW.key) IS DISTINCT FROM (OLD.prefix, OLD.key)) THEN
        INSERT INTO @schema@.waypoint_store_changes (prefix, key, changed_at)
        VALUES (NEW.prefix, NEW.key, clock_timestamp());
    END IF;
    RETURN NULL;
END
$$",
        "CREATE OR REPLACE FUNCTION @schema@.waypoint_store_log_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE @schema@.waypoint_store_changes_trimmed
    SET through_xid = GREATEST(through_xid, pg_current_xact_id()::text::bigint) WHERE id = 1;
    RETURN NULL;
END
$$",
        "DROP TRIGGER IF EXISTS waypoint_store_log_write ON store",
        "CREATE TRIGGER waypoint_store_log_write AFTER INSERT OR DELETE ON store
FOR EACH ROW EXECUTE FUNCTION @schema@.waypoint_store_log_change()",
        "DROP TRIGGER IF EXISTS waypoint_store_log_update ON store",
        "CREATE TRIGGER waypoint_store_log_update AFTER UPDATE ON store FOR EACH ROW
WHEN (OLD.updated_at IS DISTINCT FROM NEW.updated_at
    OR OLD.waypoint_embedded_at IS DISTINCT FROM NEW.waypoint_embedded_at
    OR OLD.prefix IS DISTINCT FROM NEW.prefix OR OLD.key IS DISTINCT FROM NEW.key
    OR OLD.value IS DISTINCT FROM NEW.value)
EXECUTE FUNCTION @schema@.waypoint_store_log_change()",
        "DROP TRIGGER IF EXISTS waypoint_store_log_truncate ON store",
        "CREATE TRIGGER waypoint_store_log_truncate AFTER TRUNCATE ON store
FOR EACH STATEMENT EXECUTE FUNCTION @schema@.waypoint_store_log_truncate()",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_store_unembedded_idx ON store (updated_at DESC)
WHERE waypoint_embedded_at IS DISTINCT FROM updated_at",
    ],
    // The lexical leg of hybrid search (see `lexical`): each embedded item's tokens as a
    // `tsvector`, made from the value of `made_at` (the item's `updated_at` then), gone with
    // its item, searched through a GIN index. Items embedded before this migration get
    // theirs at the next open with a lexical index (`lexical::backfill`).
    &[
        "CREATE TABLE IF NOT EXISTS waypoint_store_lexical (
    prefix text NOT NULL,
    key text NOT NULL,
    tsv tsvector NOT NULL,
    made_at timestamptz NOT NULL,
    PRIMARY KEY (prefix, key),
    FOREIGN KEY (prefix, key) REFERENCES store (prefix, key) ON DELETE CASCADE
)",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_store_lexical_tsv_idx ON waypoint_store_lexical USING gin (tsv)",
    ],
    // The last snapshot of an in-process index's search graph (one row, any process's),
    // restored at open and checked item by item against the stored vectors.
    &["CREATE TABLE IF NOT EXISTS waypoint_store_index_snapshot (
    id integer PRIMARY KEY CHECK (id = 1),
    saved_at timestamptz NOT NULL,
    snapshot bytea NOT NULL
)"],
    // Inserts and deletes logged once per statement, not once per row: a statement's keys go
    // in with one `INSERT ... SELECT` from its transition table (the per-row trigger's call
    // per item was ~2 ms of a 100-item batch put's ~5.5). Updates keep their row trigger,
    // whose `WHEN` skips TTL refreshes without a call (a statement trigger would run for
    // every refresh), and the insert branch of its function goes unused. The log holds the
    // same rows as before. The new triggers are made before the old one goes, so a write in
    // between is logged twice, never missed.
    &[
        "CREATE OR REPLACE FUNCTION @schema@.waypoint_store_log_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO @schema@.waypoint_store_changes (prefix, key, changed_at)
        SELECT prefix, key, clock_timestamp() FROM waypoint_new;
    ELSE
        INSERT INTO @schema@.waypoint_store_changes (prefix, key, changed_at)
        SELECT prefix, key, clock_timestamp() FROM waypoint_old;
    END IF;
    RETURN NULL;
END
$$",
        "DROP TRIGGER IF EXISTS waypoint_store_log_inserts ON store",
        "CREATE TRIGGER waypoint_store_log_inserts AFTER INSERT ON store
REFERENCING NEW TABLE AS waypoint_new
FOR EACH STATEMENT EXECUTE FUNCTION @schema@.waypoint_store_log_rows()",
        "DROP TRIGGER IF EXISTS waypoint_store_log_deletes ON store",
        "CREATE TRIGGER waypoint_store_log_deletes AFTER DELETE ON store
REFERENCING OLD TABLE AS waypoint_old
FOR EACH STATEMENT EXECUTE FUNCTION @schema@.waypoint_store_log_rows()",
        "DROP TRIGGER IF EXISTS waypoint_store_log_write ON store",
    ],
];

/// Advisory lock key under which one process at a time migrates the store ("wpstore!"),
/// mixed with the schema's name so that separate schemas migrate at once.
const LOCK_KEY: i64 = 0x7770_7374_6f72_6521;

/// The lock key of `schema` (FNV-1a of its name: stable across processes and builds); it
/// also seeds the keys of the locks under which one process embeds an item.
pub(crate) fn lock_key(schema: Option<&str>) -> i64 {
    let hash = schema
        .unwrap_or("")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    LOCK_KEY ^ i64::from_ne_bytes(hash.to_ne_bytes())
}

/// Whether the tables this build reads exist (setup ran, up to this build's last migration),
/// on the connection's search path.
pub(crate) fn is_set_up(conn: &mut PgConnection) -> BoxFuture<'_, Result<bool, Failure>> {
    scalar(
        conn,
        String::from(
            "SELECT to_regclass('waypoint_store_changes_trimmed') IS NOT NULL
            AND to_regclass('waypoint_store_vectors') IS NOT NULL
            AND to_regclass('waypoint_store_unembedded_idx') IS NOT NULL
            AND to_regclass('waypoint_store_lexical_tsv_idx') IS NOT NULL
            AND EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass('store')
                AND tgname = 'waypoint_store_log_inserts')",
        ),
    )
}
