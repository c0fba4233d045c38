//! Threads that own SQLite connections and run jobs for async callers.
//!
//! A connection never crosses threads: each worker thread opens its own and runs the jobs it
//! receives, so tokio workers never block on SQLite. Callers await a oneshot for the result.
//! Several threads may share one queue (the readers); the first free one takes the next job.
//!
//! Waking a parked thread costs tens of microseconds on a virtual machine, more than a point
//! query, so a worker keeps polling its queue for [`SPIN`] after each job: back-to-back
//! operations then find it awake. Callers simply await their answer; spinning there too was
//! measured to hurt, as the two spinners compete for the same cores.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use rusqlite::Connection;
use waypoint_checkpoint::{Error, Result};

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// How long a worker polls its queue after a job before it parks.
const SPIN: Duration = Duration::from_micros(50);

/// The next job, polling for [`SPIN`] before blocking; `None` once the queue is closed.
fn next_job(queue: &Receiver<Job>) -> Option<Job> {
    let start = Instant::now();
    loop {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) if start.elapsed() < SPIN => std::hint::spin_loop(),
            Err(TryRecvError::Empty) => return queue.recv().ok(),
        }
    }
}

/// A queue served by one or more connection-owning threads.
#[derive(Debug, Clone)]
pub(crate) struct Workers {
    jobs: Sender<Job>,
}

impl Workers {
    /// Starts `threads` threads named `name`, each with the connection `open` makes; fails
    /// if any connection cannot be opened.
    pub(crate) fn spawn(
        name: &str,
        threads: usize,
        open: impl Fn() -> Result<Connection> + Send + Sync + Clone + 'static,
    ) -> Result<Self> {
        let (jobs, queue) = crossbeam_channel::unbounded::<Job>();
        for i in 0..threads.max(1) {
            let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
            let queue: Receiver<Job> = queue.clone();
            let open = open.clone();
            thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    let mut conn = match open() {
                        Ok(conn) => {
                            let _ = ready_tx.send(Ok(()));
                            conn
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    while let Some(job) = next_job(&queue) {
                        // A job never panics by design; if one does, its caller gets an error
                        // (its oneshot is dropped) and the thread keeps serving.
                        let _ = catch_unwind(AssertUnwindSafe(|| job(&mut conn)));
                    }
                })
                .map_err(|e| Error::backend("sqlite", e))?;
            ready_rx
                .recv()
                .map_err(|_| Error::backend("sqlite", "connection thread died while opening"))??;
        }
        Ok(Workers { jobs })
    }

    /// Runs `f` on a worker's connection and returns its result.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let _ = tx.send(f(conn));
        });
        self.jobs
            .send(job)
            .map_err(|_| Error::backend("sqlite", "connection threads have stopped"))?;
        rx.await.map_err(|_| {
            Error::backend(
                "sqlite",
                "a connection thread failed while running the operation",
            )
        })?
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
