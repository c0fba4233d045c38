//! Connections, and how async callers use them without blocking a tokio worker.
//!
//! Each connection sits behind its own mutex: one writer (SQLite has one writer at a time
//! anyway) and a few readers. As in the SQLite checkpointer, an operation runs on the caller's
//! own thread inside `tokio::task::block_in_place` (the worker's other tasks move to another
//! thread meanwhile, and no cross-thread wake-up is paid); on a current-thread runtime, where
//! that is not allowed, it runs on tokio's blocking pool instead. File databases also get a
//! background thread that checkpoints the WAL, so commits never pay for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use rusqlite::Connection;
use tokio::runtime::{Handle, RuntimeFlavor};

use super::convert::BACKEND;
use crate::{Error, Result};

/// Where blocking SQLite work may run from the current context.
pub(crate) enum Mode {
    /// On this thread, inside `block_in_place` (multi-thread runtime).
    InPlace,
    /// On tokio's blocking pool (current-thread runtime).
    Blocking,
    /// Directly: not inside a tokio runtime at all.
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
pub(crate) async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match mode() {
        Mode::InPlace => tokio::task::block_in_place(job),
        Mode::Blocking => tokio::task::spawn_blocking(job)
            .await
            .map_err(|e| Error::backend(BACKEND, e))?,
        Mode::Direct => job(),
    }
}

/// A set of connections; an operation takes whichever is free.
#[derive(Clone)]
pub(crate) struct Pool {
    conns: Arc<[Mutex<Connection>]>,
    next: Arc<AtomicUsize>,
}

impl Pool {
    /// A pool of the given connections; there must be at least one.
    pub(crate) fn new(conns: Vec<Connection>) -> Result<Self> {
        if conns.is_empty() {
            return Err(Error::InvalidConfig(String::from(
                "a SQLite pool needs at least one connection",
            )));
        }
        Ok(Pool {
            conns: conns.into_iter().map(Mutex::new).collect(),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Runs `f` on a free connection without blocking the async executor.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let pool = self.clone();
        blocking(move || f(&mut pool.take())).await
    }

    /// A free connection if there is one, else waits for the next in turn. Blocks: call it
    /// only where blocking is allowed (see [`mode`]).
    pub(crate) fn take(&self) -> MutexGuard<'_, Connection> {
        let n = self.conns.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            if let Some(conn) = self.conns[(start + i) % n].try_lock() {
                return conn;
            }
        }
        self.conns[start % n].lock()
    }
}

/// How often the background connection checkpoints the WAL into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// Starts the thread that checkpoints the WAL on `conn` (`PASSIVE`: it never blocks readers
/// or the writer), so that no commit waits for a checkpoint and its fsync. It stops, after a
/// last checkpoint, when the returned sender is dropped.
pub(crate) fn spawn_checkpointer(conn: Connection) -> Result<Sender<()>> {
    let (stop, stopped) = mpsc::channel::<()>();
    thread::Builder::new()
        .name(String::from("waypoint-store-checkpointer"))
        .spawn(move || {
            // Never wait on a lock here: a busy round is simply retried on the next tick.
            let _ = conn.busy_timeout(Duration::ZERO);
            // No TRUNCATE: once a checkpoint is complete the next writer restarts the WAL from
            // its beginning, overwriting blocks the file already has, which costs commits less
            // than growing a truncated file again (`journal_size_limit` caps it after bursts).
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_EVERY) {
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
            let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        })
        .map_err(|e| Error::backend(BACKEND, e))?;
    Ok(stop)
}
