//! The compact stored form of a checkpoint's record (everything but its values) and of its
//! metadata, for the savers that own their format (memory, SQLite, Redis).
//!
//! A compact record starts with [`RECORD_TAG`] (a byte no JSON text starts with) and a format
//! byte, then MessagePack: ids as 16-byte binary, `ts` as Unix microseconds, channel versions
//! in Waypoint's `{counter:032}.{random:016}` form as the counter and the random `f64`,
//! `versions_seen` entries by their channel's position in `channel_versions` and without
//! the version where it equals the channel's. A field is stored compactly only when decoding
//! gives back the very text it came from; any other text (LangGraph's own versions, ids and
//! times of another shape) is stored as it is, so no value is ever altered. Records written
//! as JSON by earlier versions still decode.

use std::collections::BTreeMap;

use rmp::Marker;
use serde_json::{Map, Value};

use crate::metadata;
use crate::types::{parse_rfc3339_micros, rfc3339_micros, rfc3339_text};
use crate::version::ChannelVersion;
use crate::{Checkpoint, CheckpointMetadata, Error, Result};

/// The first byte of a compact record: MessagePack's never-used marker, which no JSON text
/// (nor any UTF-8 text) starts with.
pub const RECORD_TAG: u8 = 0xC1;

/// The compact format of checkpoint records this build writes, after [`RECORD_TAG`].
const FORMAT: u8 = 1;

/// The compact format of metadata records this build writes: the well-known keys of
/// [`KEYS`] by their position. Format 1 (every key as text) still reads.
const METADATA_FORMAT: u8 = 2;

/// Metadata keys stored by their position (append only: a key's position is its code).
const KEYS: [&str; 9] = [
    metadata::SOURCE,
    metadata::STEP,
    metadata::PARENTS,
    metadata::WRITES,
    metadata::FORKED_FROM,
    metadata::DELTA_COUNTERS,
    metadata::DELTA_BYTES,
    "run_id",
    metadata::WRITES_FROM,
];

/// The compact record of `checkpoint` (its `channel_values` are not part of it).
pub fn encode_checkpoint(checkpoint: &Checkpoint) -> Vec<u8> {
    // Room for the usual record (a channel's name and version, a node's name and seen
    // entry, ~40 bytes each), so it is written without growing.
    let entries = checkpoint.channel_versions.len() + checkpoint.versions_seen.len();
    let mut out = Vec::with_capacity(64 + 40 * entries);
    out.extend_from_slice(&[RECORD_TAG, FORMAT]);
    let w = &mut out;
    put_uint(w, u64::from(checkpoint.v));
    put_id(w, &checkpoint.id);
    put_ts(w, &checkpoint.ts);
    let current: Vec<(&String, &ChannelVersion)> = checkpoint.channel_versions.iter().collect();
    let position = |channel: &str| current.binary_search_by(|(name, _)| name.as_str().cmp(channel));
    put_map_len(w, current.len());
    for (channel, version) in &current {
        put_str(w, channel);
        put_version(w, version);
    }
    put_map_len(w, checkpoint.versions_seen.len());
    for (node, seen) in &checkpoint.versions_seen {
        put_str(w, node);
        put_map_len(w, seen.len());
        for (channel, version) in seen {
            match position(channel) {
                Ok(at) => {
                    put_uint(w, at as u64);
                    if current[at].1 == version {
                        put_nil(w);
                    } else {
                        put_version(w, version);
                    }
                }
                Err(_) => {
                    put_str(w, channel);
                    put_version(w, version);
                }
            }
        }
    }
    match &checkpoint.updated_channels {
        None => put_nil(w),
        Some(updated) => {
            put_array_len(w, updated.len());
            for channel in updated {
                match position(channel) {
                    Ok(at) => put_uint(w, at as u64),
                    Err(_) => put_str(w, channel),
                }
            }
        }
    }
    out
}

