//! One writer per thread: a run (or `update_state`) holds the thread's lease while it writes.
//!
//! The lease comes from the checkpointer, so it excludes writers in other processes on the
//! same database too. The holder's own task renews it while the work goes on, a timer polled
//! beside the work ([`LeaseGuard::hold`]): a node may await longer than the lease's ttl. No
//! task is spawned and no thread woken per run (a spawned renewer's start and abort cost more
//! than a short run's steps). A node that blocks its thread past the ttl blocks the renewal
//! too, as it blocks the run. If the process dies, the lease expires. Every write of the
//! run goes through [`Fenced`], which proves in the same atomic step that the lease still
//! holds: a run paused past its lease while another run took the thread fails with
//! `Conflict` at its next write and writes nothing.
//!
//! A lease whose release failed (the server was away when the run ended) is kept as an
//! orphan: released again in the background until it lapses, and at once when this process
//! claims the same thread again, so a failed run does not lock its own client out.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use waypoint_checkpoint::{CheckpointSaver, Fenced, Lease};

use crate::error::{Error, Result};

/// How long a lease lasts without renewal; a killed process holds its thread this long.
pub const LEASE_TTL: Duration = Duration::from_secs(30);

/// A held lease, renewed while work runs under [`LeaseGuard::hold`], until released; dropped
/// without a release (a cancelled run), it lapses after its ttl.
pub(crate) struct LeaseGuard {
    saver: Arc<dyn CheckpointSaver>,
    /// The claim as first granted: thread and token never change with renewals.
    granted: Lease,
    /// The claim as last renewed.
    lease: Mutex<Lease>,
    ttl: Duration,
}

/// One lease whose release failed.
type Orphan = (Arc<dyn CheckpointSaver>, Lease);

/// Leases this process failed to release, by thread id.
static ORPHANS: LazyLock<Mutex<HashMap<String, Vec<Orphan>>>> = LazyLock::new(Mutex::default);

