//! One writer per thread: a run (or `update_state`) holds the thread's lease while it writes.
//!
//! The lease comes from the checkpointer, so it excludes writers in other processes on the
//! same database too. A background task renews it while the run goes on (a node may take
//! longer than the lease's ttl); if the process dies, the lease expires.

use std::sync::Arc;
use std::time::{Duration, Instant};

use waypoint_checkpoint::{CheckpointSaver, Lease};

use crate::{Error, Result};

/// How long a lease lasts without renewal; a killed process holds its thread this long.
pub const LEASE_TTL: Duration = Duration::from_secs(30);

/// A held lease, renewed in the background until released.
pub(crate) struct LeaseGuard {
    saver: Arc<dyn CheckpointSaver>,
    lease: Arc<tokio::sync::Mutex<Lease>>,
    renewer: tokio::task::JoinHandle<()>,
}

impl LeaseGuard {
    /// Claims `thread_id`; `Error::Conflict` if another writer holds it after `wait`.
    /// `None` when the saver has no leases.
    pub(crate) async fn acquire(
        saver: &Arc<dyn CheckpointSaver>,
        thread_id: &str,
        wait: Option<Duration>,
    ) -> Result<Option<LeaseGuard>> {
        if !saver.capabilities().leases {
            return Ok(None);
        }
        let deadline = wait.map(|w| Instant::now() + w);
        let mut backoff = Duration::from_millis(5);
        let lease = loop {
            match saver.acquire_lease(thread_id, LEASE_TTL).await {
                Ok(lease) => break lease,
                Err(waypoint_checkpoint::Error::Conflict(_))
                    if deadline.is_some_and(|d| Instant::now() + backoff < d) =>
                {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(200));
                }
                Err(waypoint_checkpoint::Error::Conflict(_)) => {
                    return Err(Error::Conflict(format!(
                        "thread `{thread_id}` is being written by another run; wait for it, \
                         or set RunConfig::wait_for_thread"
                    )));
                }
                Err(err) => return Err(err.into()),
            }
        };
        let lease = Arc::new(tokio::sync::Mutex::new(lease));
        let renewer = tokio::spawn({
            let (saver, lease) = (Arc::clone(saver), Arc::clone(&lease));
            async move {
                loop {
                    tokio::time::sleep(LEASE_TTL / 3).await;
                    let mut held = lease.lock().await;
                    match saver.renew_lease(&held, LEASE_TTL).await {
                        Ok(renewed) => *held = renewed,
                        // Lost (taken over after expiring): nothing more to renew. A
                        // transient error is retried at the next tick.
                        Err(waypoint_checkpoint::Error::Conflict(_)) => return,
                        Err(_) => {}
                    }
                }
            }
        });
        Ok(Some(LeaseGuard {
            saver: Arc::clone(saver),
            lease,
            renewer,
        }))
    }

    /// Stops renewing and gives the lease up.
    pub(crate) async fn release(self) -> Result<()> {
        self.renewer.abort();
        let lease = self.lease.lock().await.clone();
        Ok(self.saver.release_lease(&lease).await?)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        // A guard dropped without `release` (a cancelled run) stops renewing, so the lease
        // expires after its ttl.
        self.renewer.abort();
    }
}
