//! Per-thread leases in `waypoint_thread_leases`: each operation is one statement, atomic on
//! the server, and every time is the server's clock, so clients with skewed clocks agree on
//! when a lease lapses.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::PgConnection;
use waypoint_checkpoint::{Error, Lease, Result};

use crate::error::pg_error;

/// Claims the thread unless another live lease holds it: an absent row is inserted, an
/// expired one taken over, a live one left alone (and then no row returns). A row already
/// holding this token counts as claimed, so a retry after a lost reply succeeds.
const ACQUIRE: &str = "INSERT INTO waypoint_thread_leases (thread_id, token, expires_at)
    VALUES ($1, $2, now() + $3 * interval '1 microsecond')
    ON CONFLICT (thread_id) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
    WHERE waypoint_thread_leases.expires_at <= now()
        OR waypoint_thread_leases.token = excluded.token
    RETURNING (extract(epoch FROM expires_at) * 1000000)::bigint";

/// Extends the claim if it is still the holder's (expired but not taken over included).
const RENEW: &str = "UPDATE waypoint_thread_leases
    SET expires_at = now() + $3 * interval '1 microsecond'
    WHERE thread_id = $1 AND token = $2
    RETURNING (extract(epoch FROM expires_at) * 1000000)::bigint";

/// Drops the claim if it is still the holder's; someone else's is never touched.
const RELEASE: &str = "DELETE FROM waypoint_thread_leases WHERE thread_id = $1 AND token = $2";

/// Locks the lease row if it still holds `token` (expired but not taken over included), until
/// the transaction ends: `FOR SHARE` makes a takeover, renewal or release wait, and lets
/// fenced saves of the same holder run side by side.
const LOCK_IF_HELD: &str =
    "SELECT 1 FROM waypoint_thread_leases WHERE thread_id = $1 AND token = $2 FOR SHARE";

/// Checks the claim's arguments and gives the ttl in microseconds.
pub(crate) fn ttl_micros(thread_id: &str, ttl: Duration) -> Result<i64> {
    Lease::check(thread_id, ttl)?;
    // At most `Lease::MAX_TTL`, far below i64::MAX microseconds.
    i64::try_from(ttl.as_micros())
        .map_err(|_| Error::InvalidConfig(format!("a lease ttl of {ttl:?} is too long")))
}

/// The server's Unix microseconds as a time.
fn time_of(micros: i64) -> Result<SystemTime> {
    let offset = Duration::from_micros(micros.unsigned_abs());
    if micros >= 0 {
        UNIX_EPOCH.checked_add(offset)
    } else {
        UNIX_EPOCH.checked_sub(offset)
    }
    .ok_or_else(|| Error::backend("postgres", format!("lease expiry {micros} out of range")))
}

/// Runs the claim for `token`; `Conflict` while another live lease holds the thread.
pub(crate) async fn acquire(
    conn: &mut PgConnection,
    thread_id: &str,
    token: &str,
    ttl: i64,
    persistent: bool,
) -> Result<Lease> {
    let expires: Option<i64> = sqlx::query_scalar(ACQUIRE)
        .persistent(persistent)
        .bind(thread_id)
        .bind(token)
        .bind(ttl)
        .fetch_optional(conn)
        .await
        .map_err(pg_error)?;
    let Some(expires) = expires else {
        return Err(Error::Conflict(format!(
            "thread `{thread_id}` is leased by another run"
        )));
    };
    Ok(Lease {
        thread_id: thread_id.to_owned(),
        token: token.to_owned(),
        expires_at: time_of(expires)?,
    })
}

/// Runs the renewal; `Conflict` if the lease was released or taken over.
pub(crate) async fn renew(
    conn: &mut PgConnection,
    lease: &Lease,
    ttl: i64,
    persistent: bool,
) -> Result<Lease> {
    let expires: Option<i64> = sqlx::query_scalar(RENEW)
        .persistent(persistent)
        .bind(&lease.thread_id)
        .bind(&lease.token)
        .bind(ttl)
        .fetch_optional(conn)
        .await
        .map_err(pg_error)?;
    let Some(expires) = expires else {
        return Err(Error::Conflict(format!(
            "the lease on thread `{}` was lost",
            lease.thread_id
        )));
    };
    Ok(Lease {
        expires_at: time_of(expires)?,
        ..lease.clone()
    })
}

/// Releases `lease` if it is still held; a no-op otherwise.
pub(crate) async fn release(
    conn: &mut PgConnection,
    lease: &Lease,
    persistent: bool,
) -> Result<()> {
    sqlx::query(RELEASE)
        .persistent(persistent)
        .bind(&lease.thread_id)
        .bind(&lease.token)
        .execute(conn)
        .await
        .map_err(pg_error)
        .map(drop)
}

/// Whether `lease` still holds its thread, locking its row for the rest of the caller's
/// transaction when it does.
pub(crate) async fn lock_if_held(
    conn: &mut PgConnection,
    lease: &Lease,
    persistent: bool,
) -> Result<bool> {
    let held: Option<i32> = sqlx::query_scalar(LOCK_IF_HELD)
        .persistent(persistent)
        .bind(&lease.thread_id)
        .bind(&lease.token)
        .fetch_optional(conn)
        .await
        .map_err(pg_error)?;
    Ok(held.is_some())
}
