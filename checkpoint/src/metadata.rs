//! The well-known keys of [`CheckpointMetadata`](crate::CheckpointMetadata)'s JSON form: the
//! ones LangGraph writes and the ones Waypoint adds for its own bookkeeping.
//!
//! The bookkeeping keys ([`BOOKKEEPING`]) stay in the stored metadata, where the runtime's
//! delta history and the savers' `prune` read them (so every stored thread stays readable),
//! but the runtime never shows them: a `StateSnapshot`'s metadata (`get_state`,
//! `get_state_history`) leaves them out. They are only written for channels stored as deltas
//! and for checkpoints whose `writes` what they store anyway gives back, neither of which
//! LangGraph mode (the default on PostgreSQL) does, so Python never reads them.

/// What made the checkpoint: `input`, `loop`, `update` or `fork`.
pub const SOURCE: &str = "source";
/// The super-step number (`-1` for the input checkpoint).
pub const STEP: &str = "step";
/// The parent checkpoint id of each enclosing graph namespace.
pub const PARENTS: &str = "parents";
/// What made the checkpoint, as LangGraph up to 0.4 recorded it: the input, each node's
/// update, or an `update_state`'s values by node (`null` when no node ran).
pub const WRITES: &str = "writes";
/// The checkpoint a fork or `update_state` started from (Waypoint).
pub const FORKED_FROM: &str = "forked_from";
/// The delta channels that need their history, with updates since each one's snapshot
/// (LangGraph's name for it).
pub const DELTA_COUNTERS: &str = "counters_since_delta_snapshot";
/// Each appending channel's `[bytes since snapshot, snapshot bytes]` (Waypoint).
pub const DELTA_BYTES: &str = "delta_bytes_since_snapshot";
/// Where [`WRITES`] is rebuilt from instead of being stored (Waypoint): a node's name for
/// the parent checkpoint's pending writes of that node's task, `__start__` for this
/// checkpoint's own input. The runtime stores it where it checked, when saving, that the
/// rebuilt value is exactly the one it would have stored, and rebuilds `writes` when it
/// shows the metadata.
pub const WRITES_FROM: &str = "writes_from";
/// Waypoint's bookkeeping keys, which the runtime hides from the metadata it shows.
pub const BOOKKEEPING: [&str; 3] = [DELTA_COUNTERS, DELTA_BYTES, WRITES_FROM];

/// Whether a checkpoint whose metadata holds `writes_from` (its [`WRITES_FROM`] value)
/// rebuilds `writes` from its parent's pending writes, so that pruning keeps the parent.
pub fn writes_from_parent(writes_from: Option<&serde_json::Value>) -> bool {
    matches!(writes_from, Some(serde_json::Value::String(node)) if node != crate::channels::START)
}
