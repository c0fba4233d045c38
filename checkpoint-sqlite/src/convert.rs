//! Rows to checkpoint types.

use std::borrow::Cow;

use bytes::Bytes;
use rusqlite::types::ValueRef;
use waypoint_checkpoint::serde::record;

use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, PendingWrite, Result, Serde,
    SerializedValue, Slot,
};

/// Type tag of a versioned channel that has no value.
pub(crate) const EMPTY: &str = "empty";

/// A stored channel value (an `empty` row too, its blob the empty seal or nothing); the bytes
/// are shared by every tuple of a read that uses them.
#[derive(Debug, Clone)]
pub(crate) struct RawBlob {
    pub(crate) channel: String,
    pub(crate) version: String,
    pub(crate) type_tag: String,
    pub(crate) blob: Bytes,
}

impl RawBlob {
    /// An `empty` row without a seal (LangGraph's NULL blob).
    pub(crate) fn empty(channel: String, version: String) -> Self {
        RawBlob {
            channel,
            version,
            type_tag: EMPTY.to_owned(),
            blob: Bytes::new(),
        }
    }
}

/// A stored pending write.
#[derive(Debug)]
pub(crate) struct RawWrite {
    pub(crate) task_id: String,
    pub(crate) idx: i64,
    pub(crate) channel: String,
    pub(crate) type_tag: Cow<'static, str>,
    pub(crate) blob: Vec<u8>,
}

/// Column `i` of `row`, a value's type tag: borrowed when it is one of the usual ones, so a
/// write read allocates nothing for its tag, nor does opening it (a clone).
pub(crate) fn type_tag_at(
    row: &rusqlite::Row<'_>,
    i: usize,
) -> rusqlite::Result<Cow<'static, str>> {
    const USUAL: [&str; 4] = ["msgpack", "json", "null", EMPTY];
    let tag = row.get_ref(i)?.as_str()?;
    Ok(match USUAL.iter().find(|usual| **usual == tag) {
        Some(usual) => Cow::Borrowed(usual),
        None => Cow::Owned(tag.to_owned()),
    })
}

/// A checkpoint row (decoded, still without values) with its values and writes, as read.
#[derive(Debug)]
pub(crate) struct RawCheckpoint {
    pub(crate) thread_id: String,
    pub(crate) checkpoint_ns: String,
    pub(crate) checkpoint_id: String,
    pub(crate) parent: Option<String>,
    pub(crate) checkpoint: Checkpoint,
    pub(crate) metadata: Vec<u8>,
    /// The rows of the versions the checkpoint names, by channel; a missing row is absent.
    pub(crate) blobs: Vec<RawBlob>,
    pub(crate) writes: Vec<RawWrite>,
}

/// A `checkpoint` or `metadata` column as stored: a compact record (a BLOB), or the JSON
/// text rows of earlier versions hold.
pub(crate) fn record_at(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Vec<u8>> {
    match row.get_ref(i)? {
        ValueRef::Blob(bytes) | ValueRef::Text(bytes) => Ok(bytes.to_vec()),
        other => Err(rusqlite::Error::InvalidColumnType(
            i,
            "record".into(),
            other.data_type(),
        )),
    }
}

/// Decodes a checkpoint row's `checkpoint` column (compact, or JSON of earlier versions).
pub(crate) fn decode_checkpoint(checkpoint: &[u8]) -> Result<Checkpoint> {
    record::decode_checkpoint(checkpoint)
}

/// Decodes a checkpoint row's `metadata` column (compact, or JSON of earlier versions).
pub(crate) fn decode_metadata(metadata: &[u8]) -> Result<CheckpointMetadata> {
    record::decode_metadata(metadata)
}

impl RawCheckpoint {
    /// The tuple, with sealed values opened and its record verified by `serde`; `latest`
    /// when it was read as its namespace's latest.
    pub(crate) fn into_tuple(self, serde: &Serde, latest: bool) -> Result<CheckpointTuple> {
        let metadata = decode_metadata(&self.metadata)?;
        let mut checkpoint = self.checkpoint;
        let (thread_id, ns, id) = (&self.thread_id, &self.checkpoint_ns, &self.checkpoint_id);
        let mut rows: std::collections::HashMap<String, RawBlob> = self
            .blobs
            .into_iter()
            .map(|b| (b.channel.clone(), b))
            .collect();
        for (channel, version) in &checkpoint.channel_versions {
            let slot = Slot::Channel {
                thread_id,
                checkpoint_ns: ns,
                channel,
                version: version.as_str(),
            };
            let found = rows
                .remove(channel)
                .map(|b| SerializedValue::new(b.type_tag, b.blob));
            if let Some(value) = serde.open_channel(found.as_ref(), &slot)? {
                checkpoint.channel_values.insert(channel.clone(), value);
            }
        }
        let pending_writes = self
            .writes
            .into_iter()
            .map(|w| {
                let slot = Slot::Write {
                    thread_id,
                    checkpoint_ns: ns,
                    checkpoint_id: id,
                    task_id: &w.task_id,
                    channel: &w.channel,
                    idx: w.idx,
                };
                let value = serde.open(&SerializedValue::new(w.type_tag, w.blob), &slot)?;
                Ok(PendingWrite {
                    task_id: w.task_id,
                    channel: w.channel,
                    value,
                })
            })
            .collect::<Result<_>>()?;
        let mut tuple = CheckpointTuple {
            config: CheckpointConfig::of(thread_id, ns, id),
            parent_config: self
                .parent
                .as_deref()
                .map(|p| CheckpointConfig::of(thread_id, ns, p)),
            checkpoint,
            metadata,
            pending_writes,
        };
        serde.verify_tuple(&mut tuple, latest)?;
        Ok(tuple)
    }
}

/// A value's tag as stored (owned).
pub(crate) fn tag(value: &SerializedValue) -> String {
    match &value.type_tag {
        Cow::Borrowed(s) => (*s).to_owned(),
        Cow::Owned(s) => s.clone(),
    }
}
