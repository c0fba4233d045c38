//! Ids PostgreSQL cannot store, refused with a clear error before any statement runs.
//!
//! `text` cannot hold U+0000, and a B-tree index entry holds at most about 2.7 KB (a third of
//! a page): beyond that the server fails the insert with a raw "index row size" error.
//! The widest keys here are four ids (`checkpoint_writes`: thread, namespace, checkpoint,
//! task; `checkpoint_blobs`: thread, namespace, channel, version), so each id is limited to
//! [`MAX_ID_BYTES`]: four of them always fit, whatever their content.

use waypoint_checkpoint::{
    CheckpointConfig, Error, PreparedPut, PreparedSave, PreparedWrites, Result,
};

/// The longest id, in bytes of UTF-8, the PostgreSQL saver writes: thread ids, namespaces,
/// checkpoint and task ids, channel names and versions. Reads of longer ids (rows another
/// client wrote) are not limited.
pub const MAX_ID_BYTES: usize = 512;

/// Refuses an id holding a NUL character, which no row can hold.
pub(crate) fn check_nul(field: &str, value: &str) -> Result<()> {
    if value.contains('\0') {
        return Err(Error::InvalidConfig(format!(
            "{field} contains a NUL character, which PostgreSQL cannot store"
        )));
    }
    Ok(())
}

/// Refuses an id a write cannot store: a NUL character, or longer than [`MAX_ID_BYTES`].
pub(crate) fn check_id(field: &str, value: &str) -> Result<()> {
    check_nul(field, value)?;
    if value.len() > MAX_ID_BYTES {
        return Err(Error::InvalidConfig(format!(
            "{field} is {} bytes, over the PostgreSQL saver's limit of {MAX_ID_BYTES} bytes per id",
            value.len()
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

/// Refuses a put whose ids cannot be stored.
pub(crate) fn check_put(put: &PreparedPut) -> Result<()> {
    check_id("thread_id", &put.thread_id)?;
    check_id("checkpoint_ns", &put.checkpoint_ns)?;
    check_id("checkpoint id", &put.checkpoint.id)?;
    check_id("parent checkpoint_id", put.parent.as_deref().unwrap_or(""))?;
    for (channel, version) in &put.checkpoint.channel_versions {
        check_id("channel name", channel)?;
        check_id("channel version", version.as_str())?;
    }
    for value in &put.values {
        check_id("channel name", &value.channel)?;
        check_id("channel version", value.version.as_str())?;
    }
    Ok(())
}

/// Refuses writes whose ids cannot be stored.
pub(crate) fn check_writes(w: &PreparedWrites) -> Result<()> {
    check_id("thread_id", &w.thread_id)?;
    check_id("checkpoint_ns", &w.checkpoint_ns)?;
    check_id("checkpoint_id", &w.checkpoint_id)?;
    check_id("task_id", &w.task_id)?;
    check_nul("task_path", &w.task_path)?;
    w.rows
        .iter()
        .try_for_each(|row| check_id("channel name", &row.channel))
}

/// Refuses a batch any of whose saves cannot be stored.
pub(crate) fn check_saves(saves: &[PreparedSave]) -> Result<()> {
    saves.iter().try_for_each(|save| match save {
        PreparedSave::Put(put) => check_put(put),
        PreparedSave::Writes(w) => check_writes(w),
    })
}
