//! Tables, versioned migrations and per-connection setup.

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};
use serde_json::Value;
use waypoint_checkpoint::raw::json_contains;
use waypoint_checkpoint::{Error, Result};

use crate::config::{SqliteConfig, Target};
use crate::convert::sqlite_error;

/// Migrations in order; a migration's version is its position plus one. Never edit one that
/// has shipped: append a new one.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the three tables, shaped like langgraph-checkpoint-postgres's.
    "CREATE TABLE checkpoints (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        checkpoint_id TEXT NOT NULL,
        parent_checkpoint_id TEXT,
        type TEXT NOT NULL,
        checkpoint TEXT NOT NULL,
        metadata TEXT NOT NULL,
        run_id TEXT,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
    );
    CREATE TABLE checkpoint_blobs (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        channel TEXT NOT NULL,
        version TEXT NOT NULL,
        type TEXT NOT NULL,
        blob BLOB,
        PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
    );
    CREATE TABLE checkpoint_writes (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        checkpoint_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        channel TEXT NOT NULL,
        type TEXT NOT NULL,
        blob BLOB NOT NULL,
        task_path TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
    );",
    // 2: global ordering (list across threads) and delete_for_runs.
    "CREATE INDEX checkpoints_checkpoint_id_idx ON checkpoints (checkpoint_id);
    CREATE INDEX checkpoints_run_id_idx ON checkpoints (run_id) WHERE run_id IS NOT NULL;",
    // 3: per-thread leases (single writer per thread); `expires_at` in Unix microseconds.
    "CREATE TABLE waypoint_thread_leases (
        thread_id TEXT PRIMARY KEY,
        token TEXT NOT NULL,
        expires_at INTEGER NOT NULL
    ) WITHOUT ROWID;",
];

/// The schema version this build writes.
pub(crate) const LATEST: i64 = MIGRATIONS.len() as i64;

/// Name of the SQL function that tests metadata containment.
pub(crate) const CONTAINS_FN: &str = "waypoint_json_contains";

/// Opens and prepares one connection: pragmas, statement cache, the containment function.
pub(crate) fn open_connection(config: &SqliteConfig) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let mut conn = match &config.target {
        Target::File(path) => Connection::open_with_flags(path, flags),
        Target::Memory => Connection::open_in_memory(),
    }
    .map_err(|e| not_a_database(config, e))?;
    conn.busy_handler(Some(crate::busy::wait))
        .map_err(sqlite_error)?;
    // Plans must not depend on bound values: the bundled SQLite has STAT4, which otherwise
    // marks statements with an equality prefix plus ORDER BY (latest checkpoint, pending
    // writes) for recompilation on every rebind, and recompiling costs more than the query.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(sqlite_error)?;
    conn.set_prepared_statement_cache_capacity(64);
    if matches!(config.target, Target::File(_)) {
        // Switching a new file to WAL needs it to itself, and SQLite answers "busy" at once
        // rather than through the busy handler when another process is opening it too.
        let deadline = std::time::Instant::now() + config.busy_timeout;
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)) {
                Err(e)
                    if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                done => break done.map_err(|e| not_a_database(config, e))?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::backend(
                "sqlite",
                format!("could not enable WAL (journal_mode={mode})"),
            ));
        }
    }
    // Reads come from a memory map and a larger page cache instead of a pread per page; the
    // WAL is checkpointed by a background connection (see `checkpointer`), so commits on the
    // writer never wait for the checkpoint's fsync.
    let synchronous = if config.fsync_commits {
        "FULL"
    } else {
        "NORMAL"
    };
    conn.execute_batch(&format!("PRAGMA synchronous={synchronous};"))
        .map_err(|e| not_a_database(config, e))?;
    conn.execute_batch(
        "PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY;
         PRAGMA cache_size=-2048; PRAGMA mmap_size=268435456; PRAGMA wal_autocheckpoint=0;
         PRAGMA journal_size_limit=67108864;",
    )
    .map_err(|e| not_a_database(config, e))?;
    conn.create_scalar_function(
        CONTAINS_FN,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let doc: Value = serde_json::from_str(ctx.get_raw(0).as_str()?)
                .map_err(|e| rusqlite::Error::UserFunctionError(Box::new(e)))?;
            // The filter is the same for every row of a statement: parse it once.
            let pattern = ctx.get_or_create_aux(1, |v| -> Result<Value, serde_json::Error> {
                serde_json::from_str(v.as_str().unwrap_or("null"))
            })?;
            Ok(json_contains(&doc, &pattern))
        },
    )
    .map_err(sqlite_error)?;
    check_version(config, &conn)?;
    Ok(conn)
}

