//! Per-thread leases: one live claim per thread, expiry, renewal, release, races.
//!
//! Each case passes without running on a backend whose `capabilities()` does not declare
//! `leases`. Expiry cases use a short ttl and sleep a little longer than it.

use std::time::{Duration, Instant};

use super::*;
use crate::{Error, Lease};

/// Long enough never to lapse during a case.
const LONG: Duration = Duration::from_secs(60);
/// Short enough to wait out.
const SHORT: Duration = Duration::from_millis(200);
/// A little longer than [`SHORT`].
const PAST_SHORT: Duration = Duration::from_millis(300);

fn is_conflict<T>(r: &Result<T>) -> bool {
    matches!(r, Err(Error::Conflict(_)))
}

fn is_invalid<T>(r: &Result<T>) -> bool {
    matches!(r, Err(Error::InvalidConfig(_)))
}

/// A lease on a thread (with `SHORT` ttl) that has since lapsed, unrenewed.
async fn lapsed(saver: &dyn CheckpointSaver, t: &str) -> Result<Lease> {
    let lease = saver.acquire_lease(t, SHORT).await?;
    tokio::time::sleep(PAST_SHORT).await;
    Ok(lease)
}

/// While a lease is live, a second claim on the thread is a `Conflict`.
pub async fn lease_excludes_second_claim(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let lease = saver.acquire_lease(&t, LONG).await?;
    assert_eq!(lease.thread_id, t);
    assert!(!lease.token.is_empty());
    assert!(lease.expires_at > std::time::SystemTime::now() + LONG / 2);
    let second = saver.acquire_lease(&t, LONG).await;
    assert!(is_conflict(&second), "second claim: {second:?}");
    // The holder's own second claim conflicts too: a lease is not re-entrant.
    assert!(is_conflict(&saver.acquire_lease(&t, SHORT).await));
    Ok(())
}

/// After a release the thread can be claimed again, with a new token; the released lease
/// can no longer be renewed, and releasing it again frees nothing.
pub async fn lease_release_allows_next(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let first = saver.acquire_lease(&t, LONG).await?;
    saver.release_lease(&first).await?;
    let second = saver.acquire_lease(&t, LONG).await?;
    assert_ne!(first.token, second.token);
    assert!(is_conflict(&saver.renew_lease(&first, LONG).await));
    saver.release_lease(&first).await?;
    assert!(is_conflict(&saver.acquire_lease(&t, LONG).await));
    saver.release_lease(&second).await?;
    // Releasing twice is a no-op.
    saver.release_lease(&second).await?;
    saver.acquire_lease(&t, LONG).await?;
    Ok(())
}

/// A lease nobody renews expires and the thread can be claimed again (a killed process's
/// lease does not block the thread forever).
pub async fn lease_expires(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let start = Instant::now();
    let first = saver.acquire_lease(&t, SHORT).await?;
    let early = saver.acquire_lease(&t, SHORT).await;
    // On a very slow machine the first lease may legitimately have lapsed already.
    assert!(
        is_conflict(&early) || (early.is_ok() && start.elapsed() >= SHORT),
        "claim before expiry: {early:?}"
    );
    if early.is_err() {
        tokio::time::sleep(PAST_SHORT.saturating_sub(start.elapsed())).await;
        let next = saver.acquire_lease(&t, LONG).await?;
        assert_ne!(next.token, first.token);
    }
    Ok(())
}

/// Renewing moves the expiry later and keeps the token; a renewed lease outlives its
/// original ttl.
pub async fn lease_renew_extends(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let lease = saver.acquire_lease(&t, SHORT).await?;
    let renewed = saver.renew_lease(&lease, LONG).await?;
    assert_eq!(renewed.thread_id, lease.thread_id);
    assert_eq!(renewed.token, lease.token);
    assert!(renewed.expires_at > lease.expires_at);
    tokio::time::sleep(PAST_SHORT).await;
    assert!(is_conflict(&saver.acquire_lease(&t, LONG).await));
    // Renewing the renewed lease works as well, and so does its release.
    let again = saver.renew_lease(&renewed, LONG).await?;
    saver.release_lease(&again).await?;
    saver.acquire_lease(&t, LONG).await?;
    Ok(())
}

