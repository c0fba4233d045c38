//! Linear-size history for appending channels (`append`, `add_messages`).
//!
//! Storing a growing list in every checkpoint makes a thread's history quadratic in its
//! length, and every step slower than the last. An appending channel's value is the fold
//! of its writes, so a checkpoint stores only the step's writes (as pending writes of the
//! checkpoint the step ran from, which the saver keeps anyway) and, now and then, the whole
//! value as a snapshot. Loading walks parent links back to the nearest snapshot and replays
//! the writes (the checkpoint crate's `delta_channel_history`).
//!
//! Snapshots are taken when the bytes written since the last one reach
//! `max(min_snapshot_bytes, growth * last_snapshot_bytes)`: snapshot sizes grow
//! geometrically, so their total stays a fraction of the channel's size, and a load replays
//! at most that many bytes of writes. A checkpoint whose parent's writes do not lead to it
//! (a fork, an update, a new input over discarded tasks, exit durability) always stores a
//! snapshot, since a replay through the parent would be wrong for it.

use std::collections::BTreeMap;
use waypoint_checkpoint::metadata;

use serde_json::{Map, Value, json};

/// When appending channels store their whole value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaPolicy {
    /// Store appending channels as deltas at all (off: every change stores the value).
    pub enabled: bool,
    /// Bytes of writes before the first snapshot.
    pub min_snapshot_bytes: u64,
    /// A snapshot once the writes since the last reach this many times its size.
    pub growth: u64,
}

impl Default for DeltaPolicy {
    fn default() -> Self {
        DeltaPolicy {
            enabled: true,
            min_snapshot_bytes: 1 << 20,
            growth: 2,
        }
    }
}

impl DeltaPolicy {
    /// Every change stores the whole value (LangGraph's behaviour without delta channels).
    pub fn off() -> Self {
        DeltaPolicy {
            enabled: false,
            ..DeltaPolicy::default()
        }
    }
}

/// What an appending channel wrote since its last snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeltaCounter {
    /// Updates since the snapshot (LangGraph's `counters_since_delta_snapshot`).
    pub(crate) updates: u64,
    /// Encoded bytes of those updates.
    pub(crate) bytes: u64,
    /// Encoded size of the last snapshot.
    pub(crate) snapshot_bytes: u64,
}

impl DeltaCounter {
    /// Whether the channel stores its value now.
    pub(crate) fn due(&self, policy: &DeltaPolicy) -> bool {
        self.bytes
            >= policy
                .min_snapshot_bytes
                .max(policy.growth.saturating_mul(self.snapshot_bytes))
    }

    /// Counts a snapshot of `bytes`.
    pub(crate) fn snapshot(&mut self, bytes: u64) {
        *self = DeltaCounter {
            updates: 0,
            bytes: 0,
            snapshot_bytes: bytes,
        };
    }
}

/// Reads the counters from checkpoint metadata (missing or malformed entries count as zero).
pub(crate) fn read_counters(extra: &Map<String, Value>) -> BTreeMap<String, DeltaCounter> {
    let mut out: BTreeMap<String, DeltaCounter> = BTreeMap::new();
    if let Some(Value::Object(updates)) = extra.get(waypoint_checkpoint::metadata::DELTA_COUNTERS) {
        for (channel, n) in updates {
            out.entry(channel.clone()).or_default().updates = n.as_u64().unwrap_or(0);
        }
    }
    if let Some(Value::Object(bytes)) = extra.get(metadata::DELTA_BYTES) {
        for (channel, pair) in bytes {
            let counter = out.entry(channel.clone()).or_default();
            counter.bytes = pair.get(0).and_then(Value::as_u64).unwrap_or(0);
            counter.snapshot_bytes = pair.get(1).and_then(Value::as_u64).unwrap_or(0);
        }
    }
    out
}

/// Writes the counters into checkpoint metadata.
pub(crate) fn write_counters(
    counters: &BTreeMap<String, DeltaCounter>,
    extra: &mut Map<String, Value>,
) {
    if counters.is_empty() {
        return;
    }
    // Inserted in order: collecting would buffer and sort the few entries first.
    let (mut updates, mut bytes) = (Map::new(), Map::new());
    for (channel, n) in counters {
        updates.insert(channel.clone(), json!(n.updates));
        bytes.insert(channel.clone(), json!([n.bytes, n.snapshot_bytes]));
    }
    extra.insert(
        waypoint_checkpoint::metadata::DELTA_COUNTERS.to_owned(),
        Value::Object(updates),
    );
    extra.insert(metadata::DELTA_BYTES.to_owned(), Value::Object(bytes));
}
