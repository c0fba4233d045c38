//! Per-thread leases in `waypoint_thread_leases`: each operation is one statement on the
//! writer connection, so SQLite's write lock makes it atomic across connections and
//! processes sharing the file.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, params};
use waypoint_checkpoint::{Error, Lease, Result};

use crate::error::sqlite_error;

/// Claims the thread unless a live lease holds it: an absent row is inserted, an expired one
/// taken over, a live one left alone (and then no row changes).
const ACQUIRE: &str = "INSERT INTO waypoint_thread_leases (thread_id, token, expires_at)
    VALUES (?1, ?2, ?3)
    ON CONFLICT (thread_id) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
    WHERE waypoint_thread_leases.expires_at <= ?4";

/// Extends the claim if it is still the holder's (expired but not taken over included).
const RENEW: &str =
    "UPDATE waypoint_thread_leases SET expires_at = ?3 WHERE thread_id = ?1 AND token = ?2";

/// Drops the claim if it is still the holder's; someone else's is never touched.
const RELEASE: &str = "DELETE FROM waypoint_thread_leases WHERE thread_id = ?1 AND token = ?2";

/// Whether `(thread_id, token)` still holds its thread (lapsed but not taken over included).
const HOLDS: &str =
    "SELECT EXISTS (SELECT 1 FROM waypoint_thread_leases WHERE thread_id = ?1 AND token = ?2)";

/// Takes over a lapsed lease of the thread (its holder's next fenced write fails).
const TAKE_LAPSED: &str =
    "DELETE FROM waypoint_thread_leases WHERE thread_id = ?1 AND expires_at <= ?2";

/// Whether a live lease holds the thread (run after [`TAKE_LAPSED`]).
const LEASED: &str = "SELECT EXISTS (SELECT 1 FROM waypoint_thread_leases WHERE thread_id = ?1)";

/// Microseconds since the Unix epoch, the column's unit.
fn micros(t: SystemTime) -> Result<i64> {
    let since = t
        .duration_since(UNIX_EPOCH)
        .map_err(|e| Error::backend("sqlite", format!("system clock before 1970: {e}")))?;
    i64::try_from(since.as_micros())
        .map_err(|_| Error::backend("sqlite", "system clock beyond the year 294000"))
}

/// Now and the expiry `ttl` from now, as column values and as the lease's `expires_at`.
fn deadline(thread_id: &str, ttl: Duration) -> Result<(i64, i64, SystemTime)> {
    Lease::check(thread_id, ttl)?;
    let now = SystemTime::now();
    let expires_at = now
        .checked_add(ttl)
        .ok_or_else(|| Error::InvalidConfig(format!("a lease ttl of {ttl:?} is too long")))?;
    // Stored to the microsecond: the lease reports exactly what the row holds.
    let stored = micros(expires_at)?;
    let reported = UNIX_EPOCH + Duration::from_micros(stored.unsigned_abs());
    Ok((micros(now)?, stored, reported))
}

/// The arguments checked and prepared for one statement on the writer.
#[derive(Clone)]
pub(crate) struct Claim {
    thread_id: String,
    token: String,
    now: i64,
    expires: i64,
    expires_at: SystemTime,
}

impl Claim {
    /// A new claim on `thread_id` for `ttl`, with a fresh token.
    pub(crate) fn acquire(thread_id: &str, ttl: Duration) -> Result<Self> {
        let (now, expires, expires_at) = deadline(thread_id, ttl)?;
        Ok(Claim {
            thread_id: thread_id.to_owned(),
            token: Lease::new_token(),
            now,
            expires,
            expires_at,
        })
    }

    /// `lease` extended to `ttl` from now.
    pub(crate) fn renew(lease: &Lease, ttl: Duration) -> Result<Self> {
        let (now, expires, expires_at) = deadline(&lease.thread_id, ttl)?;
        Ok(Claim {
            thread_id: lease.thread_id.clone(),
            token: lease.token.clone(),
            now,
            expires,
            expires_at,
        })
    }

    fn into_lease(self) -> Lease {
        Lease {
            thread_id: self.thread_id,
            token: self.token,
            expires_at: self.expires_at,
        }
    }

    /// Runs the claim; `Conflict` while another live lease holds the thread.
    pub(crate) fn run_acquire(self, conn: &mut Connection) -> Result<Lease> {
        let changed = conn
            .prepare_cached(ACQUIRE)
            .and_then(|mut s| {
                s.execute(params![self.thread_id, self.token, self.expires, self.now])
            })
            .map_err(sqlite_error)?;
        if changed == 0 {
            return Err(Error::Conflict(format!(
                "thread `{}` is leased by another run",
                self.thread_id
            )));
        }
        Ok(self.into_lease())
    }

    /// Runs the renewal; `Conflict` if the lease was released or taken over.
    pub(crate) fn run_renew(self, conn: &mut Connection) -> Result<Lease> {
        let changed = conn
            .prepare_cached(RENEW)
            .and_then(|mut s| s.execute(params![self.thread_id, self.token, self.expires]))
            .map_err(sqlite_error)?;
        if changed == 0 {
            return Err(Error::Conflict(format!(
                "the lease on thread `{}` was lost",
                self.thread_id
            )));
        }
        Ok(self.into_lease())
    }
}

/// Releases the lease `(thread_id, token)` if it is still held; a no-op otherwise.
pub(crate) fn release(conn: &mut Connection, thread_id: &str, token: &str) -> Result<()> {
    conn.prepare_cached(RELEASE)
        .and_then(|mut s| s.execute(params![thread_id, token]))
        .map_err(sqlite_error)
        .map(drop)
}

/// Whether `lease` still holds its thread; run inside the write transaction it fences.
pub(crate) fn holds(conn: &Connection, lease: &Lease) -> Result<bool> {
    conn.prepare_cached(HOLDS)
        .and_then(|mut s| s.query_row(params![lease.thread_id, lease.token], |r| r.get(0)))
        .map_err(sqlite_error)
}

/// What a write transaction checks about the thread's lease before it writes.
pub(crate) enum Fence {
    /// Nothing: a plain save.
    None,
    /// That this lease still holds its thread.
    Held(Lease),
    /// That no live lease holds this thread (a lapsed one is taken over): a write that needs
    /// no lease of its own but must never land under a running writer.
    Unleased(String),
}

/// Whether no live lease holds `thread_id`, after taking over a lapsed one; run inside the
/// write transaction it guards.
pub(crate) fn unleased(conn: &Connection, thread_id: &str) -> Result<bool> {
    let now = micros(SystemTime::now())?;
    conn.prepare_cached(TAKE_LAPSED)
        .and_then(|mut s| s.execute(params![thread_id, now]))
        .and_then(|_| {
            conn.prepare_cached(LEASED)?
                .query_row(params![thread_id], |r| r.get::<_, bool>(0))
        })
        .map(|leased| !leased)
        .map_err(sqlite_error)
}