/// A lease that expired and was taken over cannot be renewed: its holder must stop.
pub async fn lease_renew_after_takeover_conflicts(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let old = lapsed(saver, &t).await?;
    let new = saver.acquire_lease(&t, LONG).await?;
    assert_ne!(old.token, new.token);
    let renewed = saver.renew_lease(&old, LONG).await;
    assert!(is_conflict(&renewed), "renewing a lost lease: {renewed:?}");
    // The new holder is unaffected.
    saver.renew_lease(&new, LONG).await?;
    assert!(is_conflict(&saver.acquire_lease(&t, LONG).await));
    Ok(())
}

/// Releasing a lease that was taken over is a no-op: the new holder keeps the thread.
pub async fn release_of_lost_lease_keeps_new_holder(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let old = lapsed(saver, &t).await?;
    let new = saver.acquire_lease(&t, LONG).await?;
    saver.release_lease(&old).await?;
    assert!(is_conflict(&saver.acquire_lease(&t, LONG).await));
    saver.renew_lease(&new, LONG).await?;
    // A forged lease naming the thread with another token frees nothing either.
    let forged = Lease {
        token: Lease::new_token(),
        ..new.clone()
    };
    saver.release_lease(&forged).await?;
    assert!(is_conflict(&saver.renew_lease(&forged, LONG).await));
    assert!(is_conflict(&saver.acquire_lease(&t, LONG).await));
    saver.release_lease(&new).await?;
    saver.acquire_lease(&t, LONG).await?;
    Ok(())
}

/// Leases on different threads are independent: claiming, renewing and releasing one
/// never touches another.
pub async fn leases_are_per_thread(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let (a, b) = (thread(), thread());
    let on_a = saver.acquire_lease(&a, LONG).await?;
    let on_b = saver.acquire_lease(&b, LONG).await?;
    assert_ne!(on_a.token, on_b.token);
    // A lease presented for another thread is not that thread's lease.
    let misdirected = Lease {
        thread_id: b.clone(),
        ..on_a.clone()
    };
    assert!(is_conflict(&saver.renew_lease(&misdirected, LONG).await));
    saver.release_lease(&misdirected).await?;
    assert!(is_conflict(&saver.acquire_lease(&b, LONG).await));
    saver.release_lease(&on_a).await?;
    assert!(is_conflict(&saver.acquire_lease(&b, LONG).await));
    saver.renew_lease(&on_b, LONG).await?;
    saver.acquire_lease(&a, LONG).await?;
    Ok(())
}

/// Of 8 claims on one thread made at once, exactly one wins; the others are `Conflict`.
pub async fn concurrent_acquires_one_wins(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let claims = (0..8).map(|_| saver.acquire_lease(&t, LONG));
    let results = futures::future::join_all(claims).await;
    let won = results.iter().filter(|r| r.is_ok()).count();
    let lost = results.iter().filter(|r| is_conflict(r)).count();
    assert_eq!((won, lost), (1, 7), "{results:?}");
    Ok(())
}

/// An empty thread id and a zero ttl are `InvalidConfig`, for claims and renewals.
pub async fn lease_rejects_bad_input(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    assert!(is_invalid(&saver.acquire_lease("", LONG).await));
    let t = thread();
    assert!(is_invalid(&saver.acquire_lease(&t, Duration::ZERO).await));
    assert!(is_invalid(
        &saver.acquire_lease(&t, Lease::MAX_TTL * 2).await
    ));
    // Nothing was claimed by the rejected calls.
    let lease = saver.acquire_lease(&t, LONG).await?;
    assert!(is_invalid(&saver.renew_lease(&lease, Duration::ZERO).await));
    let nameless = Lease {
        thread_id: String::new(),
        ..lease.clone()
    };
    assert!(is_invalid(&saver.renew_lease(&nameless, LONG).await));
    saver.renew_lease(&lease, LONG).await?;
    Ok(())
}
