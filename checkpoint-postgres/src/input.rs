//! Ids a read or delete names that PostgreSQL's `text` cannot hold (U+0000), refused with a
//! clear error before any statement runs. Writes are checked by the core for every backend
//! (`waypoint_checkpoint::raw::check_id`: no NUL, at most `MAX_ID_BYTES`).

use waypoint_checkpoint::{CheckpointConfig, Error, Result};

/// Refuses an id holding a NUL character, which no row can hold.
pub(crate) fn check_nul(field: &str, value: &str) -> Result<()> {
    if value.contains('\0') {
        return Err(Error::InvalidConfig(format!(
            "{field} contains a NUL character, which PostgreSQL cannot store"
        )));
    }
    Ok(())
}

/// Refuses a config naming a checkpoint no row can hold (for reads: NUL only).
pub(crate) fn check_lookup(config: &CheckpointConfig) -> Result<()> {
    check_nul("thread_id", &config.thread_id)?;
    check_nul("checkpoint_ns", config.ns())?;
    check_nul(
        "checkpoint_id",
        config.checkpoint_id.as_deref().unwrap_or(""),
    )
}
