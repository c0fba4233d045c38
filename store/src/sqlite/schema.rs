//! Tables, versioned migrations and per-connection setup.
//!
//! The `store` table and its `store_migrations` (versions 0 to 4) are LangGraph's
//! `SqliteStore` schema, statement for statement, so either library finds the file familiar.
//! Waypoint's additions are recorded separately in `waypoint_store_migrations` (versions from
//! 1), a name apart from the SQLite checkpointer's `waypoint_migrations` because both may share
//! one database file.
//!
//! A `store` table that neither Waypoint nor LangGraph's `SqliteStore` made is refused before
//! anything touches the file (not even the switch to WAL), so another program's database is
//! left byte for byte as it was.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use super::convert::{BACKEND, sqlite_error};
use crate::{Error, Result};

/// One migration.
struct Migration {
    sql: &'static str,
    /// The `store` column an `ALTER TABLE ... ADD COLUMN` adds: skipped (but recorded) when a
    /// database already has it, so a half-recorded schema still migrates.
    adds_column: Option<&'static str>,
}

/// LangGraph's `store_migrations`, version = position (0-based), text unchanged.
const STORE_MIGRATIONS: &[Migration] = &[
    Migration {
        sql: "
CREATE TABLE IF NOT EXISTS store (
    -- 'prefix' represents the doc's 'namespace'
    prefix text NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key)
);
",
        adds_column: None,
    },
    Migration {
        sql: "
-- For faster lookups by prefix
CREATE INDEX IF NOT EXISTS store_prefix_idx ON store (prefix);
",
        adds_column: None,
    },
    Migration {
        sql: "
-- Add expires_at column to store table
ALTER TABLE store
ADD COLUMN expires_at TIMESTAMP;
",
        adds_column: Some("expires_at"),
    },
    Migration {
        sql: "
-- Add ttl_minutes column to store table
ALTER TABLE store
ADD COLUMN ttl_minutes REAL;
",
        adds_column: Some("ttl_minutes"),
    },
    Migration {
        sql: "
-- Add index for efficient TTL sweeping
CREATE INDEX IF NOT EXISTS idx_store_expires_at ON store (expires_at)
WHERE expires_at IS NOT NULL;
",
        adds_column: None,
    },
];

/// Waypoint's migrations, version = position + 1. Never edit one that has shipped: append.
const WAYPOINT_MIGRATIONS: &[Migration] = &[
    // 1: stored vectors (the in-process index is rebuilt from them at open), and the scan
    // order `updated_at DESC, prefix, key` as indexes, so scans of everything or of one
    // namespace stream from an index instead of sorting every row first.
    Migration {
        sql: "
CREATE TABLE IF NOT EXISTS waypoint_store_vectors (
    prefix TEXT NOT NULL,
    key TEXT NOT NULL,
    field_name TEXT NOT NULL,
    -- little-endian f32 components
    embedding BLOB NOT NULL,
    PRIMARY KEY (prefix, key, field_name)
);
CREATE INDEX IF NOT EXISTS waypoint_store_updated_at_idx ON store (updated_at DESC, prefix, key);
CREATE INDEX IF NOT EXISTS waypoint_store_prefix_updated_idx ON store (prefix, updated_at DESC, key);
",
        adds_column: None,
    },
    // 2: the change log other processes replay into their index, written in the transaction
    // of each write that changes vectors (and of each delete and sweep). `seq` never repeats
    // (AUTOINCREMENT), and SQLite commits one writer at a time, so a reader that has read
    // through `seq` has every change up to it. Old entries are trimmed; the single row of
    // `waypoint_store_changes_trimmed` says through which `seq`, so a reader that fell behind
    // reloads its whole index instead.
    Migration {
        sql: "
CREATE TABLE IF NOT EXISTS waypoint_store_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    prefix TEXT NOT NULL,
    key TEXT NOT NULL,
    changed_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS waypoint_store_changes_trimmed (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    through_seq INTEGER NOT NULL
);
INSERT OR IGNORE INTO waypoint_store_changes_trimmed (id, through_seq) VALUES (1, 0);
",
        adds_column: None,
    },
];

