//! The store's tables and their migrations (run by the crate's one runner, `migrate`).
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

use rusqlite::Connection;

use crate::error::Failure;
use crate::migrate::{self, Ledger, Migration, Newer};

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
        adds_column: Some(("store", "expires_at")),
    },
    Migration {
        sql: "
-- Add ttl_minutes column to store table
ALTER TABLE store
ADD COLUMN ttl_minutes REAL;
",
        adds_column: Some(("store", "ttl_minutes")),
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
    // 3: the last snapshot of the in-process index's graph (one row), restored at open
    // instead of rebuilding the graph; checked against the stored vectors before use.
    Migration {
        sql: "
CREATE TABLE IF NOT EXISTS waypoint_store_index_snapshot (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    saved_at TEXT NOT NULL,
    snapshot BLOB NOT NULL
);
",
        adds_column: None,
    },
    // 4: the lexical leg of hybrid search (see `lexical`): each embedded item's tokens in a
    // contentless FTS5 table, at the rowid its `waypoint_store_lexical_keys` row gives it
    // (an INTEGER PRIMARY KEY, so VACUUM keeps it). Items embedded before this migration
    // get theirs at the next open with a lexical index (`lexical::backfill`).
    Migration {
        sql: "
CREATE TABLE IF NOT EXISTS waypoint_store_lexical_keys (
    id INTEGER PRIMARY KEY,
    prefix TEXT NOT NULL,
    key TEXT NOT NULL,
    UNIQUE (prefix, key)
);
CREATE VIRTUAL TABLE IF NOT EXISTS waypoint_store_lexical USING fts5(
    body, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 0'
);
",
        adds_column: None,
    },
];

/// LangGraph's ledger: `store_migrations` from version 0; versions LangGraph adds later only
/// add to its schema, so they are left be.
const LANGGRAPH: Ledger = Ledger {
    table: "store_migrations",
    create: "CREATE TABLE IF NOT EXISTS store_migrations (v INTEGER PRIMARY KEY)",
    first: 0,
    migrations: STORE_MIGRATIONS,
    newer: Newer::Ignore,
};

/// Waypoint's ledger: `waypoint_store_migrations` from version 1; an older build must not
/// write a newer schema it misreads, so newer versions are refused.
const WAYPOINT: Ledger = Ledger {
    table: "waypoint_store_migrations",
    create: "CREATE TABLE IF NOT EXISTS waypoint_store_migrations (v INTEGER PRIMARY KEY)",
    first: 1,
    migrations: WAYPOINT_MIGRATIONS,
    newer: Newer::Refuse("store "),
};

/// What opening a store checks before anything touches the file: a `store` table another
/// program made, or a store schema newer than this build, is refused.
pub(crate) fn check_open(conn: &Connection) -> Result<(), Failure> {
    check_owner(conn)?;
    WAYPOINT.refuse_newer(conn)
}

/// Applies missing migrations, LangGraph's first, in one transaction (see
/// [`migrate::migrate`]). Refuses, unchanged, a database whose `store` table another program
/// made.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), Failure> {
    migrate::migrate(conn, check_owner, &[&LANGGRAPH, &WAYPOINT])
}

/// Whether every Waypoint store migration has been applied.
pub(crate) fn is_set_up(conn: &Connection) -> Result<bool, Failure> {
    Ok(WAYPOINT.applied(conn)? == Some(WAYPOINT.latest()))
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
fn check_owner(conn: &Connection) -> Result<(), Failure> {
    let tables = |name: &str| migrate::has_table(conn, name);
    if !tables("store")? || tables("waypoint_store_migrations")? {
        return Ok(());
    }
    let mut columns = Vec::new();
    let mut key = Vec::new();
    {
        let mut stmt =
            conn.prepare("SELECT name, pk FROM pragma_table_info('store') ORDER BY pk")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let name: String = r.get(0)?;
            let pk: i64 = r.get(1)?;
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
    Err(Failure::Refused(String::from(
        "the database has a `store` table that neither Waypoint nor LangGraph's SqliteStore \
         created (left untouched): give the store a database file of its own",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DbError;

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
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(versions(&conn, "store_migrations"), vec![0, 1, 2, 3, 4]);
        assert_eq!(
            versions(&conn, "waypoint_store_migrations"),
            vec![1, 2, 3, 4]
        );
    }

    #[test]
    fn a_store_with_unrecorded_columns_still_migrates() {
        let mut conn = Connection::open_in_memory().unwrap();
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
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        conn.execute(
            "INSERT INTO waypoint_store_migrations (v) VALUES (?1)",
            [WAYPOINT_MIGRATIONS.len() as i64 + 1],
        )
        .unwrap();
        let err = migrate(&mut conn).map_err(<waypoint_store::Error as DbError>::from_failure);
        assert!(
            matches!(err, Err(waypoint_store::Error::Backend { .. })),
            "{err:?}"
        );
    }
}
