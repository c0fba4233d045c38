//! The saver's tables and their migrations (the store's are in `store::schema`).

use rusqlite::Connection;

use crate::error::Failure;
use crate::migrate::{self, Ledger, Migration, Newer};

/// Migrations in order; a migration's version is its position plus one. Never edit one that
/// has shipped: append a new one.
const MIGRATIONS: &[Migration] = &[
    // 1: the three tables, shaped like langgraph-checkpoint-postgres's.
    Migration::sql(
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
    ),
    // 2: global ordering (list across threads) and delete_for_runs.
    Migration::sql(
        "CREATE INDEX checkpoints_checkpoint_id_idx ON checkpoints (checkpoint_id);
    CREATE INDEX checkpoints_run_id_idx ON checkpoints (run_id) WHERE run_id IS NOT NULL;",
    ),
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

/// What opening a saver checks: a database whose schema is newer than this build is refused.
pub(crate) fn check_open(conn: &Connection) -> Result<(), Failure> {
    LEDGER.refuse_newer(conn)
}

/// Refuses a `checkpoints` table Waypoint did not create (LangGraph's `SqliteSaver` writes
/// one of another layout); nothing is changed in a database another program owns.
fn check_owner(conn: &Connection) -> Result<(), Failure> {
    if LEDGER.applied(conn)?.is_none() && migrate::has_table(conn, "checkpoints")? {
        return Err(Failure::Refused(
            "the database has a `checkpoints` table that Waypoint did not create (LangGraph's \
             SqliteSaver writes one of another layout): give Waypoint a file of its own"
                .into(),
        ));
    }
    Ok(())
}

/// Creates or migrates the saver's tables; idempotent, and safe when processes run it at once.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), Failure> {
    migrate::migrate(conn, check_owner, &[&LEDGER])
}
