//! The checkpoint data model shared by every saver.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::version::ChannelVersion;
use crate::{Error, Result};

/// The checkpoint format version this crate writes.
pub const CHECKPOINT_VERSION: u32 = 4;

/// Map from channel name to its current version.
pub type ChannelVersions = BTreeMap<String, ChannelVersion>;

/// Addresses a thread, a namespace within it, and optionally one checkpoint.
///
/// In `put` the `checkpoint_id` is the **parent**; elsewhere it selects a checkpoint.
/// A missing `checkpoint_ns` means the root namespace `""`, except in `list`, where it
/// means every namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// The conversation or run partition.
    pub thread_id: String,
    /// The (sub)graph namespace; `None` is the root for reads and writes, all for `list`.
    #[serde(default)]
    pub checkpoint_ns: Option<String>,
    /// A checkpoint id (the parent, in `put`).
    #[serde(default)]
    pub checkpoint_id: Option<String>,
}

impl CheckpointConfig {
    /// A config for the latest checkpoint of `thread_id` in the root namespace.
    pub fn new(thread_id: impl Into<String>) -> Self {
        CheckpointConfig {
            thread_id: thread_id.into(),
            checkpoint_ns: None,
            checkpoint_id: None,
        }
    }

    /// The same config in namespace `ns`.
    pub fn with_ns(mut self, ns: impl Into<String>) -> Self {
        self.checkpoint_ns = Some(ns.into());
        self
    }

    /// The same config pointing at checkpoint `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.checkpoint_id = Some(id.into());
        self
    }

    /// The namespace, `""` when absent.
    pub fn ns(&self) -> &str {
        self.checkpoint_ns.as_deref().unwrap_or("")
    }

    /// The checkpoint id, or an [`Error::InvalidConfig`] naming `operation`.
    pub fn require_id(&self, operation: &str) -> Result<&str> {
        match self.checkpoint_id.as_deref() {
            Some(id) if !id.is_empty() => Ok(id),
            _ => Err(Error::InvalidConfig(format!(
                "{operation} needs a checkpoint_id in the config"
            ))),
        }
    }

    /// Fails with [`Error::InvalidConfig`] when the thread id is empty.
    pub fn require_thread(&self, operation: &str) -> Result<&str> {
        if self.thread_id.is_empty() {
            return Err(Error::InvalidConfig(format!(
                "{operation} needs a non-empty thread_id"
            )));
        }
        Ok(&self.thread_id)
    }

    /// The exact three-field config of checkpoint `id` in `thread_id` / `ns`.
    pub fn of(thread_id: &str, ns: &str, id: &str) -> Self {
        CheckpointConfig {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: Some(ns.to_owned()),
            checkpoint_id: Some(id.to_owned()),
        }
    }
}

/// A value the runtime serialized: the format tag and the bytes. Savers never interpret it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SerializedValue {
    /// The format tag (`json`, `msgpack`, `postcard`, ..., `msgpack+aes-gcm:k1` when sealed).
    pub type_tag: Cow<'static, str>,
    /// The encoded value.
    pub bytes: Bytes,
}

impl SerializedValue {
    /// A value with the given tag and bytes.
    pub fn new(type_tag: impl Into<Cow<'static, str>>, bytes: impl Into<Bytes>) -> Self {
        SerializedValue {
            type_tag: type_tag.into(),
            bytes: bytes.into(),
        }
    }
}

/// A snapshot of a graph's channels at the end of one super-step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Format version ([`CHECKPOINT_VERSION`] for new checkpoints).
    pub v: u32,
    /// uuid6 id; string order is creation order.
    pub id: String,
    /// Creation time, RFC 3339 UTC with microseconds.
    pub ts: String,
    /// Channel name to serialized value; channels absent here but versioned are empty.
    #[serde(default)]
    pub channel_values: BTreeMap<String, SerializedValue>,
    /// Channel name to current version.
    #[serde(default)]
    pub channel_versions: ChannelVersions,
    /// Node name to the channel versions it has seen.
    #[serde(default)]
    pub versions_seen: BTreeMap<String, ChannelVersions>,
    /// Channels written in the step that produced this checkpoint, when known.
    #[serde(default)]
    pub updated_channels: Option<Vec<String>>,
}

impl Checkpoint {
    /// An empty checkpoint for super-step `step`, with a fresh id and the current time.
    pub fn new(step: i64) -> Self {
        Checkpoint {
            v: CHECKPOINT_VERSION,
            id: crate::id::checkpoint_id(step),
            ts: now_rfc3339(),
            channel_values: BTreeMap::new(),
            channel_versions: BTreeMap::new(),
            versions_seen: BTreeMap::new(),
            updated_channels: None,
        }
    }
}

