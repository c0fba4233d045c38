//! Threads that own SQLite connections and run jobs for async callers.
//!
//! A connection never crosses threads: each worker thread opens its own and runs the jobs it
//! receives, so tokio workers never block on SQLite. Callers await a oneshot for the result.
//! Several threads may share one queue (the readers); the first free one takes the next job.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread;

use crossbeam_channel::{Receiver, Sender};
use rusqlite::Connection;
use waypoint_checkpoint::{Error, Result};

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

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
                    for job in queue {
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
