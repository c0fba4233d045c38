//! Delta histories: what rebuilds an appending channel at a checkpoint (its seed value and the
//! writes since), read in one transaction.
//!
//! See [`delta_history`].

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use memchr::memmem;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use serde_json::Value;
use waypoint_checkpoint::serde::record;
use waypoint_checkpoint::{ChannelVersion, Error, Result};

use crate::convert::{RawBlob, RawWrite, type_tag_at};
use crate::error::sqlite_error;

/// The stored (non-empty) versions of one channel: the values a walk can stop at.
#[derive(Default)]
struct Seeds {
    versions: HashSet<String>,
    /// The same versions by their encoding in a compact record, so a record's version is
    /// looked up once, however many versions are stored (a point forked many times stores
    /// one snapshot per fork, all of one counter).
    by_encoding: HashMap<Vec<u8>, String>,
    /// What a compact record holds where it names one of `versions`, while few enough to
    /// search for: a record without any of these bytes names none (see [`Seeds::found_in`]).
    searched: Option<Vec<memmem::Finder<'static>>>,
}

/// Distinct searched bytes (see [`Seeds::searched`]) up to which a record is searched
/// before it is decoded.
const SEARCHED: usize = 8;

impl Seeds {
    /// Adds a stored version.
    fn insert(&mut self, version: String) {
        let encoded = record::encode_version(&ChannelVersion::new(version.as_str()));
        if self.versions.is_empty() {
            self.searched = Some(Vec::new());
        }
        if let Some(searched) = &mut self.searched {
            // A prefix of the encoding is found wherever the encoding is: the versions a
            // fork or a snapshot stores share their counter (the prefix) and differ in
            // the suffix's 8 bytes, which are left out here.
            let suffix = if encoded.len() > 9 { 8 } else { 0 };
            let prefix = &encoded[..encoded.len() - suffix];
            if !searched.iter().any(|f| f.needle() == prefix) {
                searched.push(memmem::Finder::new(prefix).into_owned());
            }
            if searched.len() > SEARCHED {
                self.searched = None;
            }
        }
        self.by_encoding.insert(encoded, version.clone());
        self.versions.insert(version);
    }

    /// The version of `channel` that `stored` (a checkpoint's compact record, or the JSON of
    /// earlier versions) names, when it is stored.
    fn found_in(&self, stored: &[u8], channel: &str) -> Result<Option<String>> {
        if record::is_compact(stored) {
            // The version a record names is a slice of it: without any stored version's
            // bytes, the record names none (most ancestors of a long delta history).
            if let Some(searched) = &self.searched
                && !searched.iter().any(|f| f.find(stored).is_some())
            {
                return Ok(None);
            }
            let Some(encoded) = record::channel_version_encoded(stored, channel)? else {
                return Ok(None);
            };
            return Ok(self.by_encoding.get(encoded).cloned());
        }
        Ok(version_named(stored, channel)?.filter(|v| self.versions.contains(v)))
    }
}

/// The version of `channel` that `stored` (a checkpoint's compact record, or the JSON of
/// earlier versions) names, as text.
fn version_named(stored: &[u8], channel: &str) -> Result<Option<String>> {
    if record::is_compact(stored) {
        return Ok(record::channel_version(stored, channel)?.map(|v| v.as_str().to_owned()));
    }
    let text = std::str::from_utf8(stored).map_err(|e| Error::serialization("json", e))?;
    match scan_version(text, channel) {
        Some(found) => Ok(found.map(str::to_owned)),
        None => parse_version(text, channel),
    }
}

/// The version of `channel` in checkpoint JSON as this crate writes it (`..."channel_values":
/// {},"channel_versions":{"name":"version",...}...`), read without parsing the rest; `None`
/// when the text is not in that form (escapes, other layouts), for [`parse_version`].
fn scan_version<'t>(text: &'t str, channel: &str) -> Option<Option<&'t str>> {
    const OPEN: &str = "\"channel_values\":{},\"channel_versions\":{";
    let mut rest = &text[text.find(OPEN)? + OPEN.len()..];
    loop {
        if rest.starts_with('}') {
            return Some(None);
        }
        let (key, after) = quoted(rest)?;
        let after = after.strip_prefix(':')?;
        let (value, after) = match after.strip_prefix('"') {
            Some(_) => quoted(after)?,
            None => {
                let end = after.find([',', '}'])?;
                let digits = &after[..end];
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                (digits, &after[end..])
            }
        };
        if key == channel {
            return Some(Some(value));
        }
        rest = match after.strip_prefix(',') {
            Some(next) => next,
            None if after.starts_with('}') => after,
            None => return None,
        };
    }
}