/// Decodes a checkpoint record: the compact form, or the JSON earlier versions wrote.
pub fn decode_checkpoint(bytes: &[u8]) -> Result<Checkpoint> {
    let Some(mut r) = Reader::compact(bytes, "checkpoint")? else {
        return serde_json::from_slice(bytes).map_err(|e| legacy_error("checkpoint", e));
    };
    let v = u32::try_from(r.uint("v")?).map_err(|_| r.error("v is out of range"))?;
    let id = r.id()?;
    let ts = r.ts()?;
    let mut names = Vec::new();
    let mut channel_versions = BTreeMap::new();
    for _ in 0..r.map_len("channel_versions")? {
        let channel = r.str("channel name")?;
        let version = r.version()?;
        names.push(channel.clone());
        channel_versions.insert(channel, version);
    }
    let mut versions_seen = BTreeMap::new();
    for _ in 0..r.map_len("versions_seen")? {
        let node = r.str("versions_seen node")?;
        let mut seen = BTreeMap::new();
        for _ in 0..r.map_len("versions_seen entry")? {
            let (channel, current) = r.channel(&names, &channel_versions)?;
            let version = match current {
                Some(current) if r.nil() => current.clone(),
                _ => r.version()?,
            };
            seen.insert(channel, version);
        }
        versions_seen.insert(node, seen);
    }
    let updated_channels = if r.nil() {
        None
    } else {
        let mut updated = Vec::new();
        for _ in 0..r.array_len("updated_channels")? {
            updated.push(r.channel(&names, &channel_versions)?.0);
        }
        Some(updated)
    };
    r.finish()?;
    Ok(Checkpoint {
        v,
        id,
        ts,
        channel_values: BTreeMap::new(),
        channel_versions,
        versions_seen,
        updated_channels,
    })
}

/// The version of `channel` a compact checkpoint record names, reading no further than its
/// `channel_versions`; `None` when it names none. `bytes` must be a compact record
/// ([`is_compact`]).
pub fn channel_version(bytes: &[u8], channel: &str) -> Result<Option<ChannelVersion>> {
    let Some(encoded) = channel_version_encoded(bytes, channel)? else {
        return Ok(None);
    };
    let mut r = Reader {
        what: "checkpoint",
        len: encoded.len(),
        rest: encoded,
    };
    r.version().map(Some)
}

/// The encoded bytes of `channel`'s version in a compact checkpoint record, found without
/// rendering any text (ids, times, versions); `None` when it names none. Equal to
/// [`encode_version`] of a version exactly when the versions are equal, so a walk can match
/// stored versions by bytes. `bytes` must be a compact record ([`is_compact`]).
pub fn channel_version_encoded<'b>(bytes: &'b [u8], channel: &str) -> Result<Option<&'b [u8]>> {
    let mut r = Reader::compact(bytes, "checkpoint")?
        .ok_or_else(|| Error::serialization("record", "not a compact checkpoint record"))?;
    r.uint("v")?;
    r.skip_id()?;
    r.skip_ts()?;
    for _ in 0..r.map_len("channel_versions")? {
        let found = r.str_bytes("channel name")? == channel.as_bytes();
        let start = r.rest;
        r.skip_version()?;
        if found {
            return Ok(Some(&start[..start.len() - r.rest.len()]));
        }
    }
    Ok(None)
}

/// How a compact record encodes `version` (see [`channel_version_encoded`]).
pub fn encode_version(version: &ChannelVersion) -> Vec<u8> {
    let mut out = Vec::new();
    put_version(&mut out, version);
    out
}

/// Whether `bytes` are a compact record (rather than the JSON of earlier versions).
pub fn is_compact(bytes: &[u8]) -> bool {
    bytes.first() == Some(&RECORD_TAG)
}

/// The compact record of `metadata`: its JSON object as MessagePack, well-known keys by
/// their position in a fixed list.
pub fn encode_metadata(metadata: &CheckpointMetadata) -> Vec<u8> {
    // Room for the usual metadata (source, step, parents, bookkeeping) without growing.
    let mut out = Vec::with_capacity(160);
    out.extend_from_slice(&[RECORD_TAG, METADATA_FORMAT]);
    let entries = metadata.json_entries();
    put_map_len(&mut out, entries.len());
    for (key, value) in &entries {
        match KEYS.iter().position(|k| k == key) {
            Some(code) => put_uint(&mut out, code as u64),
            None => put_str(&mut out, key),
        }
        // JSON values always encode, and writes to a Vec cannot fail.
        let _ = rmp_serde::encode::write(&mut out, value);
    }
    out
}

