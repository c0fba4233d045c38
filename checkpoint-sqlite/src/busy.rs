//! Waiting for a lock held by another connection, so that no writer starves.
//!
//! SQLite's own busy timeout sleeps 1, 2, 5, ... then 100 ms between attempts. A process that
//! commits back to back holds the write lock most of the time and frees it for a few
//! microseconds between transactions, so a waiter that looks only every 100 ms can miss every
//! gap for the whole timeout: with two processes writing one file in a loop, one of them met
//! "database is locked" after five seconds in 4 runs of 5
//! (`two_processes_writing_for_ten_seconds_lose_nothing` with the WAL checkpointed every
//! second). This handler looks every 100 µs for the first 100 ms and every 500 µs after
//! that, until the connection's busy timeout; the same test then passed every run.

use std::cell::Cell;
use std::thread;
use std::time::{Duration, Instant};

/// The pause between attempts during the first [`SHORT_PHASE`] of a wait.
const SHORT_PAUSE: Duration = Duration::from_micros(100);
/// How long a wait uses [`SHORT_PAUSE`] before [`LONG_PAUSE`].
const SHORT_PHASE: Duration = Duration::from_millis(100);
/// The pause between attempts later in a wait.
const LONG_PAUSE: Duration = Duration::from_micros(500);

thread_local! {
    /// The longest the operation running on this thread may wait for a lock.
    static LIMIT: Cell<Duration> = const { Cell::new(Duration::from_secs(5)) };
    /// When the current wait began (set at its first attempt).
    static SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `f` on this thread with `limit` as the longest wait for another connection's lock.
pub(crate) fn with_limit<T>(limit: Duration, f: impl FnOnce() -> T) -> T {
    let before = LIMIT.replace(limit);
    let out = f();
    LIMIT.set(before);
    out
}

/// The busy handler of every connection: `true` (try again) until the limit has passed.
pub(crate) fn wait(retries: i32) -> bool {
    let now = Instant::now();
    if retries == 0 {
        SINCE.set(Some(now));
    }
    let waited = now.duration_since(SINCE.get().unwrap_or(now));
    let limit = LIMIT.get();
    if waited >= limit {
        return false;
    }
    let pause = if waited < SHORT_PHASE {
        SHORT_PAUSE
    } else {
        LONG_PAUSE
    };
    thread::sleep(pause.min(limit - waited));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_until_the_limit_then_gives_up() {
        let start = Instant::now();
        let attempts = with_limit(Duration::from_millis(50), || {
            (0..).take_while(|&n| wait(n)).count()
        });
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(50), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        // Short pauses: many attempts within the limit (SQLite's own handler makes 6 in
        // 50 ms), even on a loaded machine where a 100 µs sleep takes a millisecond.
        assert!(attempts >= 20, "{attempts}");
    }

    #[test]
    fn the_limit_is_restored_after_the_operation() {
        let outer = LIMIT.get();
        with_limit(Duration::from_millis(1), || {
            assert_eq!(LIMIT.get(), Duration::from_millis(1));
        });
        assert_eq!(LIMIT.get(), outer);
    }
}
