//! The saver's tables and their migrations (the store's are in `store::schema`).

use rusqlite::Connection;

use crate::error::Failure;
use crate::migrate::{self, Ledger, Migration, Newer};

/// The columns and key of `checkpoints`, as migration 1 creates it and 5 rebuilds it.
macro_rules! checkpoints_columns {
    () => {
        "(
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        checkpoint_id TEXT NOT NULL,
        parent_checkpoint_id TEXT,
        type TEXT NOT NULL,
        checkpoint TEXT NOT NULL,
        metadata TEXT NOT NULL,
        run_id TEXT,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
    )"
    };
}

/// The columns and key of `checkpoint_blobs` (migrations 1 and 5).
macro_rules! blobs_columns {
    () => {
        "(
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        channel TEXT NOT NULL,
        version TEXT NOT NULL,
        type TEXT NOT NULL,
        blob BLOB,
        PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
    )"
    };
}

/// The columns and key of `checkpoint_writes` (migrations 1 and 5).
macro_rules! writes_columns {
    () => {
        "(
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
    )"
    };
}

/// The indexes of `checkpoints` (migrations 2 and 5).
macro_rules! checkpoints_indexes {
    () => {
        "CREATE INDEX checkpoints_checkpoint_id_idx ON checkpoints (checkpoint_id);
    CREATE INDEX checkpoints_run_id_idx ON checkpoints (run_id) WHERE run_id IS NOT NULL;"
    };
}

/// Migrations in order; a migration's version is its position plus one. Never edit one that
/// has shipped: append a new one.
const MIGRATIONS: &[Migration] = &[
    // 1: the three tables, shaped like langgraph-checkpoint-postgres's.
    Migration::sql(concat!(
        "CREATE TABLE checkpoints ",
        checkpoints_columns!(),
        ";\n    CREATE TABLE checkpoint_blobs ",
        blobs_columns!(),
        ";\n    CREATE TABLE checkpoint_writes ",
        writes_columns!(),
        ";"
    )),
    // 2: global ordering (list across threads) and delete_for_runs.
    Migration::sql(checkpoints_indexes!()),
    // 3: per-thread leases (single writer per thread); `expires_at` in Unix microseconds.
    Migration::sql(
        "CREATE TABLE waypoint_thread_leases (
        thread_id TEXT PRIMARY KEY,
        token TEXT NOT NULL,
        expires_at INTEGER NOT NULL
    ) WITHOUT ROWID;",
    ),
    // 4: new rows keep `checkpoint` and `metadata` as compact records (BLOBs, see
    // `waypoint_checkpoint::serde::record`); rows of earlier versions keep their JSON text and
    // still read. No statement: the version tells older builds, which cannot read the new
    // rows, to refuse the database.
    Migration::sql(""),
    // 5: the three tables become WITHOUT ROWID: each row lives in its primary key's b-tree,
    // so the range scans of history reads (a thread's checkpoints by id, a channel's stored
    // versions, a range of writes) read rows in place instead of seeking each one in the
    // table by rowid, and a put inserts into one b-tree per row instead of two. Rows are
    // copied as they are; triggers of other programs on these tables are dropped with them.
    Migration::sql(concat!(
        "CREATE TABLE waypoint_new_checkpoints ",
        checkpoints_columns!(),
        " WITHOUT ROWID;
    INSERT INTO waypoint_new_checkpoints (thread_id, checkpoint_ns, checkpoint_id,
        parent_checkpoint_id, type, checkpoint, metadata, run_id)
    SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
        metadata, run_id FROM checkpoints;
    DROP TABLE checkpoints;
    ALTER TABLE waypoint_new_checkpoints RENAME TO checkpoints;
    ",
        checkpoints_indexes!(),
        "
    CREATE TABLE waypoint_new_checkpoint_blobs ",
        blobs_columns!(),
        " WITHOUT ROWID;
    INSERT INTO waypoint_new_checkpoint_blobs (thread_id, checkpoint_ns, channel, version,
        type, blob)
    SELECT thread_id, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs;
    DROP TABLE checkpoint_blobs;
    ALTER TABLE waypoint_new_checkpoint_blobs RENAME TO checkpoint_blobs;
    CREATE TABLE waypoint_new_checkpoint_writes ",
        writes_columns!(),
        " WITHOUT ROWID;
    INSERT INTO waypoint_new_checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id,
        task_id, idx, channel, type, blob, task_path)
    SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob,
        task_path FROM checkpoint_writes;
    DROP TABLE checkpoint_writes;
    ALTER TABLE waypoint_new_checkpoint_writes RENAME TO checkpoint_writes;"
    )),
    // 6: the stored values' versions, without the empty markers: a delta history reads a
    // channel's stored versions (the values its walk may stop at) from this index, where the
    // key's range held one empty marker per step of an appending channel (a 300-step thread:
    // ~60 us of a ~650 us fork near its head went to skipping them). A put adds a row only
    // for a value it stores.
    Migration::sql(
        "CREATE INDEX checkpoint_blobs_stored_idx
    ON checkpoint_blobs (thread_id, checkpoint_ns, channel, version)
    WHERE type <> 'empty' AND blob IS NOT NULL;",
    ),
    // 7: the same index, read without the rows. Naming `blob` made SQLite go from each entry
    // to its row, and a point forked many times stores a snapshot per fork, each a large row
    // a later fork's walk read (a fork near the head of a 300-step thread went from 0.6 to
    // 2.2 ms after 300 forks of its middle). Keyed by `type` too and filtered by it alone,
    // the scan reads the index only; the walk checks the one row it stops at for a value.
    Migration::sql(
        "DROP INDEX checkpoint_blobs_stored_idx;
    CREATE INDEX checkpoint_blobs_stored_idx
    ON checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type)
    WHERE type <> 'empty';",
    ),
];

