//! Server replies to checkpoint types, and values to the bytes stored for them.

use redis::Value;
use waypoint_checkpoint::{
    CheckpointConfig, CheckpointMetadata, CheckpointTuple, PendingWrite, Result, Serde,
    SerializedValue, Slot, serde::TAG_EMPTY, serde::record,
};

use crate::keys::{blob_field, corrupt, parse_write_field, put_part, take_part};

/// The bytes of a string reply; `None` for nil.
pub(crate) fn bytes(v: Value) -> Result<Option<Vec<u8>>> {
    match v {
        Value::Nil => Ok(None),
        Value::BulkString(b) => Ok(Some(b)),
        Value::SimpleString(s) => Ok(Some(s.into_bytes())),
        Value::Okay => Ok(Some(b"OK".to_vec())),
        Value::Int(i) => Ok(Some(i.to_string().into_bytes())),
        other => Err(corrupt(&format!("expected a string reply, got {other:?}"))),
    }
}

/// The bytes of a string reply that must be there.
pub(crate) fn required(v: Value, what: &str) -> Result<Vec<u8>> {
    bytes(v)?.ok_or_else(|| corrupt(&format!("{what} is missing")))
}

/// A UTF-8 string reply.
pub(crate) fn text(v: Value, what: &str) -> Result<String> {
    String::from_utf8(required(v, what)?).map_err(|_| corrupt(&format!("{what} is not UTF-8")))
}

/// The elements of an array reply (nil is empty).
pub(crate) fn array(v: Value) -> Result<Vec<Value>> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::Array(items) | Value::Set(items) => Ok(items),
        Value::Map(pairs) => Ok(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect()),
        other => Err(corrupt(&format!("expected an array reply, got {other:?}"))),
    }
}

/// Field/value pairs of a flat `HGETALL`-style reply.
pub(crate) fn pairs(v: Value) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let items = array(v)?;
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(f), Some(v)) = (it.next(), it.next()) {
        out.push((required(f, "a hash field")?, required(v, "a hash value")?));
    }
    Ok(out)
}

/// A channel value as stored: `<len>:<tag><bytes>`; a versioned channel without value is
/// the empty string.
pub(crate) fn encode_value(value: Option<&SerializedValue>) -> Vec<u8> {
    let Some(value) = value else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(value.type_tag.len() + value.bytes.len() + 8);
    put_part(&mut out, value.type_tag.as_bytes());
    out.extend_from_slice(&value.bytes);
    out
}

/// A value stored by [`encode_value`] (the empty string is `None`).
pub(crate) fn decode_value(raw: &[u8]) -> Result<Option<SerializedValue>> {
    if raw.is_empty() {
        return Ok(None);
    }
    let (tag, rest) = take_part(raw).ok_or_else(|| corrupt("a stored value is malformed"))?;
    let tag = String::from_utf8(tag.to_vec()).map_err(|_| corrupt("a type tag is not UTF-8"))?;
    Ok(Some(SerializedValue::new(tag, rest.to_vec())))
}

/// A pending write as stored: channel, task path, then the value.
pub(crate) fn encode_write(channel: &str, task_path: &str, value: &SerializedValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(channel.len() + task_path.len() + value.bytes.len() + 24);
    put_part(&mut out, channel.as_bytes());
    put_part(&mut out, task_path.as_bytes());
    out.extend_from_slice(&encode_value(Some(value)));
    out
}

/// `(channel, task_path, value)` of a stored write.
pub(crate) fn decode_write(raw: &[u8]) -> Result<(String, String, SerializedValue)> {
    let bad = || corrupt("a stored pending write is malformed");
    let (channel, rest) = take_part(raw).ok_or_else(bad)?;
    let (path, rest) = take_part(rest).ok_or_else(bad)?;
    let value = decode_value(rest)?.ok_or_else(bad)?;
    let utf8 = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| bad());
    Ok((utf8(channel)?, utf8(path)?, value))
}

/// A stored checkpoint hash, before its values and writes are joined.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) thread_id: String,
    pub(crate) ns: String,
    pub(crate) id: String,
    pub(crate) checkpoint: Vec<u8>,
    pub(crate) metadata: CheckpointMetadata,
    pub(crate) parent: Option<String>,
    /// The blobs-hash fields of the checkpoint's channel versions.
    pub(crate) fields: Vec<String>,
}