/// A JSON string without escapes at the start of `text`, and what follows it.
fn quoted(text: &str) -> Option<(&str, &str)> {
    let body = text.strip_prefix('"')?;
    // One pass: the closing quote, unless an escape comes first.
    let end = body.bytes().position(|b| b == b'"' || b == b'\\')?;
    (body.as_bytes()[end] == b'"').then(|| (&body[..end], &body[end + 1..]))
}

/// The version of `channel` in any checkpoint JSON, read as `CAST(json_extract(..) AS TEXT)`
/// reads it: integer versions of older savers match their text.
fn parse_version(text: &str, channel: &str) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct Versions {
        #[serde(default)]
        channel_versions: serde_json::Map<String, Value>,
    }
    let parsed: Versions =
        serde_json::from_str(text).map_err(|e| Error::serialization("json", e))?;
    Ok(match parsed.channel_versions.get(channel) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

/// What [`delta_history`] read: the ancestors walked (parent first) and, for each channel,
/// its history.
#[derive(Debug, Default)]
pub(crate) struct DeltaRead {
    pub(crate) chain: Vec<String>,
    pub(crate) histories: BTreeMap<String, RawHistory>,
}

/// One channel's history as read: its writes oldest first, each with the position in
/// [`DeltaRead::chain`] of the checkpoint it belongs to, and the seed value if an ancestor
/// has one.
#[derive(Debug, Default)]
pub(crate) struct RawHistory {
    pub(crate) writes: Vec<(usize, RawWrite)>,
    pub(crate) seed: Option<RawBlob>,
}

/// A checkpoint's id, parent and record, by key.
const CHECKPOINT_AT: &str =
    "SELECT checkpoint_id, parent_checkpoint_id, checkpoint FROM checkpoints
    WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3";

/// For each channel, its writes (oldest first) and seed, walking parent links from the
/// parent of `target` (the latest when `None`); an unknown target gives empty histories.
///
/// The usual thread is a chain whose ids fall as parent links are followed (ids are
/// time-ordered and a parent is made before its children): one range scan of the thread's
/// checkpoints, newest first, meets the chain in order. From the first link that does not
/// fall on, ancestors are read one by one, and a link back into the walk (a checkpoint
/// stored as its own parent, or a longer loop, in rows written by others) ends it, as it
/// ends the generic walk. A checkpoint's version of a channel is read from its record in
/// place (see [`Seeds::found_in`]); the writes come from one range scan per channel.
pub(crate) fn delta_history(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    target: Option<&str>,
    channels: &[String],
) -> Result<DeltaRead> {
    let mut out = DeltaRead {
        chain: Vec::new(),
        histories: channels
            .iter()
            .map(|c| (c.clone(), RawHistory::default()))
            .collect(),
    };
    // The target's id, parent and record (JSON text or a compact blob).
    let (target_id, parent, record) = {
        let mut stmt = conn
            .prepare_cached(match target {
                Some(_) => CHECKPOINT_AT,
                None => {
                    "SELECT checkpoint_id, parent_checkpoint_id, checkpoint FROM checkpoints
                     WHERE thread_id = ?1 AND checkpoint_ns = ?2
                     ORDER BY checkpoint_id DESC LIMIT 1"
                }
            })
            .map_err(sqlite_error)?;
        let mut rows = match target {
            Some(id) => stmt.query(params![thread_id, ns, id]),
            None => stmt.query(params![thread_id, ns]),
        }
        .map_err(sqlite_error)?;
        let Some(row) = rows.next().map_err(sqlite_error)? else {
            return Ok(out);
        };
        let target_id: String = row.get(0).map_err(sqlite_error)?;
        let parent: Option<String> = row.get(1).map_err(sqlite_error)?;
        (target_id, parent, bytes_at(row, 2)?.to_vec())
    };
    let seeds = stored_versions(conn, thread_id, ns, &record, &out.histories)?;
    let wanted = out.histories.len();
    let (chain, seeded) = walk(conn, thread_id, ns, &target_id, parent, &seeds, wanted)?;
    // Ancestors by id, newest first: the order the writes' scan meets them in reversed (the
    // chain's own order when its ids fall).
    let mut by_id: Vec<usize> = (0..chain.len()).collect();
    by_id.sort_by(|a, b| chain[*b].cmp(&chain[*a]));
    for (channel, history) in out.histories.iter_mut() {
        let seed = seeded.get(channel);
        let len = seed.map_or(chain.len(), |(at, _)| at + 1);
        let ancestors: Vec<usize> = by_id.iter().copied().filter(|i| *i < len).collect();
        history.writes = writes(conn, thread_id, ns, channel, &chain, &ancestors)?;
        if let Some((_, version)) = seed {
            history.seed = conn
                .prepare_cached(
                    "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = ?1
                         AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4",
                )
                .and_then(|mut s| {
                    s.query_row(params![thread_id, ns, channel, version], |r| {
                        Ok(RawBlob {
                            channel: channel.clone(),
                            version: version.clone(),
                            type_tag: r.get(0)?,
                            blob: Bytes::from(r.get::<_, Vec<u8>>(1)?),
                        })
                    })
                    .optional()
                })
                .map_err(sqlite_error)?;
        }
    }
    out.chain = chain;
    Ok(out)
}

/// The two ranges of [`stored_versions`], read through the index `$by` names (migration 7's
/// index of stored values, whose range skips the empty markers and is read without the rows;
/// empty on databases without it).
macro_rules! stored_versions_sql {
    ($by:literal) => {
        concat!(
            "SELECT version FROM checkpoint_blobs",
            $by,
            " WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3 AND version <= ?4
                 AND type <> 'empty'
             UNION ALL
             SELECT version FROM checkpoint_blobs",
            $by,
            " WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3 AND version >= '1'
                 AND version > ?4 AND type <> 'empty'"
        )
    };
}

/// The stored (non-empty) versions of each channel of `wanted` that the ancestors of the
/// checkpoint whose record is `target` may name. A row of another writer with a type but no
/// blob is listed too (the index does not read rows); the walk passes over it.
///
/// Along a chain a channel's counter never falls, so an ancestor's version in LangGraph's
/// form (a 32-digit counter, zero-padded, then a dot and the suffix) sorts at or below the
/// target's. The versions above it that start with `0` (that form) belong to other branches,
/// such as the snapshots of the target's own forks, and are not read: a thread forked many
/// times from one place reads no more for it. Two index ranges read the rest: up to the
/// target's version, and from `1` on (integer versions of older savers, any other text).
fn stored_versions<T>(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    target: &[u8],
    wanted: &BTreeMap<String, T>,
) -> Result<BTreeMap<String, Seeds>> {
    let mut seeds: BTreeMap<String, Seeds> = BTreeMap::new();
    let mut stmt = match conn.prepare_cached(stored_versions_sql!(
        " INDEXED BY checkpoint_blobs_stored_idx"
    )) {
        Ok(stmt) => stmt,
        // A database of schema version 6 or older, opened without setup (no index, or
        // migration 6's, which this query cannot use); any other failure is the caller's.
        Err(rusqlite::Error::SqliteFailure(_, Some(message)))
            if message.starts_with("no such index") || message.starts_with("no query solution") =>
        {
            conn.prepare_cached(stored_versions_sql!(""))
                .map_err(sqlite_error)?
        }
        Err(e) => return Err(sqlite_error(e)),
    };
    // Without a target version in that form: the first range reads up to `~~~~`, and
    // everything above it also sorts from `1` on, so the two ranges read every version.
    const UNBOUNDED: &str = "~~~~";
    for channel in wanted.keys() {
        let bound = version_named(target, channel)?.filter(|v| {
            let b = v.as_bytes();
            b.len() > 32 && b[32] == b'.' && b[..32].iter().all(u8::is_ascii_digit)
        });
        let bound = bound.as_deref().unwrap_or(UNBOUNDED);
        let mut rows = stmt
            .query(params![thread_id, ns, channel, bound])
            .map_err(sqlite_error)?;
        while let Some(row) = rows.next().map_err(sqlite_error)? {
            let version: String = row.get(0).map_err(sqlite_error)?;
            seeds.entry(channel.clone()).or_default().insert(version);
        }
    }
    Ok(seeds)
}

/// Where each channel's seed is: its position in the chain and its version.
type Seeded = BTreeMap<String, (usize, String)>;

/// The ancestors of `target_id` from its `parent` on (parent first), until every channel of
/// `channels` found its seed (in `seeds`, the stored versions of those that have any), and
/// where each found it.
fn walk(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    target_id: &str,
    parent: Option<String>,
    seeds: &BTreeMap<String, Seeds>,
    channels: usize,
) -> Result<(Vec<String>, Seeded)> {
    let mut chain: Vec<String> = Vec::new();
    let mut seeded = Seeded::new();
    let mut scan = conn
        .prepare_cached(
            "SELECT checkpoint_id, parent_checkpoint_id, checkpoint FROM checkpoints
             WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id < ?3
             ORDER BY checkpoint_id DESC",
        )
        .map_err(sqlite_error)?;
    let mut rows = scan
        .query(params![thread_id, ns, target_id])
        .map_err(sqlite_error)?;
    let mut by_key = conn.prepare_cached(CHECKPOINT_AT).map_err(sqlite_error)?;
    // Whether a listed version's row holds a value, checked only where the walk would stop.
    let mut holds_value = conn
        .prepare_cached(
            "SELECT blob IS NOT NULL FROM checkpoint_blobs WHERE thread_id = ?1
             AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4",
        )
        .map_err(sqlite_error)?;
    let mut falling = true;
    let mut next = parent;
    while let Some(wanted) = next.take() {
        if falling && wanted.as_str() >= chain.last().map_or(target_id, String::as_str) {
            falling = false;
        }
        // Only a link that did not fall can close a loop, so only then is the walk searched.
        if !falling && (wanted == target_id || chain.contains(&wanted)) {
            break;
        }
        let mut one;
        let row = if falling {
            // Rows newer than the wanted id are other branches; older ones mean it is missing.
            loop {
                match rows.next().map_err(sqlite_error)? {
                    Some(row) => {
                        let id = bytes_at(row, 0)?;
                        if id > wanted.as_bytes() {
                            continue;
                        }
                        break (id == wanted.as_bytes()).then_some(row);
                    }
                    None => break None,
                }
            }
        } else {
            one = by_key
                .query(params![thread_id, ns, wanted])
                .map_err(sqlite_error)?;
            one.next().map_err(sqlite_error)?
        };
        let Some(row) = row else {
            break;
        };
        // The record is read in place, and only while a channel may still find its seed.
        for (channel, seeds) in seeds {
            if !seeded.contains_key(channel)
                && let Some(version) = seeds.found_in(bytes_at(row, 2)?, channel)?
                && holds_value
                    .query_row(params![thread_id, ns, channel, version], |r| r.get(0))
                    .optional()
                    .map_err(sqlite_error)?
                    .unwrap_or(false)
            {
                seeded.insert(channel.clone(), (chain.len(), version));
            }
        }
        next = row.get(1).map_err(sqlite_error)?;
        chain.push(wanted);
        // A channel without any stored version never finds a seed: it walks the whole chain.
        if seeded.len() == channels {
            break;
        }
    }
    Ok((chain, seeded))
}

/// The writes to `channel` of the chain's `ancestors` (positions in `chain`, by id newest
/// first), oldest ancestor first and by `(task_path, task_id, idx)` within one, as
/// `get_tuple` orders a checkpoint's writes.
fn writes(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    channel: &str,
    chain: &[String],
    ancestors: &[usize],
) -> Result<Vec<(usize, RawWrite)>> {
    let (Some(newest), Some(oldest)) = (ancestors.first(), ancestors.last()) else {
        return Ok(Vec::new());
    };
    // Rows come by id, oldest first, as the ancestors read backwards (`ancestors[..left]`
    // are those not passed yet): a merge picks the ancestors' rows from those of other
    // branches in the range, without hashing.
    let mut left = ancestors.len();
    let mut stmt = conn
        .prepare_cached(
            "SELECT checkpoint_id, task_path, task_id, idx, type, blob
             FROM checkpoint_writes
             WHERE thread_id = ?1 AND checkpoint_ns = ?2
                 AND checkpoint_id BETWEEN ?3 AND ?4 AND channel = ?5
             ORDER BY checkpoint_id",
        )
        .map_err(sqlite_error)?;
    let mut rows = stmt
        .query(params![
            thread_id,
            ns,
            chain[*oldest],
            chain[*newest],
            channel
        ])
        .map_err(sqlite_error)?;
    // Task paths, distinct: a write keeps the index of its own (few in a thread), not a copy.
    let mut paths: Vec<String> = Vec::new();
    // (ancestor's position, task path's index, write): ordered below, which the index does
    // not give (SQLite would sort each checkpoint's rows in a temporary b-tree). Sized for
    // one write per ancestor, an appending channel's usual history, so it rarely grows.
    let mut found: Vec<(usize, usize, RawWrite)> = Vec::with_capacity(ancestors.len());
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        let at = bytes_at(row, 0)?;
        while left > 0 && chain[ancestors[left - 1]].as_bytes() < at {
            left -= 1;
        }
        let Some(&ancestor) = left.checked_sub(1).map(|i| &ancestors[i]) else {
            break;
        };
        if chain[ancestor].as_bytes() != at {
            continue;
        }
        let path = bytes_at(row, 1)?;
        let path = match paths.iter().position(|p| p.as_bytes() == path) {
            Some(i) => i,
            None => {
                paths.push(row.get(1).map_err(sqlite_error)?);
                paths.len() - 1
            }
        };
        let write = RawWrite {
            task_id: row.get(2).map_err(sqlite_error)?,
            idx: row.get(3).map_err(sqlite_error)?,
            channel: channel.to_owned(),
            type_tag: type_tag_at(row, 4).map_err(sqlite_error)?,
            blob: row.get(5).map_err(sqlite_error)?,
        };
        found.push((ancestor, path, write));
    }
    // Stable and nearly sorted already: one comparison per write.
    found.sort_by(|(at_a, path_a, a), (at_b, path_b, b)| {
        (Reverse(*at_a), &paths[*path_a], &a.task_id, a.idx).cmp(&(
            Reverse(*at_b),
            &paths[*path_b],
            &b.task_id,
            b.idx,
        ))
    });
    Ok(found.into_iter().map(|(at, _, w)| (at, w)).collect())
}