/// The orphans, whatever a panicking holder left behind.
fn orphans() -> MutexGuard<'static, HashMap<String, Vec<Orphan>>> {
    ORPHANS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LeaseGuard {
    /// Claims `thread_id` for `ttl` at a time; `Error::Conflict` if another writer holds it
    /// after `wait`. `None` when the saver has no leases.
    #[tracing::instrument(name = "lease", level = "debug", skip_all,
        fields(thread_id = thread_id, conflicts = tracing::field::Empty))]
    pub(crate) async fn acquire(
        saver: &Arc<dyn CheckpointSaver>,
        thread_id: &str,
        wait: Option<Duration>,
        ttl: Duration,
    ) -> Result<Option<LeaseGuard>> {
        if !saver.capabilities().leases {
            return Ok(None);
        }
        release_orphans(thread_id).await;
        let deadline = wait.map(|w| Instant::now() + w);
        let mut backoff = Duration::from_millis(5);
        let mut conflicts = 0u32;
        let lease = loop {
            match saver.acquire_lease(thread_id, ttl).await {
                Ok(lease) => break lease,
                Err(waypoint_checkpoint::Error::Conflict(_))
                    if deadline.is_some_and(|d| Instant::now() + backoff < d) =>
                {
                    // How long a run waited for another is its span's time; this counts tries.
                    conflicts += 1;
                    tracing::Span::current().record("conflicts", conflicts);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(200));
                }
                // The holder may be this process's own lease whose release failed moments
                // ago (a server still loading its data after a restart): release it again.
                Err(waypoint_checkpoint::Error::Conflict(_))
                    if has_orphans(thread_id) && conflicts < 20 =>
                {
                    conflicts += 1;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(200));
                    release_orphans(thread_id).await;
                }
                Err(waypoint_checkpoint::Error::Conflict(_)) => {
                    return Err(Error::Conflict(format!(
                        "thread `{thread_id}` is being written by another run; retry when it \
                         ends, or set RunConfig::wait_for_thread to wait. A graph run inside a \
                         node of that run is its subgraph only on the node's own task (not in \
                         a task the node spawned), or with Context::call"
                    )));
                }
                Err(err) => return Err(err.into()),
            }
        };
        Ok(Some(LeaseGuard {
            saver: Arc::clone(saver),
            granted: lease.clone(),
            lease: Mutex::new(lease),
            ttl,
        }))
    }

    /// Runs `work` while renewing `lease` (when there is one) every third of its ttl, in the
    /// caller's task.
    pub(crate) async fn hold<F: Future>(lease: Option<&Self>, work: F) -> F::Output {
        let Some(lease) = lease else {
            return work.await;
        };
        let work = std::pin::pin!(work);
        let renewing = std::pin::pin!(lease.renew());
        match futures::future::select(work, renewing).await {
            futures::future::Either::Left((output, _)) => output,
            // Lost: the work goes on unrenewed, and its next fenced write fails.
            futures::future::Either::Right(((), work)) => work.await,
        }
    }

    /// Renews the lease every third of its ttl; ends only when another writer took it.
    async fn renew(&self) {
        loop {
            tokio::time::sleep(self.ttl / 3).await;
            let held = self.current();
            match self.saver.renew_lease(&held, self.ttl).await {
                Ok(renewed) => *self.lease.lock().unwrap_or_else(|p| p.into_inner()) = renewed,
                // Lost (taken over after expiring): the run's next fenced write fails with
                // `Conflict`. A transient error is retried next tick.
                Err(waypoint_checkpoint::Error::Conflict(_)) => {
                    tracing::warn!(
                        thread_id = %held.thread_id,
                        "lease lost: another run took the thread; this run's next write fails"
                    );
                    return;
                }
                Err(error) => tracing::warn!(
                    thread_id = %held.thread_id,
                    %error,
                    "lease renewal failed; retrying"
                ),
            }
        }
    }

    /// The claim as last renewed.
    fn current(&self) -> Lease {
        self.lease
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The saver whose writes prove this lease still holds the thread.
    pub(crate) fn fenced(&self) -> Arc<dyn CheckpointSaver> {
        Arc::new(Fenced::new(Arc::clone(&self.saver), self.granted.clone()))
    }

    /// Gives the lease up. A release that fails (the server is away) is retried in the
    /// background, and before this process next claims the thread.
    pub(crate) async fn release(self) {
        let lease = self.current();
        if let Err(error) = self.saver.release_lease(&lease).await {
            tracing::warn!(
                thread_id = %lease.thread_id,
                %error,
                "lease release failed; retrying in the background until it lapses"
            );
            orphan(Arc::clone(&self.saver), lease);
        }
    }
}

/// Keeps a lease whose release failed, and retries the release until it succeeds or the
/// lease lapses (after that, nobody is kept out by it).
fn orphan(saver: Arc<dyn CheckpointSaver>, lease: Lease) {
    orphans()
        .entry(lease.thread_id.clone())
        .or_default()
        .push((Arc::clone(&saver), lease.clone()));
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
            if !is_orphan(&lease) {
                return; // released when this process claimed the thread again
            }
            if saver.release_lease(&lease).await.is_ok() || SystemTime::now() >= lease.expires_at {
                forget(&lease);
                return;
            }
        }
    });
}

/// Whether this process holds a lease on `thread_id` whose release failed.
fn has_orphans(thread_id: &str) -> bool {
    orphans().contains_key(thread_id)
}

fn is_orphan(lease: &Lease) -> bool {
    orphans()
        .get(&lease.thread_id)
        .is_some_and(|held| held.iter().any(|(_, l)| l.token == lease.token))
}

fn forget(lease: &Lease) {
    let mut orphans = orphans();
    if let Some(held) = orphans.get_mut(&lease.thread_id) {
        held.retain(|(_, l)| l.token != lease.token);
        if held.is_empty() {
            orphans.remove(&lease.thread_id);
        }
    }
}

/// Releases this process's orphaned leases on `thread_id`; those still failing stay.
async fn release_orphans(thread_id: &str) {
    let held = orphans().remove(thread_id).unwrap_or_default();
    for (saver, lease) in held {
        // Releasing never frees another holder's claim: the token must match.
        if saver.release_lease(&lease).await.is_err() && SystemTime::now() < lease.expires_at {
            orphans()
                .entry(lease.thread_id.clone())
                .or_default()
                .push((saver, lease));
        }
    }
}