/// How long a statement waits for another connection's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens and prepares one connection to a file (WAL) or, with `None`, a private in-memory
/// database.
pub(crate) fn open_connection(path: Option<&Path>) -> Result<Connection> {
    let conn = match path {
        Some(path) => Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        ),
        None => Connection::open_in_memory(),
    }
    .map_err(sqlite_error)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite_error)?;
    // Plans must not depend on bound values: the bundled SQLite has STAT4, which otherwise
    // marks statements with an equality prefix plus ORDER BY (a namespace scan) for
    // recompilation on every rebind, and recompiling costs more than the query.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(sqlite_error)?;
    conn.set_prepared_statement_cache_capacity(64);
    if path.is_some() {
        // Before WAL: switching the journal mode rewrites the file's header.
        check_owner(&conn)?;
        // Switching a new file to WAL needs it to itself, and SQLite answers "busy" at once
        // rather than through the busy handler when another process is opening it too (two
        // processes opening one new file failed 2 runs in 3): retried until the timeout.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)) {
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                done => break done.map_err(sqlite_error)?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::backend(
                BACKEND,
                format!("could not enable WAL (journal_mode={mode})"),
            ));
        }
    }
    // Commits in WAL mode need no fsync with synchronous=NORMAL (a power loss may drop the
    // last commits, never corrupt); the WAL is checkpointed by a background connection (see
    // `pool::spawn_checkpointer`) rather than by whichever commit crosses the threshold;
    // vectors are deleted explicitly, so no foreign keys.
    conn.execute_batch(
        "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF; PRAGMA wal_autocheckpoint=0;
         PRAGMA journal_size_limit=67108864; PRAGMA cache_size=-16384;
         PRAGMA mmap_size=268435456;",
    )
    .map_err(sqlite_error)?;
    Ok(conn)
}

/// Applies missing migrations, LangGraph's first, in one `IMMEDIATE` transaction that
/// re-reads the versions: processes migrating at once serialize on the write lock and the
/// later ones find nothing to do, and a crash leaves the schema as it was. Idempotent.
/// Refuses, unchanged, a database whose `store` table another program made.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    // Dropped without commit on an error: nothing is changed.
    check_owner(&tx)?;
    apply(
        &tx,
        "CREATE TABLE IF NOT EXISTS store_migrations (v INTEGER PRIMARY KEY)",
        "store_migrations",
        0,
        STORE_MIGRATIONS,
    )?;
    apply(
        &tx,
        "CREATE TABLE IF NOT EXISTS waypoint_store_migrations (v INTEGER PRIMARY KEY)",
        "waypoint_store_migrations",
        1,
        WAYPOINT_MIGRATIONS,
    )?;
    tx.commit().map_err(sqlite_error)
}

/// The columns of LangGraph's `store` table, all migrations applied.
const LANGGRAPH_COLUMNS: &[&str] = &[
    "prefix",
    "key",
    "value",
    "created_at",
    "updated_at",
    "expires_at",
    "ttl_minutes",
];

/// Refuses a database whose `store` table was made neither by Waypoint (which records
/// `waypoint_store_migrations`) nor by LangGraph's `SqliteStore` (`store_migrations` and its
/// columns, keyed by prefix and key), whose layout Waypoint reads and extends. Reads only.
pub(crate) fn check_owner(conn: &Connection) -> Result<()> {
    let tables = |name: &str| -> Result<bool> {
        conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            [name],
            |r| r.get(0),
        )
        .map_err(sqlite_error)
    };
    if !tables("store")? || tables("waypoint_store_migrations")? {
        return Ok(());
    }
    let mut columns = Vec::new();
    let mut key = Vec::new();
    {
        let mut stmt = conn
            .prepare("SELECT name, pk FROM pragma_table_info('store') ORDER BY pk")
            .map_err(sqlite_error)?;
        let mut rows = stmt.query([]).map_err(sqlite_error)?;
        while let Some(r) = rows.next().map_err(sqlite_error)? {
            let name: String = r.get(0).map_err(sqlite_error)?;
            let pk: i64 = r.get(1).map_err(sqlite_error)?;
            if pk > 0 {
                key.push(name.clone());
            }
            columns.push(name);
        }
    }
    let langgraph = tables("store_migrations")?
        && key == ["prefix", "key"]
        && LANGGRAPH_COLUMNS[..5]
            .iter()
            .all(|c| columns.iter().any(|n| n == c))
        && columns
            .iter()
            .all(|n| LANGGRAPH_COLUMNS.contains(&n.as_str()));
    if langgraph {
        return Ok(());
    }
    Err(Error::InvalidConfig(String::from(
        "the database has a `store` table that neither Waypoint nor LangGraph's SqliteStore \
         created (left untouched): give the store a database file of its own",
    )))
}