/// The current UTC time as RFC 3339 with microseconds, as LangGraph writes `ts`.
pub fn now_rfc3339() -> String {
    let now = chrono::Utc::now();
    rfc3339_text(now.timestamp_micros())
        .unwrap_or_else(|| now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false))
}

/// [`rfc3339_micros`] as a `String`.
pub(crate) fn rfc3339_text(micros: i64) -> Option<String> {
    let text = rfc3339_micros(micros)?;
    std::str::from_utf8(&text).ok().map(str::to_owned)
}

/// `micros` since the Unix epoch as [`now_rfc3339`] writes it, the text chrono renders
/// (`2026-11-26T11:34:31.123456+00:00`), its digits written by hand (a step writes one);
/// `None` outside the years 0 to 9999, which chrono writes in other shapes.
pub(crate) fn rfc3339_micros(micros: i64) -> Option<[u8; 32]> {
    use chrono::{Datelike, Timelike};
    let t = chrono::DateTime::from_timestamp_micros(micros)?;
    let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
    let mut text = *b"0000-00-00T00:00:00.000000+00:00";
    for (at, width, n) in [
        (0, 4, year),
        (5, 2, t.month()),
        (8, 2, t.day()),
        (11, 2, t.hour()),
        (14, 2, t.minute()),
        (17, 2, t.second()),
        (20, 6, t.timestamp_subsec_micros()),
    ] {
        let mut n = n;
        for digit in text[at..at + width].iter_mut().rev() {
            *digit = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }
    Some(text)
}

/// The microseconds since the Unix epoch of a time in [`rfc3339_micros`]'s shape; `None`
/// for any other text, or a date or time that does not exist.
pub(crate) fn parse_rfc3339_micros(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let shape = b.len() == 32
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && &b[26..] == b"+00:00";
    if !shape {
        return None;
    }
    let number = |at: usize, width: usize| {
        b[at..at + width].iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let year = i32::try_from(number(0, 4)?).ok()?;
    let date = chrono::NaiveDate::from_ymd_opt(year, number(5, 2)?, number(8, 2)?)?;
    let (hour, minute, second) = (number(11, 2)?, number(14, 2)?, number(17, 2)?);
    let time = date.and_hms_micro_opt(hour, minute, second, number(20, 6)?)?;
    Some(time.and_utc().timestamp_micros())
}

/// Why a checkpoint was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointSource {
    /// Created from the input of `invoke` / `stream`.
    Input,
    /// Created inside the Pregel loop.
    Loop,
    /// Created by `update_state`.
    Update,
    /// A copy of another checkpoint.
    Fork,
}

impl CheckpointSource {
    /// The name it is stored as (`input`, `loop`, `update`, `fork`).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointSource::Input => "input",
            CheckpointSource::Loop => "loop",
            CheckpointSource::Update => "update",
            CheckpointSource::Fork => "fork",
        }
    }
}

/// Metadata stored beside a checkpoint, kept as the JSON the caller gave.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckpointMetadata {
    /// Why the checkpoint was written.
    pub source: Option<CheckpointSource>,
    /// Super-step: -1 for the input checkpoint, then 0, 1, ...
    pub step: Option<i64>,
    /// Namespace to checkpoint id of the parent graphs.
    pub parents: Option<BTreeMap<String, String>>,
    /// The run that wrote the checkpoint (used by `delete_for_runs`).
    pub run_id: Option<String>,
    /// Any other keys, stored and filtered as given.
    pub extra: Map<String, Value>,
}

const KNOWN_METADATA_KEYS: [&str; 4] = ["source", "step", "parents", "run_id"];

impl CheckpointMetadata {
    /// Metadata with `source` and `step` set.
    pub fn new(source: CheckpointSource, step: i64) -> Self {
        CheckpointMetadata {
            source: Some(source),
            step: Some(step),
            parents: Some(BTreeMap::new()),
            ..Default::default()
        }
    }