/// The saver's ledger: `waypoint_migrations`, versions from 1, newer ones refused.
const LEDGER: Ledger = Ledger {
    table: "waypoint_migrations",
    create: "CREATE TABLE IF NOT EXISTS waypoint_migrations (
        v INTEGER PRIMARY KEY,
        applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    )",
    first: 1,
    migrations: MIGRATIONS,
    newer: Newer::Refuse(""),
};

/// The schema version this build writes.
pub(crate) const LATEST: i64 = MIGRATIONS.len() as i64;

/// What opening a saver checks, with or without `auto_setup`: a database another program's
/// `checkpoints` table is in, or whose schema is newer than this build, is refused.
pub(crate) fn check_open(conn: &Connection) -> Result<(), Failure> {
    check_owner(conn)?;
    LEDGER.refuse_newer(conn)
}

/// Refuses a `checkpoints` table Waypoint did not create (LangGraph's `SqliteSaver` writes
/// one of another layout, which Waypoint neither reads nor changes).
fn check_owner(conn: &Connection) -> Result<(), Failure> {
    if LEDGER.applied(conn)?.is_none() && migrate::has_table(conn, "checkpoints")? {
        return Err(Failure::Refused(
            "the database has a `checkpoints` table that Waypoint did not create: LangGraph's \
             SqliteSaver keeps whole checkpoints in one of another layout, which Waypoint does \
             not read (it reads LangGraph's PostgreSQL tables); give Waypoint a file of its own"
                .into(),
        ));
    }
    Ok(())
}

/// Creates or migrates the saver's tables; idempotent, and safe when processes run it at once.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), Failure> {
    migrate::migrate(conn, check_owner, &[&LEDGER])
}

#[cfg(test)]
mod tests {
    use rusqlite::types::Value;

    use super::*;

    /// Every row of the saver's tables, in key order.
    fn rows(conn: &Connection) -> Result<Vec<Vec<Value>>, Failure> {
        let mut out = Vec::new();
        for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
            let mut stmt =
                conn.prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2, 3, 4, 5"))?;
            let width = stmt.column_count();
            let mut found = stmt.query([])?;
            while let Some(row) = found.next()? {
                out.push((0..width).map(|i| row.get(i)).collect::<Result<_, _>>()?);
            }
        }
        Ok(out)
    }

    /// Rows of a version-4 database (text and compact records, empty markers, NULL blobs and
    /// run ids, task paths) read back the same from the WITHOUT ROWID tables of version 5,
    /// with their indexes (and version 6's), and the ledger records every version.
    #[test]
    fn rows_of_version_four_move_to_tables_without_rowid_unchanged() -> Result<(), Failure> {
        let mut conn = Connection::open_in_memory()?;
        let four = Ledger {
            migrations: &MIGRATIONS[..4],
            ..LEDGER
        };
        migrate::migrate(&mut conn, check_owner, &[&four])?;
        conn.execute_batch(
            "INSERT INTO checkpoints VALUES
                ('t', '', '1', NULL, 'msgpack', x'0102', x'03', 'run'),
                ('t', '', '2', '1', 'json', '{\"v\":4}', '{}', NULL),
                ('u', 'sub:1', '1', NULL, 'json', '{}', '{}', NULL);
            INSERT INTO checkpoint_blobs VALUES
                ('t', '', 'messages', '01.5', 'msgpack', x'9100'),
                ('t', '', 'messages', '02.7', 'empty', NULL),
                ('u', 'sub:1', 'x', '1', 'json', '1');
            INSERT INTO checkpoint_writes VALUES
                ('t', '', '1', 'task', 0, 'messages', 'msgpack', x'aa', '~__pregel_pull, n'),
                ('t', '', '1', 'task', -1, '__error__', 'json', '\"e\"', ''),
                ('u', 'sub:1', '1', 'other', 2, 'x', 'json', '2', '');",
        )?;
        let before = rows(&conn)?;
        migrate(&mut conn)?;
        assert_eq!(rows(&conn)?, before);
        for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
            let sql: String = conn.query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )?;
            assert!(sql.ends_with("WITHOUT ROWID"), "{sql}");
        }
        let indexes: Vec<String> = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL
                 ORDER BY name",
            )?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        assert_eq!(
            indexes,
            [
                "checkpoint_blobs_stored_idx",
                "checkpoints_checkpoint_id_idx",
                "checkpoints_run_id_idx"
            ]
        );
        assert_eq!(LEDGER.applied(&conn)?, Some(LATEST));
        Ok(())
    }
}
