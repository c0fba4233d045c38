//! Rows to checkpoint types.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value};
use sqlx::Row;
use sqlx::postgres::PgRow;
use waypoint_checkpoint::serde::{TAG_MSGPACK, TAG_NULL};
use waypoint_checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Error,
    PendingWrite, Result, Serde, SerializedValue, Slot,
};

use crate::error::pg_error;

/// Type tag of a versioned channel that has no value (under a keyring, its blob is a seal).
pub(crate) const EMPTY: &str = waypoint_checkpoint::serde::TAG_EMPTY;

fn json_error(what: &str, e: serde_json::Error) -> Error {
    Error::Serialization {
        tag: "json".into(),
        path: Some(what.into()),
        message: e.to_string(),
    }
}

/// The `checkpoint` column as LangGraph writes it: values of primitive channels (strings,
/// numbers, booleans, null) inline, the rest in `checkpoint_blobs`.
#[derive(Deserialize)]
pub(crate) struct StoredCheckpoint {
    v: u32,
    id: String,
    ts: String,
    #[serde(default)]
    pub(crate) channel_values: Map<String, Value>,
    #[serde(default)]
    pub(crate) channel_versions: ChannelVersions,
    #[serde(default)]
    versions_seen: BTreeMap<String, ChannelVersions>,
    #[serde(default)]
    updated_channels: Option<Vec<String>>,
}

impl StoredCheckpoint {
    /// Parses the `checkpoint` column's text.
    pub(crate) fn parse(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| json_error("checkpoint", e))
    }
}

/// An inline primitive as the stored value LangGraph's serializer would have made of it.
pub(crate) fn inline_value(value: &Value) -> Result<SerializedValue> {
    match value {
        Value::Null => Ok(SerializedValue::new(TAG_NULL, Vec::new())),
        v => rmp_serde::to_vec(v)
            .map(|bytes| SerializedValue::new(TAG_MSGPACK, bytes))
            .map_err(|e| Error::serialization(TAG_MSGPACK, e)),
    }
}

/// Column `i` of a row, or a clear error naming it.
fn column<'r, T>(row: &'r PgRow, i: usize) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(i).map_err(pg_error)
}

/// A stored channel row: its type tag and blob (`None`: NULL, LangGraph's `empty` row).
pub(crate) type StoredValue = (String, Option<Bytes>);

/// A checkpoint row read without its stored values: the checkpoint (inline values only),
/// metadata and pending writes, opened.
pub(crate) struct Head {
    thread_id: String,
    ns: String,
    parent: Option<String>,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    pending_writes: Vec<PendingWrite>,
}

impl Head {
    /// Reads columns 0-5 (the checkpoint row) and the five write arrays from `writes_at`.
    pub(crate) fn from_row(row: &PgRow, writes_at: usize, serde: &Serde) -> Result<Head> {
        let thread_id: String = column(row, 0)?;
        let ns: String = column(row, 1)?;
        let id: String = column(row, 2)?;
        let parent: Option<String> = column(row, 3)?;
        let stored = StoredCheckpoint::parse(column::<&str>(row, 4)?)?;
        let metadata = serde_json::from_str(column::<&str>(row, 5)?)
            .map_err(|e| json_error("metadata", e))
            .and_then(CheckpointMetadata::from_json)?;
        let mut checkpoint = Checkpoint {
            v: stored.v,
            id: stored.id,
            ts: stored.ts,
            channel_values: BTreeMap::new(),
            channel_versions: stored.channel_versions,
            versions_seen: stored.versions_seen,
            updated_channels: stored.updated_channels,
        };
        for (channel, value) in &stored.channel_values {
            let version = checkpoint
                .channel_versions
                .get(channel)
                .map_or("", |v| v.as_str());
            let slot = Slot::Channel {
                thread_id: &thread_id,
                checkpoint_ns: &ns,
                channel,
                version,
            };
            let value = serde.open(&inline_value(value)?, &slot)?;
            checkpoint.channel_values.insert(channel.clone(), value);
        }
        let pending_writes = writes(row, writes_at, &thread_id, &ns, &id, serde)?;
        Ok(Head {
            thread_id,
            ns,
            parent,
            checkpoint,
            metadata,
            pending_writes,
        })
    }

    /// Thread and namespace of the row.
    pub(crate) fn scope(&self) -> (&str, &str) {
        (&self.thread_id, &self.ns)
    }

    /// The checkpoint's channel versions.
    pub(crate) fn versions(&self) -> impl Iterator<Item = (&str, &str)> {
        self.checkpoint
            .channel_versions
            .iter()
            .map(|(c, v)| (c.as_str(), v.as_str()))
    }