/// Decodes a metadata record: the compact form, or the JSON earlier versions wrote.
pub fn decode_metadata(bytes: &[u8]) -> Result<CheckpointMetadata> {
    let map: Map<String, Value> = match bytes {
        [RECORD_TAG, METADATA_FORMAT, rest @ ..] => {
            let mut r = Reader {
                what: "metadata",
                len: bytes.len(),
                rest,
            };
            let mut map = Map::new();
            for _ in 0..r.map_len("metadata")? {
                let key = if r.at_str() {
                    r.str("metadata key")?
                } else {
                    let code = r.uint("metadata key")?;
                    let key = usize::try_from(code).ok().and_then(|c| KEYS.get(c));
                    let key =
                        key.ok_or_else(|| r.error(format_args!("unknown key code {code}")))?;
                    (*key).to_owned()
                };
                let value =
                    serde::Deserialize::deserialize(&mut rmp_serde::Deserializer::new(&mut r.rest))
                        .map_err(|e| r.error(format_args!("value of `{key}`: {e}")))?;
                map.insert(key, value);
            }
            r.finish()?;
            map
        }
        _ => match Reader::compact(bytes, "metadata")? {
            None => serde_json::from_slice(bytes).map_err(|e| legacy_error("metadata", e))?,
            Some(r) => rmp_serde::from_slice(r.rest).map_err(|e| Error::Serialization {
                tag: "record".into(),
                path: Some("metadata".into()),
                message: format!("corrupt metadata record: {e}"),
            })?,
        },
    };
    CheckpointMetadata::from_json(map)
}

/// The bytes a saver owning its format stores for a checkpoint's record and metadata.
pub fn encoded_len(checkpoint: &Checkpoint, metadata: &CheckpointMetadata) -> usize {
    let mut head = checkpoint.clone();
    head.channel_values.clear();
    encode_checkpoint(&head).len() + encode_metadata(metadata).len()
}

fn legacy_error(what: &str, e: serde_json::Error) -> Error {
    Error::Serialization {
        tag: "json".into(),
        path: Some(what.into()),
        message: format!("{what} record is neither compact nor valid JSON: {e}"),
    }
}

// Writing. Writes to a Vec cannot fail, so their results are dropped.

fn put_uint(w: &mut Vec<u8>, n: u64) {
    let _ = rmp::encode::write_uint(w, n);
}

fn put_nil(w: &mut Vec<u8>) {
    let _ = rmp::encode::write_nil(w);
}

fn put_str(w: &mut Vec<u8>, s: &str) {
    let _ = rmp::encode::write_str(w, s);
}

fn put_map_len(w: &mut Vec<u8>, n: usize) {
    let _ = rmp::encode::write_map_len(w, n as u32);
}

fn put_array_len(w: &mut Vec<u8>, n: usize) {
    let _ = rmp::encode::write_array_len(w, n as u32);
}

/// A canonical (lowercase, hyphenated) UUID as 16 bytes, any other id as its text.
fn put_id(w: &mut Vec<u8>, id: &str) {
    let mut canonical = [0u8; uuid::fmt::Hyphenated::LENGTH];
    match uuid::Uuid::try_parse(id) {
        Ok(uuid) if uuid.hyphenated().encode_lower(&mut canonical) == id => {
            let _ = rmp::encode::write_bin(w, uuid.as_bytes());
        }
        _ => put_str(w, id),
    }
}

/// A time stored as Unix microseconds as its text.
fn ts_text(micros: i64) -> Option<String> {
    if let Some(text) = rfc3339_text(micros) {
        return Some(text);
    }
    let t = chrono::DateTime::from_timestamp_micros(micros)?;
    Some(t.to_rfc3339_opts(chrono::SecondsFormat::Micros, false))
}

/// An RFC 3339 time in Waypoint's form as Unix microseconds, any other as its text.
fn put_ts(w: &mut Vec<u8>, ts: &str) {
    let micros = match parse_rfc3339_micros(ts) {
        // Waypoint's own shape, read and checked without chrono (a step writes one).
        Some(micros) => {
            Some(micros).filter(|m| rfc3339_micros(*m).is_some_and(|t| t[..] == *ts.as_bytes()))
        }
        None => chrono::DateTime::parse_from_rfc3339(ts)
            .ok()
            .map(|t| t.timestamp_micros())
            .filter(|m| ts_text(*m).as_deref() == Some(ts)),
    };
    match micros {
        Some(m) => {
            let _ = rmp::encode::write_sint(w, m);
        }
        None => put_str(w, ts),
    }
}

/// The text of a version stored as `counter` and an optional random suffix.
fn version_text(counter: u64, suffix: Option<f64>) -> String {
    match suffix {
        Some(s) => format!("{counter:032}.{s:016}"),
        None => counter.to_string(),
    }
}

