//! The well-known keys of [`CheckpointMetadata`](crate::CheckpointMetadata)'s JSON form: the
//! ones LangGraph writes and the ones Waypoint adds for its own bookkeeping.

/// What made the checkpoint: `input`, `loop`, `update` or `fork`.
pub const SOURCE: &str = "source";
/// The super-step number (`-1` for the input checkpoint).
pub const STEP: &str = "step";
/// The parent checkpoint id of each enclosing graph namespace.
pub const PARENTS: &str = "parents";
/// The checkpoint a fork or `update_state` started from (Waypoint).
pub const FORKED_FROM: &str = "forked_from";
/// The delta channels that need their history, with updates since each one's snapshot
/// (LangGraph's name for it).
pub const DELTA_COUNTERS: &str = "counters_since_delta_snapshot";
/// Each appending channel's `[bytes since snapshot, snapshot bytes]` (Waypoint).
pub const DELTA_BYTES: &str = "delta_bytes_since_snapshot";