    /// The tuple, with the row `value` finds for each channel version the checkpoint names
    /// (`None`: no row) opened by `serde` through `Serde::open_channel`, so under a keyring a
    /// missing, nulled or unsealed row is an error, never an absent channel. A stored value
    /// replaces an inline one; a version without a row keeps its inline value (LangGraph's
    /// primitives, opened by [`Head::from_row`]). The tuple is then verified by
    /// `Serde::verify_tuple`, `latest` when it was read as its namespace's newest.
    pub(crate) fn into_tuple(
        mut self,
        serde: &Serde,
        latest: bool,
        value: impl Fn(&str, &str) -> Option<StoredValue>,
    ) -> Result<CheckpointTuple> {
        let (thread_id, ns) = (&self.thread_id, &self.ns);
        for (channel, version) in &self.checkpoint.channel_versions {
            // A NULL blob (LangGraph's `empty` row) is read as no bytes.
            let found = value(channel, version.as_str())
                .map(|(tag, blob)| SerializedValue::new(tag, blob.unwrap_or_default()));
            if found.is_none() && self.checkpoint.channel_values.contains_key(channel) {
                continue;
            }
            let slot = Slot::Channel {
                thread_id,
                checkpoint_ns: ns,
                channel,
                version: version.as_str(),
            };
            if let Some(value) = serde.open_channel(found.as_ref(), &slot)? {
                self.checkpoint
                    .channel_values
                    .insert(channel.clone(), value);
            }
        }
        let id = self.checkpoint.id.clone();
        let mut tuple = CheckpointTuple {
            parent_config: self.parent.map(|p| CheckpointConfig::of(thread_id, ns, &p)),
            config: CheckpointConfig::of(thread_id, ns, &id),
            checkpoint: self.checkpoint,
            metadata: self.metadata,
            pending_writes: self.pending_writes,
        };
        serde.verify_tuple(&mut tuple, latest)?;
        Ok(tuple)
    }
}

/// Reads the five parallel write arrays from column `at` on, ordered by
/// `(task_path, task_id, idx)`.
fn writes(
    row: &PgRow,
    at: usize,
    thread_id: &str,
    ns: &str,
    id: &str,
    serde: &Serde,
) -> Result<Vec<PendingWrite>> {
    let task_ids: Option<Vec<String>> = column(row, at)?;
    let idxs: Option<Vec<i32>> = column(row, at + 1)?;
    let channels: Option<Vec<String>> = column(row, at + 2)?;
    let types: Option<Vec<Option<String>>> = column(row, at + 3)?;
    let blobs: Option<Vec<Vec<u8>>> = column(row, at + 4)?;
    task_ids
        .unwrap_or_default()
        .into_iter()
        .zip(idxs.unwrap_or_default())
        .zip(channels.unwrap_or_default())
        .zip(types.unwrap_or_default())
        .zip(blobs.unwrap_or_default())
        .map(|((((task_id, idx), channel), tag), blob)| {
            let slot = Slot::Write {
                thread_id,
                checkpoint_ns: ns,
                checkpoint_id: id,
                task_id: &task_id,
                channel: &channel,
                idx: i64::from(idx),
            };
            let tag = tag.unwrap_or_else(|| TAG_NULL.to_owned());
            let value = serde.open(&SerializedValue::new(tag, blob), &slot)?;
            Ok(PendingWrite {
                task_id,
                channel,
                value,
            })
        })
        .collect()
}

/// Reads a row of the full select (the rows of the checkpoint's versions as arrays in columns
/// 6-9, writes from 10) into a tuple, opening values with `serde` (see [`Head::into_tuple`]).
pub(crate) fn tuple_from_row(row: &PgRow, serde: &Serde, latest: bool) -> Result<CheckpointTuple> {
    let head = Head::from_row(row, 10, serde)?;
    let channels: Option<Vec<String>> = column(row, 6)?;
    let versions: Option<Vec<String>> = column(row, 7)?;
    let types: Option<Vec<String>> = column(row, 8)?;
    let blobs: Option<Vec<Option<Vec<u8>>>> = column(row, 9)?;
    let stored: BTreeMap<(String, String), StoredValue> = channels
        .unwrap_or_default()
        .into_iter()
        .zip(versions.unwrap_or_default())
        .zip(types.unwrap_or_default())
        .zip(blobs.unwrap_or_default())
        .map(|(((c, v), t), b)| ((c, v), (t, b.map(Bytes::from))))
        .collect();
    head.into_tuple(serde, latest, |c, v| {
        stored.get(&(c.to_owned(), v.to_owned())).cloned()
    })
}
