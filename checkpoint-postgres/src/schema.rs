//! Tables and migrations: one runner for the saver's tables and the store's. Each side's
//! migrations are LangGraph's own, numbered in LangGraph's version table
//! (`checkpoint_migrations`, `store_migrations`) as langgraph-checkpoint-postgres numbers them,
//! then Waypoint's additions in a version table of their own (`waypoint_migrations`,
//! `waypoint_store_migrations`).

use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use sqlx::PgConnection;

use crate::error::Failure;

/// langgraph-checkpoint-postgres's migrations; a migration's version (the row it adds to
/// `checkpoint_migrations`) is its position. Identical text, so either side may run setup.
const LANGGRAPH_MIGRATIONS: &[&[&str]] = &[
    &["CREATE TABLE IF NOT EXISTS checkpoint_migrations (
    v INTEGER PRIMARY KEY
);"],
    &["CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);"],
    &["CREATE TABLE IF NOT EXISTS checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);"],
    &["CREATE TABLE IF NOT EXISTS checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);"],
    &["ALTER TABLE checkpoint_blobs ALTER COLUMN blob DROP not null;"],
    &["SELECT 1;"],
    &[
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_thread_id_idx ON checkpoints(thread_id);",
    ],
    &[
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_blobs_thread_id_idx ON checkpoint_blobs(thread_id);",
    ],
    &[
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_writes_thread_id_idx ON checkpoint_writes(thread_id);",
    ],
    &["ALTER TABLE checkpoint_writes ADD COLUMN IF NOT EXISTS task_path TEXT NOT NULL DEFAULT '';"],
];

/// The body of the head trigger's function (migrations 6 and 10), reading `$table`.
macro_rules! head_trigger_body {
    ($table:literal) => {
        concat!(
            "DECLARE
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
    SELECT checkpoint_id INTO newest FROM ",
            $table,
            "
        WHERE thread_id = NEW.thread_id AND checkpoint_ns = NEW.checkpoint_ns
            AND checkpoint_id <> NEW.checkpoint_id
        ORDER BY checkpoint_id DESC LIMIT 1;
    IF newest > expected THEN
        RAISE EXCEPTION USING ERRCODE = 'WP409', MESSAGE = newest;
    END IF;
    RETURN NEW;
END
"
        )
    };
}

