//! The connections of a database, shared by the saver and the store, and how async callers
//! use them without stalling a tokio worker.
//!
//! A [`Database`] is one writer connection (SQLite has one writer at a time anyway), a few
//! reader connections and, for a file, a background connection that checkpoints the WAL;
//! every connection is set up here, the same way for the saver and the store: the busy
//! handler of [`crate::busy`], WAL, `synchronous`, the page cache and the memory map.
//!
//! Each connection sits behind its own mutex. A short operation (a few rows) runs right on
//! the calling worker when a connection is free and no other connection holds a lock it
//! needs: it takes less time than handing the worker to another thread would. Anything else,
//! and a short operation that met a lock, runs on the caller's own thread inside
//! `tokio::task::block_in_place`, which hands the worker's other tasks to another thread for
//! the duration; on a current-thread runtime, where that is not allowed, it runs on tokio's
//! blocking pool instead. (A dedicated connection thread was measured first: the
//! cross-thread wake-ups cost 10-40 us per operation on a virtual machine, more than the SQL
//! itself.)

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use parking_lot::{Mutex, MutexGuard};
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde_json::Value;
use tokio::runtime::{Handle, RuntimeFlavor};
use waypoint_checkpoint::raw::json_contains;
use waypoint_checkpoint::serde::record;

use crate::busy;
use crate::config::{SqliteConfig, Target};
use crate::error::{DbError, Failure};

/// A check a connection must pass before anything writes to the file (not even the switch to
/// WAL), so that a database that is refused is left byte for byte as it was.
pub(crate) type Check = fn(&Connection) -> Result<(), Failure>;

/// Name of the SQL function that tests JSON containment (the saver's metadata filters; a
/// compact metadata record is read as its JSON).
pub(crate) const CONTAINS_FN: &str = "waypoint_json_contains";

/// How often the background connection checkpoints the WAL into the database file. Each
/// checkpoint copies every page written since the last one; hot pages (index roots) are
/// written by nearly every commit, so a longer interval copies them once instead of many
/// times (at 100 ms, async super-steps ran 12.6k/s; at 1 s, about 15k/s).
const CHECKPOINT_EVERY: Duration = Duration::from_millis(1000);

/// The connections of one database; clones share them.
#[derive(Debug, Clone)]
pub(crate) struct Database {
    /// The one writer connection.
    pub(crate) writer: Pool,
    /// Reader connections (the writer's pool for an in-memory database).
    pub(crate) readers: Pool,
    /// Keeps the WAL checkpointer running while any clone lives.
    _checkpointer: Option<Sender<()>>,
    /// The settings the connections were opened with.
    pub(crate) config: Arc<SqliteConfig>,
}

impl Database {
    /// Opens (creating if needed) the database `config` names; `check` runs on the first
    /// connection before anything is written to the file.
    pub(crate) async fn open(config: SqliteConfig, check: Check) -> Result<Self, Failure> {
        let config = Arc::new(config);
        blocking(move || Self::open_blocking(config, check)).await
    }

    fn open_blocking(config: Arc<SqliteConfig>, check: Check) -> Result<Self, Failure> {
        let timeout = config.busy_timeout;
        let open = |check: Option<Check>, cache_kib: u32| {
            busy::with_limit(timeout, || open_connection(&config, check, cache_kib))
                .map_err(|f| f.opening(config.database_file()))
        };
        // Every connection keeps a 16 MiB page cache. The writer's is never dropped by this
        // process's commits and short reads run on it when it is idle (a store get of 10k
        // items took 5.2 us with it, 6.0 us with 2 MiB). Readers serve the long scans: with
        // 1 MiB, a filtered store search over 10k items took 4.8-6.1 ms against 2.0-2.4 ms with
        // 16 MiB (`waypoint bench --quick --only store`, three runs each); checkpoint puts,
        // gets and lists were no different.
        let writer = Pool::new(vec![open(Some(check), 16 << 10)?], timeout);
        let (readers, checkpointer) = match config.target {
            Target::File(_) => {
                let readers = (0..config.readers.max(1))
                    .map(|_| open(None, 16 << 10))
                    .collect::<Result<Vec<_>, _>>()?;
                let checkpointer = spawn_checkpointer(open(None, 1024)?)?;
                (Pool::new(readers, timeout), Some(checkpointer))
            }
            // A private in-memory database exists on one connection only, without a WAL.
            Target::Memory => (writer.clone(), None),
        };
        Ok(Database {
            writer,
            readers,
            _checkpointer: checkpointer,
            config,
        })
    }
}

