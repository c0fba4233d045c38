//! Connections, and how async callers use them without blocking a tokio worker.
//!
//! Each connection sits behind its own mutex: one writer (SQLite has one writer at a time
//! anyway) and a few readers. An operation runs on the caller's own thread inside
//! `tokio::task::block_in_place`, which hands the worker's other tasks to another thread for
//! the duration, so nothing crosses threads and no wake-up is paid; on a current-thread
//! runtime, where that is not allowed, it runs on tokio's blocking pool instead. (A dedicated
//! connection thread was measured first: the cross-thread wake-ups cost 10-40 us per
//! operation on a virtual machine, more than the SQL itself.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use rusqlite::Connection;
use tokio::runtime::{Handle, RuntimeFlavor};
use waypoint_checkpoint::{Error, Result};

/// A set of connections; an operation takes whichever is free.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    conns: Arc<Vec<Mutex<Connection>>>,
    next: Arc<AtomicUsize>,
}

impl Pool {
    /// Opens `count` connections with `open`.
    pub(crate) fn open(
        count: usize,
        open: impl Fn() -> Result<Connection> + Send + Sync + Clone + 'static,
    ) -> Result<Self> {
        let conns = (0..count.max(1))
            .map(|_| open().map(Mutex::new))
            .collect::<Result<Vec<_>>>()?;
        Ok(Pool {
            conns: Arc::new(conns),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Runs `f` on a free connection without blocking the async executor.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let this = self.clone();
        let job = move || {
            let mut conn = this.take();
            f(&mut conn)
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

    /// A free connection if there is one, else waits for the next in turn.
    fn take(&self) -> parking_lot::MutexGuard<'_, Connection> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.conns.len();
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
                let passive: rusqlite::Result<(i64, i64, i64)> =
                    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    });
                // Once everything is copied back, empty the WAL so readers are served from the
                // memory-mapped database file instead of reading WAL frames one by one.
                if let Ok((0, log, done)) = passive
                    && log > 0
                    && log == done
                {
                    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
                }
            }
            let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        })
        .map_err(|e| Error::backend("sqlite", e))?;
    Ok(stop)
}