/// Column `i` of `row` as the bytes of its text or blob, in place.
fn bytes_at<'r>(row: &'r rusqlite::Row<'_>, i: usize) -> Result<&'r [u8]> {
    match row.get_ref(i).map_err(sqlite_error)? {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => Ok(bytes),
        other => Err(Error::backend(
            "sqlite",
            format!("expected text in column {i}, found {:?}", other.data_type()),
        )),
    }
}

#[cfg(test)]
mod tests {
    /// The text scan reads what the JSON parse reads, or declines.
    #[test]
    fn scanned_versions_agree_with_parsed_ones() {
        let texts = [
            r#"{"v":4,"id":"x","channel_values":{},"channel_versions":{"a":"01.5","m":"02.7"},"versions_seen":{"n":{"m":"09.1"}}}"#,
            r#"{"v":4,"channel_values":{},"channel_versions":{"m":3,"a":"1"}}"#,
            r#"{"v":4,"channel_values":{},"channel_versions":{}}"#,
            r#"{"v":4,"channel_values":{},"channel_versions":{"q\"x":"5","m":"6"}}"#,
            r#"{"v":4,"channel_versions":{"m":"7"},"channel_values":{}}"#,
            r#"{"v":4,"channel_values":{},"channel_versions":{"m":3.5}}"#,
        ];
        for text in texts {
            for channel in ["m", "a", "q\"x", "absent"] {
                let parsed = super::parse_version(text, channel).expect("valid JSON");
                if let Some(scanned) = super::scan_version(text, channel) {
                    assert_eq!(scanned.map(str::to_owned), parsed, "{channel} in {text}");
                }
            }
        }
        // Declined: escapes, another layout, a non-integer number.
        assert_eq!(super::scan_version(texts[3], "m"), None);
        assert_eq!(super::scan_version(texts[4], "m"), None);
        assert_eq!(super::scan_version(texts[5], "m"), None);
        assert_eq!(super::scan_version(texts[0], "m"), Some(Some("02.7")));
        assert_eq!(super::scan_version(texts[1], "m"), Some(Some("3")));
    }