    /// The same metadata with `run_id` set.
    pub fn with_run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// The same metadata with an extra key.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// The metadata as a JSON object, the form filters match against.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut map = Map::with_capacity(self.extra.len() + 4);
        if let Some(source) = self.source {
            map.insert(
                "source".into(),
                serde_json::to_value(source).unwrap_or(Value::Null),
            );
        }
        if let Some(step) = self.step {
            map.insert("step".into(), step.into());
        }
        if let Some(parents) = &self.parents {
            let parents = parents
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            map.insert("parents".into(), Value::Object(parents));
        }
        if let Some(run_id) = &self.run_id {
            map.insert("run_id".into(), Value::String(run_id.clone()));
        }
        for (k, v) in &self.extra {
            map.insert(k.clone(), v.clone());
        }
        map
    }

    /// The keys and values of [`CheckpointMetadata::to_json`], in its order, borrowing what
    /// the metadata holds (encoding a record copies no value).
    pub(crate) fn json_entries(&self) -> Vec<(&str, JsonEntry<'_>)> {
        // The known keys in their order, merged with the extra keys (a map: in order too).
        let known = [
            ("parents", self.parents.as_ref().map(JsonEntry::Parents)),
            ("run_id", self.run_id.as_deref().map(JsonEntry::Str)),
            ("source", self.source.map(|s| JsonEntry::Str(s.as_str()))),
            ("step", self.step.map(|s| JsonEntry::Value(s.into()))),
        ];
        let mut known = known
            .into_iter()
            .filter_map(|(key, value)| Some((key, value?)))
            .peekable();
        let mut extra = self
            .extra
            .iter()
            .map(|(key, value)| (key.as_str(), JsonEntry::Extra(value)))
            .peekable();
        let mut entries = Vec::with_capacity(self.extra.len() + 4);
        loop {
            let next = match (known.peek(), extra.peek()) {
                (Some((k, _)), Some((e, _))) => match k.cmp(e) {
                    std::cmp::Ordering::Less => known.next(),
                    // An extra key named like a known one replaces it, as in `to_json`.
                    std::cmp::Ordering::Equal => known.next().and(extra.next()),
                    std::cmp::Ordering::Greater => extra.next(),
                },
                (Some(_), None) => known.next(),
                (None, Some(_)) => extra.next(),
                (None, None) => return entries,
            };
            entries.extend(next);
        }
    }

    /// Reads metadata from a JSON object; known keys of the wrong type are an error.
    pub fn from_json(mut map: Map<String, Value>) -> Result<Self> {
        fn bad(key: &str, v: &Value) -> Error {
            Error::Serialization {
                tag: "json".into(),
                path: Some(key.into()),
                message: format!("unexpected metadata value {v}"),
            }
        }
        let mut meta = CheckpointMetadata::default();
        for key in KNOWN_METADATA_KEYS {
            let Some(v) = map.remove(key) else { continue };
            match key {
                "source" => {
                    meta.source = Some(serde_json::from_value(v.clone()).map_err(|_| bad(key, &v))?)
                }
                "step" => meta.step = Some(v.as_i64().ok_or_else(|| bad(key, &v))?),
                "parents" => {
                    meta.parents =
                        Some(serde_json::from_value(v.clone()).map_err(|_| bad(key, &v))?)
                }
                _ => meta.run_id = Some(v.as_str().ok_or_else(|| bad(key, &v))?.to_owned()),
            }
        }
        meta.extra = map;
        Ok(meta)
    }

    /// Removes NUL characters from every top-level string, as every saver does on `put`.
    pub fn strip_nul(&mut self) {
        if let Some(run_id) = &mut self.run_id {
            run_id.retain(|c| c != '\0');
        }
        for v in self.extra.values_mut() {
            if let Value::String(s) = v {
                s.retain(|c| c != '\0');
            }
        }
    }
}

/// The form metadata takes in binary formats, which cannot hold free-form JSON natively.
#[derive(Serialize, Deserialize)]
struct BinaryMetadata {
    source: Option<CheckpointSource>,
    step: Option<i64>,
    parents: Option<BTreeMap<String, String>>,
    run_id: Option<String>,
    /// The extra keys as compact JSON text.
    extra: String,
}

impl Serialize for CheckpointMetadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return self.to_json().serialize(s);
        }
        let extra = serde_json::to_string(&self.extra).map_err(serde::ser::Error::custom)?;
        BinaryMetadata {
            source: self.source,
            step: self.step,
            parents: self.parents.clone(),
            run_id: self.run_id.clone(),
            extra,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for CheckpointMetadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let map = Map::<String, Value>::deserialize(d)?;
            return CheckpointMetadata::from_json(map).map_err(serde::de::Error::custom);
        }
        let b = BinaryMetadata::deserialize(d)?;
        let extra: Map<String, Value> =
            serde_json::from_str(&b.extra).map_err(serde::de::Error::custom)?;
        if let Some(key) = KNOWN_METADATA_KEYS.iter().find(|k| extra.contains_key(**k)) {
            return Err(serde::de::Error::custom(format!(
                "metadata key `{key}` stored twice"
            )));
        }
        Ok(CheckpointMetadata {
            source: b.source,
            step: b.step,
            parents: b.parents,
            run_id: b.run_id,
            extra,
        })
    }
}