/// A file that is not a database gets an error naming the file.
fn not_a_database(config: &SqliteConfig, e: rusqlite::Error) -> Error {
    match (&config.target, e.sqlite_error_code()) {
        (Target::File(path), Some(ErrorCode::NotADatabase)) => Error::backend(
            "sqlite",
            format!("{} is not a SQLite database", path.display()),
        ),
        _ => sqlite_error(e),
    }
}

/// The applied schema version (0 before the first setup).
fn applied_version(conn: &Connection) -> rusqlite::Result<i64> {
    let exists: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'waypoint_migrations')",
        [],
        |r| r.get(0),
    )?;
    if !exists {
        return Ok(0);
    }
    conn.query_row(
        "SELECT COALESCE(MAX(v), 0) FROM waypoint_migrations",
        [],
        |r| r.get(0),
    )
}

/// Refuses a database whose schema is newer than this build understands.
fn check_version(config: &SqliteConfig, conn: &Connection) -> Result<()> {
    let found = applied_version(conn).map_err(|e| not_a_database(config, e))?;
    if found > LATEST {
        return Err(Error::backend(
            "sqlite",
            format!(
                "database schema version {found} is newer than this build supports ({LATEST}); upgrade Waypoint"
            ),
        ));
    }
    Ok(())
}

/// Whether the database has a table called `name`.
fn has_table(conn: &Connection, name: &str) -> Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        [name],
        |r| r.get(0),
    )
    .map_err(sqlite_error)
}

/// Applies missing migrations in one `IMMEDIATE` transaction, so two processes running it
/// at once serialize on SQLite's write lock and the second finds nothing to do.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS waypoint_migrations (
            v INTEGER PRIMARY KEY,
            applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
        )",
    )
    .map_err(sqlite_error)?;
    let applied = applied_version(&tx).map_err(sqlite_error)?;
    if applied == 0 && has_table(&tx, "checkpoints")? {
        // Rolled back on return: nothing is changed in a database another program owns.
        return Err(Error::InvalidConfig(
            "the database has a `checkpoints` table that Waypoint did not create (LangGraph's \
             SqliteSaver writes one of another layout): give Waypoint a file of its own"
                .into(),
        ));
    }
    if applied > LATEST {
        return Err(Error::backend(
            "sqlite",
            format!(
                "database schema version {applied} is newer than this build supports ({LATEST})"
            ),
        ));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied as usize) {
        tx.execute_batch(sql).map_err(sqlite_error)?;
        tx.execute(
            "INSERT INTO waypoint_migrations (v) VALUES (?1)",
            [i as i64 + 1],
        )
        .map_err(sqlite_error)?;
    }
    tx.commit().map_err(sqlite_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsync_commits_sets_synchronous_full() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::backend("test", e))?;
        let path = dir.path().join("sync.db");
        for (on, want) in [(false, 1), (true, 2)] {
            let conn = open_connection(&SqliteConfig::file(&path).fsync_commits(on))?;
            let level: i64 = conn
                .query_row("PRAGMA synchronous", [], |r| r.get(0))
                .map_err(|e| Error::backend("test", e))?;
            assert_eq!(level, want, "fsync_commits({on})");
        }
        Ok(())
    }
}