    use waypoint_checkpoint::{
        ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
        CheckpointSaver, CheckpointSource, SerializedValue,
    };

    use crate::SqliteSaver;
    use waypoint_checkpoint::raw::walk_delta_history;

    fn val(text: &str) -> SerializedValue {
        SerializedValue::new("json", format!("{text:?}").into_bytes())
    }

    /// The saver's delta history at `config` is the generic walk's.
    async fn agrees_with_generic_walk(
        saver: &SqliteSaver,
        config: &CheckpointConfig,
        wanted: &[String],
    ) {
        let fast = saver
            .delta_channel_history(config, wanted)
            .await
            .expect("history");
        let slow = walk_delta_history(saver, config, wanted)
            .await
            .expect("walk");
        assert_eq!(fast, slow, "at {config:?}");
    }

    /// Puts checkpoint `step` of channel `m` at `version` under `parent`, holding `m`'s value
    /// inline when `snapshot` names one, and one write of `m` to it; returns its config.
    async fn put_step(
        saver: &SqliteSaver,
        parent: &CheckpointConfig,
        step: i64,
        version: ChannelVersion,
        snapshot: Option<&str>,
    ) -> CheckpointConfig {
        let mut cp = Checkpoint::new(step);
        if let Some(value) = snapshot {
            cp.channel_values.insert("m".to_owned(), val(value));
        }
        cp.channel_versions.insert("m".to_owned(), version.clone());
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
        let new_versions = ChannelVersions::from([("m".to_owned(), version)]);
        let config = saver
            .put(parent, cp, meta, new_versions)
            .await
            .expect("put");
        saver
            .put_writes(
                &config,
                vec![("m".to_owned(), val(&format!("w {step}")))],
                "t",
                "",
            )
            .await
            .expect("writes");
        config
    }

