//! Tables and migrations: LangGraph's own, numbered as langgraph-checkpoint-postgres numbers
//! them, then Waypoint's additions under `waypoint_migrations`.

use std::time::{Duration, Instant};

use sqlx::PgConnection;
use waypoint_checkpoint::{Error, Result};

use crate::convert::pg_error;

/// langgraph-checkpoint-postgres's migrations; a migration's version (the row it adds to
/// `checkpoint_migrations`) is its position. Identical text, so either side may run setup.
pub(crate) const LANGGRAPH_MIGRATIONS: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS checkpoint_migrations (
    v INTEGER PRIMARY KEY
);",
    "CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);",
    "CREATE TABLE IF NOT EXISTS checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);",
    "CREATE TABLE IF NOT EXISTS checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);",
    "ALTER TABLE checkpoint_blobs ALTER COLUMN blob DROP not null;",
    "SELECT 1;",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_thread_id_idx ON checkpoints(thread_id);",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_blobs_thread_id_idx ON checkpoint_blobs(thread_id);",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_writes_thread_id_idx ON checkpoint_writes(thread_id);",
    "ALTER TABLE checkpoint_writes ADD COLUMN IF NOT EXISTS task_path TEXT NOT NULL DEFAULT '';",
];

/// Waypoint's additions; a migration's version is its position plus one. Never edit one
/// that has shipped: append a new one.
pub(crate) const WAYPOINT_MIGRATIONS: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS waypoint_migrations (v INTEGER PRIMARY KEY);",
    // A thread's history newest first, across its namespaces, without a sort.
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_checkpoints_thread_id_checkpoint_id_idx ON checkpoints (thread_id, checkpoint_id);",
    // `list` across threads, newest first.
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_checkpoints_checkpoint_id_idx ON checkpoints (checkpoint_id);",
    // `delete_for_runs`.
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_checkpoints_run_id_idx ON checkpoints ((metadata ->> 'run_id')) WHERE metadata ? 'run_id';",
    // Per-thread leases (single writer per thread); Waypoint's own table, unknown to LangGraph.
    // Unlogged: a lease only matters while its holder's session lives, and a server crash
    // ends every session, so losing the table with it is right; in exchange a lease commit
    // writes no WAL and waits for no disk flush (two of them per run).
    "CREATE UNLOGGED TABLE IF NOT EXISTS waypoint_thread_leases (
    thread_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);",
    // Every writer of a checkpoint, Python's LangGraph included, takes a per-namespace turn
    // (a transaction-scoped advisory lock), and a fenced Waypoint put that names the parent
    // it expects to be newest (`waypoint.expected_heads`: new id -> parent, set in the same
    // transaction) is refused when another writer's checkpoint got there first. Under the
    // lock, the trigger's query sees every checkpoint committed before it.
    "CREATE OR REPLACE FUNCTION waypoint_checkpoint_head() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
    heads text := current_setting('waypoint.expected_heads', true);
    expected text;
    newest text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(NEW.thread_id || '|' || NEW.checkpoint_ns, 2026));
    IF heads IS NULL OR heads = '' THEN
        RETURN NEW;
    END IF;
    expected := heads::jsonb ->> NEW.checkpoint_id;
    IF expected IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT checkpoint_id INTO newest FROM checkpoints
        WHERE thread_id = NEW.thread_id AND checkpoint_ns = NEW.checkpoint_ns
            AND checkpoint_id <> NEW.checkpoint_id
        ORDER BY checkpoint_id DESC LIMIT 1;
    IF newest > expected THEN
        RAISE EXCEPTION USING ERRCODE = 'WP409', MESSAGE = newest;
    END IF;
    RETURN NEW;
END
$fn$;",
    "DROP TRIGGER IF EXISTS waypoint_checkpoint_head ON checkpoints;
CREATE TRIGGER waypoint_checkpoint_head BEFORE INSERT ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION waypoint_checkpoint_head();",
];

/// The newest LangGraph migration this build knows.
pub(crate) const LANGGRAPH_LATEST: i32 = LANGGRAPH_MIGRATIONS.len() as i32 - 1;

/// The newest Waypoint migration this build knows.
pub(crate) const WAYPOINT_LATEST: i32 = WAYPOINT_MIGRATIONS.len() as i32;

/// Advisory lock key under which one process at a time migrates ("waypoint" in ASCII).
const LOCK_KEY: i64 = 0x7761_7970_6f69_6e74;

