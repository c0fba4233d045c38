//! Checkpoint ids: uuid6 built exactly as LangGraph builds them.
//!
//! The 60-bit timestamp (100 ns ticks since 1582-10-15) leads the id, so the canonical
//! lowercase string sorts in creation order; a process-wide high-water mark bumps the
//! timestamp when the clock has not advanced, so ids made in a tight loop still increase.
//! `clock_seq` carries the super-step (`-1` gives the group `bfff`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// 100 ns ticks between the Gregorian epoch (1582-10-15) and the Unix epoch.
const GREGORIAN_OFFSET: u64 = 0x01B2_1DD2_1381_4000;

/// Highest timestamp handed out by this process.
static LAST_TIMESTAMP: AtomicU64 = AtomicU64::new(0);

/// Returns a new uuid6 string whose `clock_seq` is `step` (14 bits, two's complement).
pub fn checkpoint_id(step: i64) -> String {
    uuid6(step as u64)
}

/// Returns a uuid6 string with the given `clock_seq` and a random node.
pub fn uuid6(clock_seq: u64) -> String {
    format_uuid(uuid6_u128(
        next_timestamp(),
        clock_seq,
        rand::random::<u64>(),
    ))
}

fn next_timestamp() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let now = nanos / 100 + GREGORIAN_OFFSET;
    let mut last = LAST_TIMESTAMP.load(Ordering::Relaxed);
    loop {
        let next = if now <= last { last + 1 } else { now };
        match LAST_TIMESTAMP.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// Lays out the uuid6 fields: time high+mid (48 bits), version, time low (12 bits),
/// variant, clock_seq (14 bits), node (48 bits).
fn uuid6_u128(timestamp: u64, clock_seq: u64, node: u64) -> u128 {
    let ts = u128::from(timestamp);
    let mut v = ((ts >> 12) & 0xFFFF_FFFF_FFFF) << 80;
    v |= (ts & 0x0FFF) << 64;
    v |= u128::from(clock_seq & 0x3FFF) << 48;
    v |= u128::from(node & 0xFFFF_FFFF_FFFF);
    v &= !(0xC000u128 << 48);
    v |= 0x8000u128 << 48;
    v &= !(0xF000u128 << 64);
    v |= 6u128 << 76;
    v
}

fn format_uuid(v: u128) -> String {
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    (*uuid::Uuid::from_u128(v)
        .hyphenated()
        .encode_lower(&mut text))
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_langgraph_layout() {
        // Same fields as Python's uuid6(clock_seq=-1) for a fixed timestamp and node.
        let v = uuid6_u128(0x1EF_4F5A_7B2C_3D4E, (-1i64) as u64, 0x0123_4567_89AB);
        let s = format_uuid(v);
        assert_eq!(s, "1ef4f5a7-b2c3-6d4e-bfff-0123456789ab");
    }

    #[test]
    fn step_is_the_clock_seq_group() {
        assert_eq!(&checkpoint_id(-1)[19..23], "bfff");
        assert_eq!(&checkpoint_id(1)[19..23], "8001");
        assert_eq!(&checkpoint_id(0)[14..15], "6");
    }

    #[test]
    fn strictly_increasing_in_a_tight_loop() {
        let ids: Vec<String> = (0..10_000).map(|_| checkpoint_id(0)).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }
}