/// Waypoint's additions; a migration's version is its position plus one. Never edit one
/// that has shipped: append a new one.
const WAYPOINT_MIGRATIONS: &[&[&str]] = &[
    &["CREATE TABLE IF NOT EXISTS waypoint_migrations (v INTEGER PRIMARY KEY);"],
    // A thread's history newest first, across its namespaces, without a sort.
    &[
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_checkpoints_thread_id_checkpoint_id_idx ON checkpoints (thread_id, checkpoint_id);",
    ],
    // `list` across threads, newest first.
    &[
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_checkpoints_checkpoint_id_idx ON checkpoints (checkpoint_id);",
    ],
    // `delete_for_runs`.
    &[
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS waypoint_checkpoints_run_id_idx ON checkpoints ((metadata ->> 'run_id')) WHERE metadata ? 'run_id';",
    ],
    // Per-thread leases (single writer per thread); Waypoint's own table, unknown to LangGraph.
    // Unlogged: a lease only matters while its holder's session lives, and a server crash
    // ends every session, so losing the table with it is right; in exchange a lease commit
    // writes no WAL and waits for no disk flush (two of them per run).
    &[
        "CREATE UNLOGGED TABLE IF NOT EXISTS waypoint_thread_leases (
    thread_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);",
    ],
    // Every writer of a checkpoint, Python's LangGraph included, takes a per-namespace turn
    // (a transaction-scoped advisory lock), and a fenced Waypoint put that names the parent
    // it expects to be newest (`waypoint.expected_heads`: new id -> parent, set in the same
    // transaction) is refused when another writer's checkpoint got there first. Under the
    // lock, the trigger's query sees every checkpoint committed before it.
    &[concat!(
        "CREATE OR REPLACE FUNCTION waypoint_checkpoint_head() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
",
        head_trigger_body!("checkpoints"),
        "$fn$;"
    )],
    &[
        "DROP TRIGGER IF EXISTS waypoint_checkpoint_head ON checkpoints;",
        "CREATE TRIGGER waypoint_checkpoint_head BEFORE INSERT ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION waypoint_checkpoint_head();",
    ],
    // Values stored in their row up to a page, compressed with lz4 where the server has it:
    // out of line (TOAST, the default above 2 KB) a 2.6 KB value cost a put a pglz attempt,
    // two chunk rows and their index entries (4 of its 14 WAL records, ~10 us of server
    // time), and a read one more index probe. Every column MAIN: an EXTENDED key column
    // would go out of line instead, alone in a TOAST row. Settings only: nothing is
    // rewritten, rows already stored read as before; larger values still go out of line.
    &[
        "ALTER TABLE checkpoint_blobs ALTER COLUMN thread_id SET STORAGE MAIN,
    ALTER COLUMN checkpoint_ns SET STORAGE MAIN, ALTER COLUMN channel SET STORAGE MAIN,
    ALTER COLUMN version SET STORAGE MAIN, ALTER COLUMN type SET STORAGE MAIN,
    ALTER COLUMN blob SET STORAGE MAIN;",
        "ALTER TABLE checkpoint_writes ALTER COLUMN thread_id SET STORAGE MAIN,
    ALTER COLUMN checkpoint_ns SET STORAGE MAIN, ALTER COLUMN checkpoint_id SET STORAGE MAIN,
    ALTER COLUMN task_id SET STORAGE MAIN, ALTER COLUMN task_path SET STORAGE MAIN,
    ALTER COLUMN channel SET STORAGE MAIN, ALTER COLUMN type SET STORAGE MAIN,
    ALTER COLUMN blob SET STORAGE MAIN;",
        // PostgreSQL 14 and later, built with lz4; else the server's default method stays.
        "DO $$ BEGIN
    EXECUTE 'ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE checkpoint_writes ALTER COLUMN blob SET COMPRESSION lz4';
EXCEPTION WHEN syntax_error OR feature_not_supported THEN NULL;
END $$;",
    ],
    // Where each delta channel's history starts (`queries::put` writes it, the delta history
    // reads it): `{channel: [seed checkpoint id, its version or null]}`. Nullable, no default:
    // adding it rewrites nothing; rows written before it (or by LangGraph) hold NULL.
    &["ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS waypoint_delta_seeds JSONB;"],
    // The head trigger of migration 6, its table named with its schema instead of the
    // function setting its own `search_path`: a function with a `SET` clause saves and
    // restores the setting on every call, and the changed path made the server redo its
    // cached search path for the statement around it (~60 us of a ~330 us put's execute,
    // measured with pgbench on PostgreSQL 15). Its functions are `pg_catalog`'s, which every
    // search path looks in first.
    &[concat!(
        "CREATE OR REPLACE FUNCTION @schema@.waypoint_checkpoint_head() RETURNS trigger
LANGUAGE plpgsql AS $fn$
",
        head_trigger_body!("@schema@.checkpoints"),
        "$fn$;"
    )],
];

/// The newest LangGraph migration this build knows.
pub(crate) const LANGGRAPH_LATEST: i32 = CHECKPOINT_TABLES.migrations[0].latest();

/// The newest Waypoint migration this build knows.
pub(crate) const WAYPOINT_LATEST: i32 = CHECKPOINT_TABLES.migrations[1].latest();

/// The saver's tables.
pub(crate) const CHECKPOINT_TABLES: Tables = Tables {
    migrations: &[
        Migrations {
            table: "checkpoint_migrations",
            first: 0,
            steps: LANGGRAPH_MIGRATIONS,
        },
        Migrations {
            table: "waypoint_migrations",
            first: 1,
            steps: WAYPOINT_MIGRATIONS,
        },
    ],
    owned: &[
        ("checkpoints", "checkpoint_migrations"),
        ("checkpoint_blobs", "checkpoint_migrations"),
        ("checkpoint_writes", "checkpoint_migrations"),
        ("waypoint_thread_leases", "waypoint_migrations"),
    ],
    // "waypoint" in ASCII, whatever the schema (the key the saver has always taken).
    lock: |_| 0x7761_7970_6f69_6e74,
};

