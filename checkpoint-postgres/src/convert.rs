//! Rows to checkpoint types, and driver errors to the crate's error.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};
use sqlx::Row;
use sqlx::postgres::PgRow;
use waypoint_checkpoint::serde::{TAG_MSGPACK, TAG_NULL};
use waypoint_checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Error,
    PendingWrite, Result, Serde, SerializedValue, Slot,
};

/// Type tag of a versioned channel that has no value.
pub(crate) const EMPTY: &str = "empty";

/// Maps a driver error; a missing table or schema means `setup()` never ran.
pub(crate) fn pg_error(e: sqlx::Error) -> Error {
    if let sqlx::Error::Database(db) = &e
        && matches!(db.code().as_deref(), Some("42P01" | "3F000"))
    {
        return Error::InvalidConfig(format!(
            "the database has no checkpoint tables ({}); run setup() first",
            db.message()
        ));
    }
    Error::backend("postgres", e)
}

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
fn inline_value(value: &Value) -> Result<SerializedValue> {
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

/// Reads a row of [`crate::queries::SELECT`] into a tuple, opening values with `serde`.
pub(crate) fn tuple_from_row(row: &PgRow, serde: &Serde) -> Result<CheckpointTuple> {
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

    let channels: Option<Vec<String>> = column(row, 6)?;
    let versions: Option<Vec<String>> = column(row, 7)?;
    let types: Option<Vec<String>> = column(row, 8)?;
    let blobs: Option<Vec<Option<Vec<u8>>>> = column(row, 9)?;
    for (((channel, version), tag), blob) in channels
        .unwrap_or_default()
        .into_iter()
        .zip(versions.unwrap_or_default())
        .zip(types.unwrap_or_default())
        .zip(blobs.unwrap_or_default())
    {
        let (Some(blob), false) = (blob, tag == EMPTY) else {
            continue;
        };
        let slot = Slot::Channel {
            thread_id: &thread_id,
            checkpoint_ns: &ns,
            channel: &channel,
            version: &version,
        };
        let value = serde.open(&SerializedValue::new(tag, blob), &slot)?;
        checkpoint.channel_values.insert(channel, value);
    }

    let task_ids: Option<Vec<String>> = column(row, 10)?;
    let idxs: Option<Vec<i32>> = column(row, 11)?;
    let write_channels: Option<Vec<String>> = column(row, 12)?;
    let write_types: Option<Vec<Option<String>>> = column(row, 13)?;
    let write_blobs: Option<Vec<Vec<u8>>> = column(row, 14)?;
    let pending_writes = task_ids
        .unwrap_or_default()
        .into_iter()
        .zip(idxs.unwrap_or_default())
        .zip(write_channels.unwrap_or_default())
        .zip(write_types.unwrap_or_default())
        .zip(write_blobs.unwrap_or_default())
        .map(|((((task_id, idx), channel), tag), blob)| {
            let slot = Slot::Write {
                thread_id: &thread_id,
                checkpoint_ns: &ns,
                checkpoint_id: &id,
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
        .collect::<Result<_>>()?;

    Ok(CheckpointTuple {
        parent_config: parent.map(|p| CheckpointConfig::of(&thread_id, &ns, &p)),
        config: CheckpointConfig::of(&thread_id, &ns, &id),
        checkpoint,
        metadata,
        pending_writes,
    })
}