/// Applies `migrations` (the first numbered `first`) recorded in `table`, within the caller's
/// transaction.
fn apply(
    tx: &Connection,
    create_table: &str,
    table: &str,
    first: i64,
    migrations: &[Migration],
) -> Result<()> {
    tx.execute_batch(create_table).map_err(sqlite_error)?;
    let applied: Option<i64> = tx
        .query_row(
            &format!("SELECT v FROM {table} ORDER BY v DESC LIMIT 1"),
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(sqlite_error)?;
    let next = applied.map_or(first, |v| v + 1);
    let position = usize::try_from(next - first)
        .map_err(|_| Error::Corrupt(format!("`{table}` records version {next}")))?;
    if position > migrations.len() {
        // LangGraph may add store migrations we do not know; they only add to its schema.
        // Ours are refused: an older build must not write a newer schema it misreads.
        if table == "store_migrations" {
            return Ok(());
        }
        let found = next - 1;
        let latest = first + migrations.len() as i64 - 1;
        return Err(Error::backend(
            BACKEND,
            format!(
                "database store schema version {found} is newer than this build supports ({latest}); upgrade Waypoint"
            ),
        ));
    }
    for (offset, migration) in migrations.iter().enumerate().skip(position) {
        let present = match migration.adds_column {
            Some(column) => has_column(tx, column)?,
            None => false,
        };
        if !present {
            tx.execute_batch(migration.sql).map_err(sqlite_error)?;
        }
        tx.execute(
            &format!("INSERT INTO {table} (v) VALUES (?1)"),
            [first + offset as i64],
        )
        .map_err(sqlite_error)?;
    }
    Ok(())
}

/// Whether the `store` table has `column`.
fn has_column(conn: &Connection, column: &str) -> Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('store') WHERE name = ?1)",
        [column],
        |r| r.get(0),
    )
    .map_err(sqlite_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(conn: &Connection, table: &str) -> Vec<i64> {
        let mut stmt = conn
            .prepare(&format!("SELECT v FROM {table} ORDER BY v"))
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    #[test]
    fn migrations_are_idempotent() {
        let mut conn = open_connection(None).unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(versions(&conn, "store_migrations"), vec![0, 1, 2, 3, 4]);
        assert_eq!(versions(&conn, "waypoint_store_migrations"), vec![1, 2]);
    }

    #[test]
    fn a_store_with_unrecorded_columns_still_migrates() {
        let mut conn = open_connection(None).unwrap();
        conn.execute_batch(
            "CREATE TABLE store_migrations (v INTEGER PRIMARY KEY);
            INSERT INTO store_migrations (v) VALUES (0), (1);
            CREATE TABLE store (prefix text NOT NULL, key text NOT NULL, value text NOT NULL,
                created_at TIMESTAMP, updated_at TIMESTAMP, expires_at TIMESTAMP,
                ttl_minutes REAL, PRIMARY KEY (prefix, key));",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(versions(&conn, "store_migrations"), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_newer_waypoint_schema_is_refused() {
        let mut conn = open_connection(None).unwrap();
        migrate(&mut conn).unwrap();
        conn.execute(
            "INSERT INTO waypoint_store_migrations (v) VALUES (?1)",
            [WAYPOINT_MIGRATIONS.len() as i64 + 1],
        )
        .unwrap();
        assert!(matches!(migrate(&mut conn), Err(Error::Backend { .. })));
    }
}