impl Database {
    /// Runs a short read (a few rows): on the writer's connection when it is idle, since its
    /// page cache is the one this process's commits leave warm (a reader drops its cache at
    /// its first read after any commit), else on a reader.
    pub(crate) async fn read<T: Send + 'static, E: DbError>(
        &self,
        mut f: impl FnMut(&mut Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E> {
        match self.writer.try_here(&mut f) {
            Some(done) => done,
            None => self.readers.run_quick(f).await,
        }
    }
}

/// A set of connections; an operation takes whichever is free.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    conns: Arc<Vec<Mutex<Connection>>>,
    next: Arc<AtomicUsize>,
    /// The longest an operation waits for a lock another connection holds.
    busy_timeout: Duration,
}

thread_local! {
    /// Set when a quick attempt met a lock held by another connection.
    static GAVE_UP: Cell<bool> = const { Cell::new(false) };
}

/// The busy handler of a quick attempt: never wait, remember that it did not.
fn give_up(_retries: i32) -> bool {
    GAVE_UP.set(true);
    false
}

impl Pool {
    /// A pool of `conns` (at least one).
    fn new(conns: Vec<Connection>, busy_timeout: Duration) -> Self {
        Pool {
            conns: Arc::new(conns.into_iter().map(Mutex::new).collect()),
            next: Arc::new(AtomicUsize::new(0)),
            busy_timeout,
        }
    }

    /// Runs a short operation (a few rows): first right here on the async worker (see
    /// [`Self::try_here`]), else as [`Self::run`] does, where waiting is allowed. `f` may be
    /// called twice: the first attempt's transaction is rolled back before the second.
    pub(crate) async fn run_quick<T: Send + 'static, E: DbError>(
        &self,
        mut f: impl FnMut(&mut Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E> {
        match self.try_here(&mut f) {
            Some(done) => done,
            None => self.run(f).await,
        }
    }

    /// Runs a short operation right here on the caller's thread, if a connection is free and
    /// no other connection holds a lock it needs (`None` otherwise, its transaction rolled
    /// back): handing an async worker to another thread for the duration costs more than
    /// such an operation.
    pub(crate) fn try_here<T, E: DbError>(
        &self,
        f: &mut impl FnMut(&mut Connection) -> Result<T, E>,
    ) -> Option<Result<T, E>> {
        let mut conn = self.conns.iter().find_map(|c| c.try_lock())?;
        GAVE_UP.set(false);
        if let Err(e) = conn.busy_handler(Some(give_up)) {
            return Some(Err(E::from_failure(Failure::from(e))));
        }
        let done = f(&mut conn);
        if let Err(e) = conn.busy_handler(Some(busy::wait)) {
            return Some(Err(E::from_failure(Failure::from(e))));
        }
        // SQLite may also answer "busy" without asking the handler (where waiting could
        // deadlock); either way the attempt is rolled back and run again where it may wait.
        let busy = GAVE_UP.get() || done.as_ref().is_err_and(DbError::is_busy);
        (!busy).then_some(done)
    }

    /// Runs `f` on a free connection without blocking the async executor.
    pub(crate) async fn run<T: Send + 'static, E: DbError>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E> {
        let this = self.clone();
        blocking(move || this.with(f)).await
    }

    /// Runs `f` on a free connection, waiting for one, and for other connections' locks up to
    /// the busy timeout. Blocks: call it only where blocking is allowed (see [`mode`]).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> T {
        let mut conn = self.take();
        busy::with_limit(self.busy_timeout, || f(&mut conn))
    }

    /// The first free connection, else waits for one in turn. Taking the first free one
    /// (not rotating) keeps sequential work on one connection: a connection that sees
    /// another's commit drops its whole page cache at its next transaction.
    fn take(&self) -> MutexGuard<'_, Connection> {
        if let Some(conn) = self.conns.iter().find_map(|c| c.try_lock()) {
            return conn;
        }
        let n = self.conns.len();
        self.conns[self.next.fetch_add(1, Ordering::Relaxed) % n].lock()
    }
}

/// Where blocking SQLite work may run from the current context.
pub(crate) enum Mode {
    /// On this thread, inside `block_in_place` (multi-thread runtime).
    InPlace,
    /// On tokio's blocking pool (current-thread runtime).
    Blocking,
    /// Directly: not inside a tokio runtime at all (the caller's executor is blocked).
    Direct,
}

/// The mode for the calling context.
pub(crate) fn mode() -> Mode {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => Mode::InPlace,
        Ok(_) => Mode::Blocking,
        Err(_) => Mode::Direct,
    }
}

/// Runs blocking `job` without stalling the async executor.
pub(crate) async fn blocking<T: Send + 'static, E: DbError>(
    job: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, E> {
    match mode() {
        Mode::InPlace => tokio::task::block_in_place(job),
        Mode::Blocking => tokio::task::spawn_blocking(job)
            .await
            .map_err(|e| E::from_failure(Failure::Other(Box::new(e))))?,
        Mode::Direct => job(),
    }
}

