//! Connections, and how async callers use them without stalling a tokio worker.
//!
//! Each connection sits behind its own mutex: one writer (SQLite has one writer at a time
//! anyway) and a few readers. A short operation (a few rows) runs right on the calling
//! worker when a connection is free and no other connection holds a lock it needs: it takes
//! less time than handing the worker to another thread would. Anything else, and a short
//! operation that met a lock, runs on the caller's own thread inside
//! `tokio::task::block_in_place`, which hands the worker's other tasks to another thread for
//! the duration; on a current-thread runtime, where that is not allowed, it runs on tokio's
//! blocking pool instead. (A dedicated connection thread was
//! measured first: the cross-thread wake-ups cost 10-40 us per operation on a virtual
//! machine, more than the SQL itself.)

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use rusqlite::Connection;
use tokio::runtime::{Handle, RuntimeFlavor};
use waypoint_checkpoint::{Error, Result};

use crate::busy;
use crate::convert::sqlite_error;

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

/// Whether `e` is SQLite's "database is busy" or "locked".
fn is_busy(e: &Error) -> bool {
    let Error::Backend { source, .. } = e else {
        return false;
    };
    source
        .downcast_ref::<rusqlite::Error>()
        .and_then(rusqlite::Error::sqlite_error_code)
        .is_some_and(|code| {
            matches!(
                code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            )
        })
}

/// The busy handler of a quick attempt: never wait, remember that it did not.
fn give_up(_retries: i32) -> bool {
    GAVE_UP.set(true);
    false
}

impl Pool {
    /// Opens `count` connections with `open`.
    pub(crate) fn open(
        count: usize,
        busy_timeout: Duration,
        open: impl Fn() -> Result<Connection> + Send + Sync + Clone + 'static,
    ) -> Result<Self> {
        let conns = (0..count.max(1))
            .map(|_| open().map(Mutex::new))
            .collect::<Result<Vec<_>>>()?;
        Ok(Pool {
            conns: Arc::new(conns),
            next: Arc::new(AtomicUsize::new(0)),
            busy_timeout,
        })
    }

    /// Runs a short operation (a few rows): first right here on the async worker (see
    /// [`Self::try_here`]), else as [`Self::run`] does, where waiting is allowed. `f` may be
    /// called twice: the first attempt's transaction is rolled back before the second.
    pub(crate) async fn run_quick<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        match self.try_here(&mut f) {
            Some(done) => done,
            None => self.run(f).await,
        }
    }

    /// Runs a short operation right here on the caller's thread, if a connection is free and
    /// no other connection holds a lock it needs (`None` otherwise, its transaction rolled
    /// back): handing an async worker to another thread for the duration costs more than
    /// such an operation.
    pub(crate) fn try_here<T>(
        &self,
        f: &mut impl FnMut(&mut Connection) -> Result<T>,
    ) -> Option<Result<T>> {
        let mut conn = self.conns.iter().find_map(|c| c.try_lock())?;
        GAVE_UP.set(false);
        if let Err(e) = conn.busy_handler(Some(give_up)) {
            return Some(Err(sqlite_error(e)));
        }
        let done = f(&mut conn);
        if let Err(e) = conn.busy_handler(Some(busy::wait)) {
            return Some(Err(sqlite_error(e)));
        }
        // SQLite may also answer "busy" without asking the handler (where waiting could
        // deadlock); either way the attempt is rolled back and run again where it may wait.
        let busy = GAVE_UP.get() || done.as_ref().is_err_and(is_busy);
        (!busy).then_some(done)
    }

    /// Runs `f` on a free connection without blocking the async executor.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let this = self.clone();
        let job = move || {
            let mut conn = this.take();
            busy::with_limit(this.busy_timeout, || f(&mut conn))
        };
        match Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(job)
            }
            Ok(_) => tokio::task::spawn_blocking(job)
                .await
                .map_err(|e| Error::backend("sqlite", e))?,
            // Not inside tokio: the caller's executor is blocked for the operation.
            Err(_) => job(),
        }
    }

    /// The first free connection, else waits for one in turn. Taking the first free one
    /// (not rotating) keeps sequential work on one connection: a connection that sees
    /// another's commit drops its whole page cache at its next transaction.
    fn take(&self) -> parking_lot::MutexGuard<'_, Connection> {
        if let Some(conn) = self.conns.iter().find_map(|c| c.try_lock()) {
            return conn;
        }
        let n = self.conns.len();
        self.conns[self.next.fetch_add(1, Ordering::Relaxed) % n].lock()
    }
}

/// How often the background connection checkpoints the WAL into the database file. Each
/// checkpoint copies every page written since the last one; hot pages (index roots) are
/// written by nearly every commit, so a longer interval copies them once instead of many
/// times (at 100 ms, async super-steps ran 12.6k/s; at 1 s, about 15k/s).
const CHECKPOINT_EVERY: Duration = Duration::from_millis(1000);

/// Starts the thread that checkpoints the WAL (`PASSIVE`: it never blocks readers or the
/// writer) so that commits never pay for it. It stops when the returned sender and all its
/// clones are dropped.
pub(crate) fn spawn_checkpointer(
    open: impl Fn() -> Result<Connection> + Send + 'static,
) -> Result<Sender<()>> {
    let conn = open()?;
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
        .map_err(|e| Error::backend("sqlite", e))?;
    Ok(stop)
}