/// One value of a metadata's JSON form, borrowed where the metadata holds it; it
/// serializes as the JSON value would.
pub(crate) enum JsonEntry<'a> {
    /// A value made for the entry (`step`).
    Value(Value),
    /// `parents`.
    Parents(&'a BTreeMap<String, String>),
    /// `source` or `run_id`.
    Str(&'a str),
    /// An extra key's value.
    Extra(&'a Value),
}

impl Serialize for JsonEntry<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            JsonEntry::Value(v) => v.serialize(s),
            JsonEntry::Parents(p) => p.serialize(s),
            JsonEntry::Str(v) => s.serialize_str(v),
            JsonEntry::Extra(v) => v.serialize(s),
        }
    }
}

/// One write a task produced for a channel, pending until the next checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingWrite {
    /// The task that produced the write.
    pub task_id: String,
    /// The channel written.
    pub channel: String,
    /// The value written.
    pub value: SerializedValue,
}

/// A checkpoint with its config, metadata, parent and pending writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointTuple {
    /// The exact three-field config of this checkpoint.
    pub config: CheckpointConfig,
    /// The checkpoint with every channel value materialised.
    pub checkpoint: Checkpoint,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
    /// The parent's config, `None` for the first checkpoint of a namespace.
    pub parent_config: Option<CheckpointConfig>,
    /// Writes stored against this checkpoint, ordered by `(task_path, task_id, idx)`.
    pub pending_writes: Vec<PendingWrite>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source's name is the one serde stores.
    #[test]
    fn source_names_are_serdes() {
        use CheckpointSource::*;
        for source in [Input, Loop, Update, Fork] {
            assert_eq!(serde_json::to_value(source).unwrap(), source.as_str());
        }
    }

    /// The hand-written time text is chrono's, and reads back, from year 0 to 9999.
    #[test]
    fn rfc3339_micros_is_chronos_text() {
        let chrono_text = |micros: i64| {
            chrono::DateTime::from_timestamp_micros(micros)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, false))
        };
        let first = -62_167_219_200_000_000; // 0000-01-01T00:00:00
        let last = 253_402_300_799_999_999; // 9999-12-31T23:59:59.999999
        let mut samples = vec![
            first,
            last,
            0,
            -1,
            1,
            951_782_400_000_000,
            1_764_156_871_123_456,
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push(first + (x % (last - first) as u64) as i64);
        }
        for micros in samples {
            let text = rfc3339_micros(micros).expect("in range");
            let text = std::str::from_utf8(&text).expect("ascii");
            assert_eq!(Some(text.to_owned()), chrono_text(micros), "{micros}");
            assert_eq!(parse_rfc3339_micros(text), Some(micros), "{text}");
        }
        assert_eq!(rfc3339_micros(first - 1), None);
        assert_eq!(rfc3339_micros(last + 1), None);
    }

    /// Other shapes, and dates and times that do not exist, do not parse.
    #[test]
    fn parse_rfc3339_micros_takes_one_shape() {
        for text in [
            "2026-11-26T11:34:31.123456Z",
            "2026-11-26T11:34:31.123456+01:00",
            "2026-11-26T11:34:31+00:00",
            "2026-13-26T11:34:31.123456+00:00",
            "2026-11-26T24:34:31.123456+00:00",
            "2026-11-26T11:34:60.123456+00:00",
            "2026-11-26 11:34:31.123456+00:00",
            "2026-1a-26T11:34:31.123456+00:00",
            "+2026-11-26T11:34:31.12345+00:00",
            "2023-02-30T00:00:00.000000+00:00",
            "2023-02-28T00:00:00.1000000+00:00",
        ] {
            assert_eq!(parse_rfc3339_micros(text), None, "{text}");
        }
    }

    #[test]
    fn json_entries_encode_as_to_json() {
        let parents = BTreeMap::from([("inner".to_owned(), "1ef-a".to_owned())]);
        let full = CheckpointMetadata {
            parents: Some(parents),
            ..CheckpointMetadata::new(CheckpointSource::Loop, 4)
        }
        .with_run_id("run-1")
        .with(
            "writes",
            serde_json::json!({"node": {"messages": [1, "two", null]}}),
        )
        .with("aaa", -3)
        .with("zzz", 2.5);
        let mut shadowed = full.clone();
        shadowed.extra.insert("step".into(), "not a number".into());
        for metadata in [full, shadowed, CheckpointMetadata::default()] {
            let entries = metadata.json_entries();
            let json = metadata.to_json();
            assert_eq!(entries.len(), json.len());
            for ((key, value), (json_key, json_value)) in entries.iter().zip(&json) {
                assert_eq!(key, json_key);
                assert_eq!(
                    rmp_serde::to_vec(value).unwrap(),
                    rmp_serde::to_vec(json_value).unwrap()
                );
            }
        }
    }
}