/// Creates the schema (if named) and runs every missing migration, holding an advisory lock
/// so that processes running setup at once take turns. Statements run outside any
/// transaction: `CREATE INDEX CONCURRENTLY` refuses one.
pub(crate) async fn migrate(
    conn: &mut PgConnection,
    schema: Option<&str>,
    wait: Duration,
) -> Result<()> {
    lock(conn, wait).await?;
    let done = run_migrations(conn, schema).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .persistent(false)
        .bind(LOCK_KEY)
        .execute(&mut *conn)
        .await
        .map_err(pg_error);
    done.and(unlocked.map(drop))
}

/// Takes the setup lock by polling. A session blocked inside `pg_advisory_lock` would hold a
/// snapshot that the holder's `CREATE INDEX CONCURRENTLY` waits for: a deadlock.
async fn lock(conn: &mut PgConnection, wait: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .persistent(false)
            .bind(LOCK_KEY)
            .fetch_one(&mut *conn)
            .await
            .map_err(pg_error)?;
        if got {
            return Ok(());
        }
        if start.elapsed() > wait {
            return Err(Error::Conflict(
                "another process has been running setup() for too long".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Tables setup creates, each with the migration table that records it: one found without
/// its record was made by another program.
const OWNED_TABLES: &[(&str, &str)] = &[
    ("checkpoints", "checkpoint_migrations"),
    ("checkpoint_blobs", "checkpoint_migrations"),
    ("checkpoint_writes", "checkpoint_migrations"),
    ("waypoint_thread_leases", "waypoint_migrations"),
];

/// Refuses a schema holding a table of the saver's names that neither Waypoint's nor
/// LangGraph's setup made (its migration table is missing), before anything is changed.
async fn refuse_foreign_tables(conn: &mut PgConnection) -> Result<()> {
    for (table, migrations) in OWNED_TABLES {
        let foreign: bool = sqlx::query_scalar(&format!(
            "SELECT to_regclass('{table}') IS NOT NULL AND to_regclass('{migrations}') IS NULL"
        ))
        .persistent(false)
        .fetch_one(&mut *conn)
        .await
        .map_err(pg_error)?;
        if foreign {
            return Err(Error::InvalidConfig(format!(
                "the schema has a `{table}` table that neither Waypoint nor LangGraph created \
                 (no `{migrations}` beside it); refusing to touch it: use another schema"
            )));
        }
    }
    Ok(())
}

async fn run_migrations(conn: &mut PgConnection, schema: Option<&str>) -> Result<()> {
    refuse_foreign_tables(conn).await?;
    if let Some(schema) = schema {
        sqlx::raw_sql(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
            .execute(&mut *conn)
            .await
            .map_err(pg_error)?;
    }
    apply(conn, "checkpoint_migrations", LANGGRAPH_MIGRATIONS, 0).await?;
    apply(conn, "waypoint_migrations", WAYPOINT_MIGRATIONS, 1).await
}

/// Runs the migrations of one table after the newest recorded; `first` is the version of
/// the first entry. Refuses a schema newer than this build.
async fn apply(
    conn: &mut PgConnection,
    table: &str,
    migrations: &[&str],
    first: i32,
) -> Result<()> {
    sqlx::raw_sql(migrations[0])
        .execute(&mut *conn)
        .await
        .map_err(pg_error)?;
    let current: Option<i32> = sqlx::query_scalar(&format!("SELECT max(v) FROM {table}"))
        .persistent(false)
        .fetch_one(&mut *conn)
        .await
        .map_err(pg_error)?;
    let known = first + migrations.len() as i32 - 1;
    if let Some(current) = current
        && current > known
    {
        return Err(Error::InvalidConfig(format!(
            "{table} is at version {current}, newer than this build ({known}); upgrade Waypoint"
        )));
    }
    let start = current.map_or(0, |v| (v - first + 1).max(0) as usize);
    for (i, sql) in migrations.iter().enumerate().skip(start) {
        sqlx::raw_sql(sql)
            .execute(&mut *conn)
            .await
            .map_err(pg_error)?;
        sqlx::query(&format!(
            "INSERT INTO {table} (v) VALUES ($1) ON CONFLICT DO NOTHING"
        ))
        .persistent(false)
        .bind(first + i as i32)
        .execute(&mut *conn)
        .await
        .map_err(pg_error)?;
    }
    Ok(())
}