/// A version in Waypoint's form (or a bare integer) as the counter and the suffix's `f64`
/// (or nil); any other as its text.
fn put_version(w: &mut Vec<u8>, version: &ChannelVersion) {
    // A version made from its parts is written from them, its text never rendered.
    let parsed = match version.known_parts() {
        Some(parts) => Some(parts),
        None => parse_version(version.as_str()),
    };
    match parsed {
        Some((counter, suffix)) => {
            put_uint(w, counter);
            match suffix {
                Some(s) => {
                    let _ = rmp::encode::write_f64(w, s);
                }
                None => put_nil(w),
            }
        }
        None => put_str(w, version.as_str()),
    }
}

/// The counter and suffix of a version's text, when rendering them gives that text back.
fn parse_version(text: &str) -> Option<(u64, Option<f64>)> {
    let parsed = match text.split_once('.') {
        None => text.parse::<u64>().ok().map(|c| (c, None)),
        Some((counter, suffix)) => counter
            .parse::<u64>()
            .ok()
            .zip(suffix.parse::<f64>().ok())
            .map(|(c, s)| (c, Some(s))),
    };
    parsed.filter(|(c, s)| version_text(*c, *s) == text)
}

/// Reads a compact record, with the offset of each failure in its errors.
struct Reader<'a> {
    what: &'static str,
    len: usize,
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader after the tag and format byte, or `None` for a record that is not compact.
    fn compact(bytes: &'a [u8], what: &'static str) -> Result<Option<Self>> {
        match bytes {
            [RECORD_TAG, FORMAT, rest @ ..] => Ok(Some(Reader {
                what,
                len: bytes.len(),
                rest,
            })),
            [RECORD_TAG, other, ..] => Err(Error::Serialization {
                tag: "record".into(),
                path: Some(what.into()),
                message: format!(
                    "{what} record has format {other}, which this build does not know \
                     (written by a newer Waypoint?)"
                ),
            }),
            [RECORD_TAG] => Err(Error::Serialization {
                tag: "record".into(),
                path: Some(what.into()),
                message: format!("{what} record is truncated after its tag"),
            }),
            _ => Ok(None),
        }
    }

    fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::Serialization {
            tag: "record".into(),
            path: Some(self.what.into()),
            message: format!(
                "corrupt {} record at byte {}: {message}",
                self.what,
                self.len - self.rest.len()
            ),
        }
    }

    fn marker(&self) -> Option<Marker> {
        self.rest.first().map(|b| Marker::from_u8(*b))
    }

    /// Whether a string is next.
    fn at_str(&self) -> bool {
        matches!(
            self.marker(),
            Some(Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32)
        )
    }

    /// Consumes a nil, if one is next.
    fn nil(&mut self) -> bool {
        let found = self.marker() == Some(Marker::Null);
        if found {
            self.rest = &self.rest[1..];
        }
        found
    }

    fn uint(&mut self, what: &str) -> Result<u64> {
        rmp::decode::read_int(&mut self.rest).map_err(|e| self.error(format_args!("{what}: {e}")))
    }

    fn take(&mut self, n: u32, what: &str) -> Result<&'a [u8]> {
        let n = n as usize;
        if self.rest.len() < n {
            return Err(self.error(format_args!("{what} is truncated")));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn str(&mut self, what: &str) -> Result<String> {
        let bytes = self.str_bytes(what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(self.error(format_args!("{what} is not UTF-8: {e}"))),
        }
    }

    /// A string's bytes, not checked to be UTF-8 (to skip it, or to compare it with a `str`).
    fn str_bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = rmp::decode::read_str_len(&mut self.rest)
            .map_err(|e| self.error(format_args!("{what}: {e}")))?;
        self.take(n, what)
    }

    fn map_len(&mut self, what: &str) -> Result<u32> {
        let n = rmp::decode::read_map_len(&mut self.rest)
            .map_err(|e| self.error(format_args!("{what}: {e}")))?;
        self.bound(n, what)
    }

    fn array_len(&mut self, what: &str) -> Result<u32> {
        let n = rmp::decode::read_array_len(&mut self.rest)
            .map_err(|e| self.error(format_args!("{what}: {e}")))?;
        self.bound(n, what)
    }

    /// Refuses a count the remaining bytes cannot hold (one byte an item at least), so a
    /// corrupt length never reserves or loops beyond the record.
    fn bound(&self, n: u32, what: &str) -> Result<u32> {
        if n as usize > self.rest.len() {
            return Err(self.error(format_args!("{what} count {n} exceeds the record")));
        }
        Ok(n)
    }

    fn id(&mut self) -> Result<String> {
        if self.marker() != Some(Marker::Bin8) {
            return self.str("id");
        }
        let n = rmp::decode::read_bin_len(&mut self.rest).map_err(|e| self.error(e))?;
        let bytes = self.take(n, "id")?;
        let uuid =
            uuid::Uuid::from_slice(bytes).map_err(|_| self.error("binary id is not 16 bytes"))?;
        Ok(uuid.hyphenated().to_string())
    }

    fn ts(&mut self) -> Result<String> {
        if self.at_str() {
            return self.str("ts");
        }
        let micros: i64 = rmp::decode::read_int(&mut self.rest)
            .map_err(|e| self.error(format_args!("ts: {e}")))?;
        ts_text(micros).ok_or_else(|| self.error(format_args!("ts {micros} is out of range")))
    }

    /// Moves past an id without rendering its text.
    fn skip_id(&mut self) -> Result<()> {
        if self.marker() != Some(Marker::Bin8) {
            return self.str_bytes("id").map(drop);
        }
        let n = rmp::decode::read_bin_len(&mut self.rest).map_err(|e| self.error(e))?;
        self.take(n, "id").map(drop)
    }

    /// Moves past a time without rendering its text.
    fn skip_ts(&mut self) -> Result<()> {
        if self.at_str() {
            return self.str_bytes("ts").map(drop);
        }
        rmp::decode::read_int::<i64, _>(&mut self.rest)
            .map(drop)
            .map_err(|e| self.error(format_args!("ts: {e}")))
    }

    /// Moves past a version without rendering its text (a walk reads one channel's).
    fn skip_version(&mut self) -> Result<()> {
        if self.at_str() {
            return self.str_bytes("version").map(drop);
        }
        self.uint("version counter")?;
        if !self.nil() {
            rmp::decode::read_f64(&mut self.rest)
                .map_err(|e| self.error(format_args!("version suffix: {e}")))?;
        }
        Ok(())
    }

    fn version(&mut self) -> Result<ChannelVersion> {
        if self.at_str() {
            return self.str("version").map(ChannelVersion::new);
        }
        let counter = self.uint("version counter")?;
        if self.nil() {
            return Ok(ChannelVersion::from_parts(counter, None));
        }
        let suffix = rmp::decode::read_f64(&mut self.rest)
            .map_err(|e| self.error(format_args!("version suffix: {e}")))?;
        Ok(ChannelVersion::from_parts(counter, Some(suffix)))
    }

    /// A channel named by its position in `names` or by its text, with its current version
    /// when it is one of `versions`.
    fn channel<'v>(
        &mut self,
        names: &[String],
        versions: &'v BTreeMap<String, ChannelVersion>,
    ) -> Result<(String, Option<&'v ChannelVersion>)> {
        if self.at_str() {
            let channel = self.str("channel")?;
            return Ok((channel, None));
        }
        let at = self.uint("channel position")?;
        let channel = usize::try_from(at)
            .ok()
            .and_then(|at| names.get(at))
            .ok_or_else(|| {
                self.error(format_args!(
                    "channel position {at} is past the {} channels",
                    names.len()
                ))
            })?;
        Ok((channel.clone(), versions.get(channel)))
    }

    fn finish(self) -> Result<()> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(self.error(format_args!("{} bytes after the record", self.rest.len())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CheckpointSource, checkpoint_id};

    fn sample() -> Checkpoint {
        let mut cp = Checkpoint::new(3);
        let v1 = ChannelVersion::next(None).unwrap();
        let v2 = ChannelVersion::next(Some(&v1)).unwrap();
        cp.channel_versions.insert("messages".into(), v2.clone());
        cp.channel_versions.insert("__start__".into(), v1.clone());
        cp.channel_versions.insert(
            "python".into(),
            "00000000000000000000000000000002.1e-05".into(),
        );
        cp.channel_versions.insert("plain".into(), "7".into());
        cp.channel_versions.insert("odd".into(), "abc".into());
        let mut seen = BTreeMap::new();
        seen.insert("__start__".to_string(), v1.clone());
        seen.insert("messages".to_string(), v1.clone());
        seen.insert("gone".to_string(), v2.clone());
        cp.versions_seen.insert("chatbot".into(), seen);
        cp.versions_seen.insert("__input__".into(), BTreeMap::new());
        cp.updated_channels = Some(vec!["messages".into(), "elsewhere".into()]);
        cp
    }

    #[test]
    fn compact_record_round_trips_every_field_exactly() {
        let cp = sample();
        let bytes = encode_checkpoint(&cp);
        assert_eq!(bytes[0], RECORD_TAG);
        assert_eq!(decode_checkpoint(&bytes).unwrap(), cp);
        let json = serde_json::to_vec(&cp).unwrap();
        assert!(
            bytes.len() * 2 < json.len(),
            "{} vs {}",
            bytes.len(),
            json.len()
        );
    }

    #[test]
    fn one_channel_version_reads_without_the_rest() {
        let cp = sample();
        let bytes = encode_checkpoint(&cp);
        for (channel, version) in &cp.channel_versions {
            assert_eq!(
                channel_version(&bytes, channel).unwrap().as_ref(),
                Some(version)
            );
        }
        assert_eq!(channel_version(&bytes, "absent").unwrap(), None);
        for (channel, version) in &cp.channel_versions {
            let encoded = channel_version_encoded(&bytes, channel).unwrap();
            assert_eq!(encoded, Some(encode_version(version).as_slice()));
        }
        // A truncated record is an error, never a panic.
        for cut in 0..bytes.len() {
            let _ = channel_version_encoded(&bytes[..cut], "messages");
        }
        assert!(channel_version(b"{}", "messages").is_err());
        assert!(is_compact(&bytes) && !is_compact(b"{}"));
    }

    #[test]
    fn text_of_other_shapes_is_kept_as_written() {
        let mut cp = sample();
        cp.id = "not-a-uuid".into();
        cp.ts = "2024-07-01T10:00:00+00:00".into();
        let upper = checkpoint_id(1).to_uppercase();
        let mut other = sample();
        other.id = upper;
        other.ts = "2024-07-01T10:00:00.123456Z".into();
        other.updated_channels = None;
        for cp in [cp, other] {
            assert_eq!(decode_checkpoint(&encode_checkpoint(&cp)).unwrap(), cp);
        }
    }

    #[test]
    fn legacy_json_records_still_decode() {
        let cp = sample();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, 4)
            .with_run_id("run-1")
            .with("score", 1.5);
        let old_cp = serde_json::to_vec(&cp).unwrap();
        let old_meta = serde_json::to_vec(&meta.to_json()).unwrap();
        assert_eq!(decode_checkpoint(&old_cp).unwrap(), cp);
        assert_eq!(decode_metadata(&old_meta).unwrap(), meta);
        assert_eq!(decode_metadata(&encode_metadata(&meta)).unwrap(), meta);
        // Format 1 metadata (every key as text) still reads.
        let mut format1 = vec![RECORD_TAG, 1];
        rmp_serde::encode::write(&mut format1, &meta.to_json()).unwrap();
        assert_eq!(decode_metadata(&format1).unwrap(), meta);
    }

    /// Every truncation of `whole` fails with a message, and every single-byte corruption
    /// decodes or fails cleanly.
    fn check_corruptions(whole: &[u8], decode: fn(&[u8]) -> Result<()>) {
        for cut in 0..whole.len() {
            let err = decode(&whole[..cut]).unwrap_err();
            assert!(matches!(err, Error::Serialization { .. }), "{err}");
        }
        for at in 0..whole.len() {
            for byte in [0x00, 0x7f, 0x80, 0xc0, 0xc1, 0xcc, 0xdc, 0xdf, 0xff] {
                let mut bad = whole.to_vec();
                bad[at] = byte;
                let _ = decode(&bad);
            }
        }
    }

    #[test]
    fn corrupt_records_are_clear_errors_never_panics() {
        let bytes = encode_checkpoint(&sample());
        check_corruptions(&bytes, |b| decode_checkpoint(b).map(|_| ()));
        let meta = CheckpointMetadata::new(CheckpointSource::Input, -1).with("k", "v");
        check_corruptions(&encode_metadata(&meta), |b| decode_metadata(b).map(|_| ()));
        let mut extra = bytes.clone();
        extra.push(0);
        let err = decode_checkpoint(&extra).unwrap_err().to_string();
        assert!(err.contains("after the record"), "{err}");
        let err = decode_checkpoint(&[RECORD_TAG, 9, 0x90])
            .unwrap_err()
            .to_string();
        assert!(err.contains("newer Waypoint"), "{err}");
        assert!(decode_checkpoint(b"{\"v\":").is_err());
    }

    #[test]
    fn pseudo_random_bytes_never_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..400 {
            let mut buf = vec![RECORD_TAG, FORMAT];
            for _ in 0..len % 64 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                buf.push(state as u8);
            }
            let _ = decode_checkpoint(&buf);
            let _ = decode_metadata(&buf);
        }
    }
}