/// Opens and prepares one connection: `check` (if any) before anything is written, then WAL,
/// the pragmas, a page cache of `cache_kib` KiB, the statement cache and the containment
/// function.
fn open_connection(
    config: &SqliteConfig,
    check: Option<Check>,
    cache_kib: u32,
) -> Result<Connection, Failure> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let mut conn = match &config.target {
        Target::File(path) => Connection::open_with_flags(path, flags),
        Target::Memory => Connection::open_in_memory(),
    }?;
    conn.busy_handler(Some(busy::wait))?;
    // Plans must not depend on bound values: the bundled SQLite has STAT4, which otherwise
    // marks statements with an equality prefix plus ORDER BY (latest checkpoint, pending
    // writes, a namespace scan) for recompilation on every rebind, and recompiling costs more
    // than the query.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    conn.set_prepared_statement_cache_capacity(64);
    if let Some(check) = check {
        check(&conn)?;
    }
    if matches!(config.target, Target::File(_)) {
        // Switching a new file to WAL needs it to itself, and SQLite answers "busy" at once
        // rather than through the busy handler when another process is opening it too (two
        // processes opening one new file failed 2 runs in 3): retried until the timeout.
        let deadline = Instant::now() + config.busy_timeout;
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)) {
                Err(e)
                    if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                        && Instant::now() < deadline =>
                {
                    thread::sleep(Duration::from_millis(5));
                }
                done => break done?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Failure::Other(
                format!("could not enable WAL (journal_mode={mode})").into(),
            ));
        }
    }
    // Commits in WAL mode need no fsync with synchronous=NORMAL (a power loss may drop the
    // last commits, never corrupt) unless `fsync_commits` asks for FULL. Reads come from a
    // memory map instead of a pread per page; the WAL is checkpointed by a background
    // connection (see `spawn_checkpointer`), so commits never wait for the checkpoint's
    // fsync; rows are deleted explicitly, so no foreign keys.
    let synchronous = if config.fsync_commits {
        "FULL"
    } else {
        "NORMAL"
    };
    conn.execute_batch(&format!(
        "PRAGMA synchronous={synchronous}; PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY;
         PRAGMA cache_size=-{cache_kib}; PRAGMA mmap_size=268435456;
         PRAGMA wal_autocheckpoint=0; PRAGMA journal_size_limit=67108864;"
    ))?;
    conn.create_scalar_function(
        CONTAINS_FN,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let doc: Value = match ctx.get_raw(0) {
                ValueRef::Blob(bytes) if record::is_compact(bytes) => Value::Object(
                    record::decode_metadata(bytes)
                        .map_err(|e| rusqlite::Error::UserFunctionError(Box::new(e)))?
                        .to_json(),
                ),
                raw => serde_json::from_str(raw.as_str()?)
                    .map_err(|e| rusqlite::Error::UserFunctionError(Box::new(e)))?,
            };
            // The filter is the same for every row of a statement: parse it once.
            let pattern = ctx.get_or_create_aux(1, |v| -> Result<Value, serde_json::Error> {
                serde_json::from_str(v.as_str().unwrap_or("null"))
            })?;
            Ok(json_contains(&doc, &pattern))
        },
    )?;
    Ok(conn)
}

/// Starts the thread that checkpoints the WAL on `conn` (`PASSIVE`: it never blocks readers
/// or the writer) so that commits never pay for it. It stops, after a last checkpoint, when
/// the returned sender and all its clones are dropped.
fn spawn_checkpointer(conn: Connection) -> Result<Sender<()>, Failure> {
    let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
    thread::Builder::new()
        .name("waypoint-sqlite-checkpointer".into())
        .spawn(move || {
            // Never wait on a lock here: a busy round is simply retried on the next tick.
            let _ = conn.busy_timeout(Duration::ZERO);
            while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(CHECKPOINT_EVERY)
            {
                // No TRUNCATE: once a checkpoint is complete the next writer restarts the WAL
                // from its beginning, overwriting blocks the file already has, which costs
                // commits less than growing a truncated file again (`journal_size_limit` caps
                // it after bursts).
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
            let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        })
        .map_err(|e| Failure::Other(Box::new(e)))?;
    Ok(stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsync_commits_sets_synchronous_full() -> Result<(), Failure> {
        let dir = tempfile::tempdir().map_err(|e| Failure::Other(Box::new(e)))?;
        let path = dir.path().join("sync.db");
        for (on, want) in [(false, 1), (true, 2)] {
            let conn = open_connection(&SqliteConfig::file(&path).fsync_commits(on), None, 1024)?;
            let level: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
            assert_eq!(level, want, "fsync_commits({on})");
        }
        Ok(())
    }
}
