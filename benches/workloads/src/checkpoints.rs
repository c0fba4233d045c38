//! The checkpoint workload: five channels, one of which changes per step.

use std::collections::BTreeMap;

use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Result, Serde, SerializedValue,
};

use crate::payload::{SMALL, plain_conversation};

/// The channels of every checkpoint.
pub const CHANNELS: [&str; 5] = ["messages", "context", "plan", "scratch", "status"];
/// Sequential puts in the put benchmark.
pub const PUTS: usize = 2000;
/// Checkpoints in the history read by `get_tuple` and `list`.
pub const HISTORY: usize = 1000;
/// `put_writes` calls in the writes benchmark (2 writes each).
pub const WRITE_CALLS: usize = 2000;

/// The value every channel holds: the small conversation, MessagePack-encoded (~2.6 KB).
pub fn channel_value() -> SerializedValue {
    Serde::default()
        .dumps(&plain_conversation(SMALL))
        .expect("the payload encodes")
}

/// `steps` checkpoints ready to put: step 0 writes all channels, step i changes only
/// `CHANNELS[i % 5]`. Each item is `(checkpoint, metadata, new_versions)`.
pub fn history(
    steps: usize,
    value: &SerializedValue,
) -> Vec<(
    Checkpoint,
    CheckpointMetadata,
    BTreeMap<String, ChannelVersion>,
)> {
    let mut versions: BTreeMap<String, ChannelVersion> = BTreeMap::new();
    (0..steps)
        .map(|step| {
            let changed: Vec<&str> = if step == 0 {
                CHANNELS.to_vec()
            } else {
                vec![CHANNELS[step % 5]]
            };
            let mut new_versions = BTreeMap::new();
            for channel in changed {
                let next = ChannelVersion::next(versions.get(channel)).expect("versions parse");
                versions.insert(channel.to_owned(), next.clone());
                new_versions.insert(channel.to_owned(), next);
            }
            let mut cp = Checkpoint::new(step as i64);
            cp.channel_versions = versions.clone();
            for channel in CHANNELS {
                cp.channel_values.insert(channel.to_owned(), value.clone());
            }
            (
                cp,
                CheckpointMetadata::new(CheckpointSource::Loop, step as i64),
                new_versions,
            )
        })
        .collect()
}

/// Puts a prepared history as one chained thread; returns the checkpoint configs.
pub async fn put_all(
    saver: &dyn CheckpointSaver,
    thread_id: &str,
    items: Vec<(
        Checkpoint,
        CheckpointMetadata,
        BTreeMap<String, ChannelVersion>,
    )>,
) -> Result<Vec<CheckpointConfig>> {
    let mut parent = CheckpointConfig::new(thread_id).with_ns("");
    let mut out = Vec::with_capacity(items.len());
    for (cp, meta, new_versions) in items {
        parent = saver.put(&parent, cp, meta, new_versions).await?;
        out.push(parent.clone());
    }
    Ok(out)
}