    /// Names a JSON path would need escaped, a channel nobody wrote, a repeated name, and task
    /// paths that order the tasks the other way round from their ids: the one-statement
    /// history agrees with the generic walk at every checkpoint.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delta_history_matches_generic_walk_for_odd_channel_names() {
        let dir = tempfile::tempdir().expect("temp dir");
        let saver = SqliteSaver::from_path(dir.path().join("d.db"))
            .await
            .expect("open");
        let names = ["a.b", "q\"x", "$.c", "plain", "back\\slash"];
        let mut parent = CheckpointConfig::new("t").with_ns("");
        let mut configs = Vec::new();
        let mut versions = ChannelVersions::new();
        for step in 0..9i64 {
            let mut cp = Checkpoint::new(step);
            let mut new_versions = ChannelVersions::new();
            for (i, name) in names.iter().enumerate() {
                let next = ChannelVersion::next(versions.get(*name)).expect("version");
                versions.insert((*name).to_owned(), next.clone());
                new_versions.insert((*name).to_owned(), next);
                if step % (i as i64 + 2) == 0 {
                    cp.channel_values
                        .insert((*name).to_owned(), val(&format!("seed {step}")));
                }
            }
            cp.channel_versions = versions.clone();
            let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
            parent = saver
                .put(&parent, cp, meta, new_versions)
                .await
                .expect("put");
            let tasks = [("t2", "Zed"), ("t1", "~__pregel_push, 0000000000, False")];
            for ((task, path), name) in tasks.iter().zip(names.iter().rev()) {
                let writes = vec![
                    ((*name).to_owned(), val(&format!("{task} {step}"))),
                    ("a.b".to_owned(), val(&format!("{task} {step} again"))),
                ];
                saver
                    .put_writes(&parent, writes, task, path)
                    .await
                    .expect("writes");
            }
            configs.push(parent.clone());
        }
        let mut wanted: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        wanted.extend(["missing".to_owned(), "a.b".to_owned()]);
        configs.push(CheckpointConfig::new("t").with_ns(""));
        for config in &configs {
            agrees_with_generic_walk(&saver, config, &wanted).await;
        }
    }

    /// A branching thread (forks, snapshots on some branches, hand-made ids that break time
    /// order, task paths that order tasks against their ids): the saver agrees with the
    /// generic walk everywhere.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delta_history_matches_generic_walk_on_branching_threads() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("d.db");
        let saver = SqliteSaver::from_path(&path).await.expect("open");
        let mut lcg = 0x2545_f491_4f6c_dd1du64;
        let mut roll = move |n: u64| {
            lcg = lcg.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (lcg >> 33) % n
        };
        let channels = ["messages", "notes"];
        // (config, channel versions) of every checkpoint so far.
        let mut made: Vec<(CheckpointConfig, ChannelVersions)> = Vec::new();
        for step in 0..60i64 {
            let (parent, mut versions) = match made.len() {
                0 => (
                    CheckpointConfig::new("t").with_ns(""),
                    ChannelVersions::new(),
                ),
                n => {
                    // Mostly extend the newest checkpoint, sometimes fork an older one.
                    let at = if roll(4) == 0 {
                        roll(n as u64) as usize
                    } else {
                        n - 1
                    };
                    made[at].clone()
                }
            };
            let mut cp = Checkpoint::new(step);
            if roll(8) == 0 {
                // An id that sorts before its parent's: the range walk must step aside.
                cp.id = format!("0-hand-made-{step:03}");
            }
            let mut new_versions = ChannelVersions::new();
            for channel in channels {
                if roll(2) == 0 {
                    let next = ChannelVersion::next(versions.get(channel)).expect("version");
                    versions.insert(channel.to_owned(), next.clone());
                    new_versions.insert(channel.to_owned(), next);
                    if roll(5) == 0 {
                        cp.channel_values
                            .insert(channel.to_owned(), val(&format!("snapshot {step}")));
                    }
                }
            }
            cp.channel_versions = versions.clone();
            let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
            let config = saver
                .put(&parent, cp, meta, new_versions)
                .await
                .expect("put");
            for (task, path) in [("t1", "~__pregel_push, 0000000000, False"), ("t2", "a")] {
                if roll(3) > 0 {
                    let channel = channels[roll(2) as usize];
                    let writes = vec![(channel.to_owned(), val(&format!("{task} {step}")))];
                    saver
                        .put_writes(&config, writes, task, path)
                        .await
                        .expect("writes");
                }
            }
            made.push((config, versions));
        }
        let wanted: Vec<String> = ["messages", "notes", "missing"]
            .iter()
            .map(|c| (*c).to_owned())
            .collect();
        for (config, _) in &made {
            agrees_with_generic_walk(&saver, config, &wanted).await;
        }
    }

    /// Many stored versions (more than a record is searched for, see `SEARCHED`), versions
    /// with and without a suffix, and several forks of one checkpoint (stored versions that
    /// share a counter): the range walk answers as the generic walk at every checkpoint.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn range_walk_agrees_with_many_stored_versions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let saver = SqliteSaver::from_path(dir.path().join("d.db"))
            .await
            .expect("open");
        let wanted = ["m".to_owned()];
        for snapshot_every in [3i64, 7, 1000] {
            let thread = format!("t{snapshot_every}");
            let mut parent = CheckpointConfig::new(thread.as_str()).with_ns("");
            let mut version: Option<ChannelVersion> = None;
            let mut configs = Vec::new();
            for step in 0..40i64 {
                let before = version.clone();
                let next = match step % 2 {
                    0 => ChannelVersion::next(version.as_ref()).expect("version"),
                    _ => ChannelVersion::from((step + 1) as u64 * 10),
                };
                version = Some(next.clone());
                let snapshot = format!("snapshot {step}");
                let snapshot = (step % snapshot_every == 0).then_some(snapshot.as_str());
                let config = put_step(&saver, &parent, step, next, snapshot).await;
                if step % 10 == 5 {
                    // A fork of the parent: a sibling holding a snapshot at the same counter.
                    let mut fork = Checkpoint::new(step);
                    let forked = ChannelVersion::next(before.as_ref()).expect("version");
                    fork.channel_values.insert("m".to_owned(), val("fork"));
                    fork.channel_versions.insert("m".to_owned(), forked.clone());
                    let fork_config = saver
                        .put(
                            &parent,
                            fork,
                            CheckpointMetadata::new(CheckpointSource::Loop, step),
                            ChannelVersions::from([("m".to_owned(), forked)]),
                        )
                        .await
                        .expect("fork");
                    configs.push(fork_config);
                }
                configs.push(config.clone());
                parent = config;
            }
            configs.push(CheckpointConfig::new(thread.as_str()).with_ns(""));
            for config in &configs {
                agrees_with_generic_walk(&saver, config, &wanted).await;
            }
        }
    }

    /// A database without migration 6's index (an older schema opened without setup) reads
    /// the same histories through the primary key, and with the index skipped empty markers
    /// change nothing: seeds below, between and above runs of empty markers are found.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stored_versions_read_alike_with_and_without_the_index() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("d.db");
        let saver = SqliteSaver::from_path(&path).await.expect("open");
        let wanted = ["m".to_owned()];
        let mut parent = CheckpointConfig::new("t").with_ns("");
        let mut version: Option<ChannelVersion> = None;
        let mut configs = Vec::new();
        for step in 0..30i64 {
            let next = ChannelVersion::next(version.as_ref()).expect("version");
            version = Some(next.clone());
            // Snapshots now and then; every other step stores an empty marker.
            let snapshot = format!("snapshot {step}");
            let snapshot = (step % 11 == 4).then_some(snapshot.as_str());
            let config = put_step(&saver, &parent, step, next, snapshot).await;
            configs.push(config.clone());
            parent = config;
        }
        let conn = rusqlite::Connection::open(&path).expect("open raw");
        let (empty, indexed): (i64, i64) = conn
            .query_row(
                "SELECT count(*) FILTER (WHERE type = 'empty'),
                     (SELECT count(*) FROM checkpoint_blobs INDEXED BY checkpoint_blobs_stored_idx
                      WHERE thread_id = 't' AND checkpoint_ns = '' AND channel = 'm'
                          AND type <> 'empty' AND blob IS NOT NULL)
                 FROM checkpoint_blobs WHERE channel = 'm'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("count");
        assert!(empty > 20, "empty markers between the snapshots: {empty}");
        assert_eq!(indexed, 3, "the index holds the snapshots only");
        let mut with_index = Vec::new();
        for config in &configs {
            agrees_with_generic_walk(&saver, config, &wanted).await;
            with_index.push(
                saver
                    .delta_channel_history(config, &wanted)
                    .await
                    .expect("read"),
            );
        }
        conn.execute_batch("DROP INDEX checkpoint_blobs_stored_idx")
            .expect("drop the index");
        let older = SqliteSaver::open(crate::SqliteConfig::file(&path).auto_setup(false))
            .await
            .expect("open without setup");
        // Without the index, then with migration 6's (which names `blob` and so cannot serve
        // this query): the same histories, through the primary key.
        let schemas = [
            ("without the index", ""),
            (
                "with migration 6's index",
                "CREATE INDEX checkpoint_blobs_stored_idx ON checkpoint_blobs
                     (thread_id, checkpoint_ns, channel, version)
                     WHERE type <> 'empty' AND blob IS NOT NULL",
            ),
        ];
        for (schema, sql) in schemas {
            conn.execute_batch(sql).expect(schema);
            for (config, expected) in configs.iter().zip(&with_index) {
                let read = older
                    .delta_channel_history(config, &wanted)
                    .await
                    .expect(schema);
                assert_eq!(&read, expected, "{schema}, at {config:?}");
                assert!(
                    read["m"].writes.len() <= 11,
                    "the walk stopped at a snapshot"
                );
            }
        }
        // Back to migration 7's index. A row another writer left with a type and no blob
        // (step 15's snapshot) holds no value: the walk passes over it to step 4's.
        conn.execute_batch(
            "DROP INDEX checkpoint_blobs_stored_idx;
             CREATE INDEX checkpoint_blobs_stored_idx ON checkpoint_blobs
                 (thread_id, checkpoint_ns, channel, version, type) WHERE type <> 'empty';
             UPDATE checkpoint_blobs SET blob = NULL
                 WHERE channel = 'm' AND type <> 'empty' AND CAST(blob AS TEXT) = '\"snapshot 15\"'",
        )
        .expect("null step 15's snapshot");
        assert_eq!(conn.changes(), 1, "step 15's snapshot is nulled");
        let read = saver
            .delta_channel_history(&configs[20], &wanted)
            .await
            .expect("read past a row without a blob");
        assert_eq!(
            read["m"].seed, with_index[10]["m"].seed,
            "step 4's snapshot"
        );
        assert!(read["m"].writes.len() > with_index[20]["m"].writes.len());
    }

    /// Versions stored as JSON integers (older savers) find their values, as `get` finds them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delta_history_reads_integer_versions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("d.db");
        let saver = SqliteSaver::from_path(&path).await.expect("open");
        let conn = rusqlite::Connection::open(&path).expect("open raw");
        let ids: Vec<String> = (0..3).map(waypoint_checkpoint::checkpoint_id).collect();
        for (i, id) in ids.iter().enumerate() {
            let checkpoint = serde_json::json!({
                "v": 4, "id": id, "ts": "2026-01-01T00:00:00+00:00",
                "channel_versions": {"ch": i + 1}, "versions_seen": {}
            });
            let parent = i.checked_sub(1).map(|p| ids[p].clone());
            conn.execute(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata)
                 VALUES ('t', '', ?1, ?2, 'json', ?3, '{}')",
                rusqlite::params![id, parent, checkpoint.to_string()],
            )
            .expect("checkpoint");
            conn.execute(
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
                 VALUES ('t', '', ?1, 'task', 0, 'ch', 'json', ?2)",
                rusqlite::params![id, format!("{i}").into_bytes()],
            )
            .expect("write");
        }
        conn.execute(
            "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
             VALUES ('t', '', 'ch', '1', 'json', CAST('[0]' AS BLOB))",
            [],
        )
        .expect("blob");
        let config = CheckpointConfig::new("t").with_ns("");
        let wanted = ["ch".to_owned()];
        let fast = saver
            .delta_channel_history(&config, &wanted)
            .await
            .expect("history");
        assert_eq!(fast["ch"].writes.len(), 2);
        assert_eq!(
            fast["ch"].seed.as_ref().map(|s| s.bytes.to_vec()),
            Some(b"[0]".to_vec())
        );
        agrees_with_generic_walk(&saver, &config, &wanted).await;
    }
}