/// One numbered list of migrations, recorded in a version table of its own.
pub(crate) struct Migrations {
    /// The version table.
    pub(crate) table: &'static str,
    /// The version of the first entry; each next one is one more.
    pub(crate) first: i32,
    /// Each migration's statements, run in order, one at a time, each idempotent.
    pub(crate) steps: &'static [&'static [&'static str]],
}

impl Migrations {
    /// The newest version of the list.
    pub(crate) const fn latest(&self) -> i32 {
        self.first + self.steps.len() as i32 - 1
    }
}

/// What the saver's or the store's setup creates.
pub(crate) struct Tables {
    /// The migration lists, in the order they run.
    pub(crate) migrations: &'static [Migrations],
    /// The tables setup creates, each with the version table that records it: one found
    /// without its record was made by another program.
    pub(crate) owned: &'static [(&'static str, &'static str)],
    /// The advisory lock key under which one process at a time runs this setup, given the
    /// schema. Each side keeps the key it has always taken, so a process of an earlier
    /// version running setup at the same moment still takes turns with this one.
    pub(crate) lock: fn(Option<&str>) -> i64,
}

/// Where migrations name the schema holding the tables (quoted), so that a trigger writes to
/// this schema's tables whatever the writer's `search_path`.
const SCHEMA_PLACEHOLDER: &str = "@schema@";

/// Creates the schema (if named) and runs every missing migration of `tables`, holding an
/// advisory lock so that processes running setup at once take turns. Refuses, before
/// anything is changed, a schema holding a table of these names that neither Waypoint's nor
/// LangGraph's setup made, and a schema migrated by a newer version.
///
/// On a direct connection (`pooled` is `None`) setup holds a session lock, and a first setup
/// is one transaction (see `run_fresh`); a later one runs its statements outside any
/// transaction: `CREATE INDEX CONCURRENTLY` refuses a transaction. Behind a transaction
/// pooler (`pooled` opens its transactions, see [`PostgresConfig::pooled_begin`]) a session
/// lock could be taken on one server session and released on another, and statements of
/// one setup could run on several: setup is one transaction there, under a transaction lock,
/// all or nothing, and builds its indexes inside it (without `CONCURRENTLY`: writes to the
/// table wait for the build, brief on a new or small table).
///
/// [`PostgresConfig::pooled_begin`]: crate::PostgresConfig
pub(crate) async fn migrate(
    conn: &mut PgConnection,
    schema: Option<&str>,
    pooled: Option<String>,
    tables: &Tables,
    wait: Duration,
) -> Result<(), Failure> {
    let key = (tables.lock)(schema);
    let Some(begin) = pooled else {
        lock(conn, key, wait).await?;
        let done = match fresh(conn, schema, tables).await {
            Ok(true) => run_fresh(conn, schema, tables).await,
            Ok(false) => run_migrations(conn, schema, tables, true).await,
            Err(failure) => Err(failure),
        };
        let unlocked = scalar::<bool>(conn, format!("SELECT pg_advisory_unlock({key})")).await;
        return done.and(unlocked.map(drop));
    };
    // Setup is never limited by the statement timeout.
    let begin = format!("{begin}; SET LOCAL statement_timeout = 0");
    let start = Instant::now();
    loop {
        let mut tx = sqlx::Connection::begin_with(&mut *conn, begin.clone())
            .await
            .map_err(Failure::Driver)?;
        if scalar::<bool>(&mut tx, format!("SELECT pg_try_advisory_xact_lock({key})")).await? {
            run_migrations(&mut tx, schema, tables, false).await?;
            return tx.commit().await.map_err(Failure::Driver);
        }
        tx.rollback().await.map_err(Failure::Driver)?;
        if start.elapsed() > wait {
            return Err(Failure::SetupBusy(wait));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Whether no migration of `tables` has run in the schema yet: none of their migration
/// tables exists there.
async fn fresh(
    conn: &mut PgConnection,
    schema: Option<&str>,
    tables: &Tables,
) -> Result<bool, Failure> {
    // `checked_schema` made the name a plain identifier.
    let prefix = schema.map(|s| format!("\"{s}\".")).unwrap_or_default();
    let absent: Vec<String> = tables
        .migrations
        .iter()
        .map(|m| format!("to_regclass('{prefix}{}') IS NULL", m.table))
        .collect();
    scalar::<bool>(conn, format!("SELECT {}", absent.join(" AND "))).await
}

/// A first setup on a direct connection: one transaction, all or nothing, building its
/// indexes without `CONCURRENTLY`, as behind a pooler. The tables are new and empty, so the
/// builds block no one, and setup makes one commit instead of one per statement, and never
/// waits, as `CONCURRENTLY` does, for every older transaction in the database to end.
async fn run_fresh(
    conn: &mut PgConnection,
    schema: Option<&str>,
    tables: &Tables,
) -> Result<(), Failure> {
    let mut tx = sqlx::Connection::begin(&mut *conn)
        .await
        .map_err(Failure::Driver)?;
    run_migrations(&mut tx, schema, tables, false).await?;
    tx.commit().await.map_err(Failure::Driver)
}

/// Runs `$body` (a future using `$conn: &mut PgConnection`) as it is on a direct connection.
/// Behind a transaction pooler ([`crate::PostgresConfig::transaction_pooler`]) it runs in one
/// transaction opened with the session settings and committed when the body succeeds
/// (rolled back otherwise): the pooler lends one server session for a transaction, so every
/// statement of the body (sqlx's Parse, then Bind and Execute, in two round trips included)
/// finds the same session. A body opening a transaction of its own gets a savepoint.
macro_rules! pinned {
    ($config:expr, $conn:ident, $body:expr) => {
        async {
            let driver =
                |e| $crate::error::DbError::from_failure($crate::error::Failure::Driver(e));
            match $config.pooled_begin() {
                Err(failure) => Err($crate::error::DbError::from_failure(failure)),
                Ok(None) => $body.await,
                Ok(Some(begin)) => {
                    let mut tx = match ::sqlx::Connection::begin_with(&mut *$conn, begin).await {
                        Ok(tx) => tx,
                        Err(e) => return Err(driver(e)),
                    };
                    let done = {
                        let $conn: &mut ::sqlx::PgConnection = &mut tx;
                        $body.await
                    };
                    // After a failed body the rollback's own failure adds nothing.
                    match (done, tx) {
                        (Ok(value), tx) => tx.commit().await.map(|()| value).map_err(driver),
                        (Err(e), tx) => {
                            let _ = tx.rollback().await;
                            Err(e)
                        }
                    }
                }
            }
        }
    };
}
pub(crate) use pinned;

// Every statement runs through these two boxed helpers taking owned SQL, and never through
// `sqlx::raw_sql`: its `async fn execute`, generic over the executor, makes futures the
// compiler cannot prove `Send` (rust-lang/rust#100013), and setup must run from any task.

/// Runs the one statement `sql`, unprepared.
pub(crate) fn execute(conn: &mut PgConnection, sql: String) -> BoxFuture<'_, Result<(), Failure>> {
    async move {
        sqlx::query(&sql)
            .persistent(false)
            .execute(conn)
            .await
            .map(drop)
            .map_err(Failure::Driver)
    }
    .boxed()
}

/// The single value `sql` selects.
pub(crate) fn scalar<T>(conn: &mut PgConnection, sql: String) -> BoxFuture<'_, Result<T, Failure>>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>
        + Send
        + Unpin
        + 'static,
{
    async move {
        sqlx::query_scalar(&sql)
            .persistent(false)
            .fetch_one(conn)
            .await
            .map_err(Failure::Driver)
    }
    .boxed()
}

/// Takes the setup lock by polling. A session blocked inside `pg_advisory_lock` would hold a
/// snapshot that the holder's `CREATE INDEX CONCURRENTLY` waits for: a deadlock.
async fn lock(conn: &mut PgConnection, key: i64, wait: Duration) -> Result<(), Failure> {
    let start = Instant::now();
    loop {
        if scalar::<bool>(conn, format!("SELECT pg_try_advisory_lock({key})")).await? {
            return Ok(());
        }
        if start.elapsed() > wait {
            return Err(Failure::SetupBusy(wait));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Refuses a schema holding one of `tables`' tables without its version table.
async fn refuse_foreign_tables(conn: &mut PgConnection, tables: &Tables) -> Result<(), Failure> {
    for (table, migrations) in tables.owned {
        let foreign = scalar::<bool>(
            conn,
            format!(
                "SELECT to_regclass('{table}') IS NOT NULL AND to_regclass('{migrations}') IS NULL"
            ),
        )
        .await?;
        if foreign {
            return Err(Failure::InvalidConfig(format!(
                "the schema has a `{table}` table that neither Waypoint nor LangGraph created \
                 (no `{migrations}` beside it), left untouched: use another schema"
            )));
        }
    }
    Ok(())
}

/// [`migrate`]'s statements; `concurrently` off, indexes are built without `CONCURRENTLY`
/// (inside a transaction).
async fn run_migrations(
    conn: &mut PgConnection,
    schema: Option<&str>,
    tables: &Tables,
    concurrently: bool,
) -> Result<(), Failure> {
    refuse_foreign_tables(conn, tables).await?;
    if let Some(schema) = schema {
        execute(conn, format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"")).await?;
    }
    let quoted = match schema {
        Some(schema) => format!("\"{schema}\""),
        // The schema unqualified names create in: the first existing one of the search path.
        None => scalar::<Option<String>>(
            conn,
            String::from("SELECT quote_ident(current_schema())"),
        )
        .await?
        .ok_or_else(|| {
            Failure::InvalidConfig(String::from(
                "no schema of the connection's search_path exists: name one with .schema(...)",
            ))
        })?,
    };
    for migrations in tables.migrations {
        apply(conn, migrations, &quoted, concurrently).await?;
    }
    Ok(())
}

/// Runs the migrations of `migrations` after the newest its table records; `schema` (quoted)
/// replaces [`SCHEMA_PLACEHOLDER`]; without `concurrently`, indexes are built without
/// `CONCURRENTLY`. Refuses a schema newer than this build.
async fn apply(
    conn: &mut PgConnection,
    migrations: &Migrations,
    schema: &str,
    concurrently: bool,
) -> Result<(), Failure> {
    let table = migrations.table;
    execute(
        conn,
        format!("CREATE TABLE IF NOT EXISTS {table} (v INTEGER PRIMARY KEY)"),
    )
    .await?;
    let current: Option<i32> = scalar(conn, format!("SELECT max(v) FROM {table}")).await?;
    let known = migrations.latest();
    if let Some(current) = current
        && current > known
    {
        return Err(Failure::InvalidConfig(format!(
            "{table} is at version {current}, newer than this build ({known}); upgrade Waypoint"
        )));
    }
    let first = migrations.first;
    let start = current.map_or(0, |v| (v - first + 1).max(0) as usize);
    for (i, statements) in migrations.steps.iter().enumerate().skip(start) {
        for sql in *statements {
            let mut sql = sql.replace(SCHEMA_PLACEHOLDER, schema);
            if !concurrently {
                sql = sql.replace("CREATE INDEX CONCURRENTLY", "CREATE INDEX");
            }
            execute(conn, sql).await?;
        }
        let version = first + i as i32;
        execute(
            conn,
            format!("INSERT INTO {table} (v) VALUES ({version}) ON CONFLICT DO NOTHING"),
        )
        .await?;
    }
    Ok(())
}