/// The metadata as stored (a compact record, or the JSON of earlier versions), as JSON.
pub(crate) fn parse_metadata(raw: &[u8]) -> Result<serde_json::Map<String, serde_json::Value>> {
    Ok(record::decode_metadata(raw)?.to_json())
}

/// The blob-field list JSON as stored.
pub(crate) fn parse_fields(raw: &[u8]) -> Result<Vec<String>> {
    serde_json::from_slice(raw).map_err(|e| waypoint_checkpoint::Error::serialization("json", e))
}

/// A stored blobs-hash value as the row `Serde::open_channel` takes: the empty string
/// (versioned, no value, unsealed) is an `empty` value without bytes.
pub(crate) fn stored_channel(raw: &[u8]) -> Result<SerializedValue> {
    Ok(decode_value(raw)?.unwrap_or_else(|| SerializedValue::new(TAG_EMPTY, Vec::new())))
}

/// Joins a head with its values (looked up by blobs-hash field) and its writes. Every
/// channel version the checkpoint names is opened with `Serde::open_channel`: under a
/// keyring a missing, emptied or unsealed value is an error, never an absent channel.
/// The tuple then goes through `Serde::verify_tuple` (`latest`: the head is its
/// namespace's newest checkpoint), which checks an authenticated history and takes its
/// bookkeeping out.
pub(crate) fn tuple<'a>(
    serde: &Serde,
    head: Head,
    value_of: impl Fn(&str) -> Option<&'a [u8]>,
    writes: Vec<(Vec<u8>, Vec<u8>)>,
    latest: bool,
) -> Result<CheckpointTuple> {
    let mut checkpoint = record::decode_checkpoint(&head.checkpoint)?;
    for (channel, version) in &checkpoint.channel_versions {
        let found = value_of(&blob_field(channel, version.as_str()))
            .map(stored_channel)
            .transpose()?;
        let slot = Slot::Channel {
            thread_id: &head.thread_id,
            checkpoint_ns: &head.ns,
            channel,
            version: version.as_str(),
        };
        if let Some(opened) = serde.open_channel(found.as_ref(), &slot)? {
            checkpoint.channel_values.insert(channel.clone(), opened);
        }
    }
    let pending = pending_writes(serde, &head.thread_id, &head.ns, &head.id, writes)?;
    let mut tuple = CheckpointTuple {
        config: CheckpointConfig::of(&head.thread_id, &head.ns, &head.id),
        checkpoint,
        metadata: head.metadata,
        parent_config: head
            .parent
            .as_deref()
            .map(|p| CheckpointConfig::of(&head.thread_id, &head.ns, p)),
        pending_writes: pending,
    };
    serde.verify_tuple(&mut tuple, latest)?;
    Ok(tuple)
}

/// A stored channel value opened with the slot of its thread, namespace, channel and version.
pub(crate) fn open_value(
    serde: &Serde,
    thread_id: &str,
    ns: &str,
    channel: &str,
    version: &str,
    value: &SerializedValue,
) -> Result<SerializedValue> {
    let slot = Slot::Channel {
        thread_id,
        checkpoint_ns: ns,
        channel,
        version,
    };
    serde.open(value, &slot)
}

/// The stored writes (writes-hash field/value pairs) of one checkpoint, opened, in
/// `(task_path, task_id, idx)` order: the order a step applied them (LangGraph's
/// `writes_sort_key`; text compared as bytes).
pub(crate) fn pending_writes(
    serde: &Serde,
    thread_id: &str,
    ns: &str,
    checkpoint_id: &str,
    writes: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<Vec<PendingWrite>> {
    let mut pending: Vec<(String, String, i64, PendingWrite)> = Vec::with_capacity(writes.len());
    for (field, raw) in writes {
        let (task_id, idx) = parse_write_field(&field)?;
        let (channel, path, value) = decode_write(&raw)?;
        let slot = Slot::Write {
            thread_id,
            checkpoint_ns: ns,
            checkpoint_id,
            task_id: &task_id,
            channel: &channel,
            idx,
        };
        let value = serde.open(&value, &slot)?;
        pending.push((
            path,
            task_id.clone(),
            idx,
            PendingWrite {
                task_id,
                channel,
                value,
            },
        ));
    }
    pending.sort_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)));
    Ok(pending.into_iter().map(|(_, _, _, w)| w).collect())
}
