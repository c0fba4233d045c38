//! `InMemorySaver`: the full checkpointer contract in process memory; the reference backend.

use crate::metadata;
use crate::raw::{
    PreparedPut, PreparedSave, PreparedWrites, record_batch, record_put, record_read, record_writes,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, btree_map};
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tracing::field::Empty;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::filter::json_contains;
use crate::saver::{
    Capabilities, CheckpointSaver, DeltaChannelHistory, Lease, ListOptions, PruneStrategy, Save,
    check_fenced_saves, lease_lost,
};
use crate::serde::{Serde, Slot, TAG_EMPTY, child_record_task, record};
use crate::version::ChannelVersion;
use crate::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Error,
    PendingWrite, Result, SerializedValue,
};

/// The saver's hash maps: keys are hashed on every lookup of a walk (a 49-byte version per
/// ancestor), where SipHash showed in profiles; foldhash is seeded at random as well.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A checkpointer that keeps everything in memory (behind one `RwLock`).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use waypoint_checkpoint::{Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource,
///     CheckpointSaver, InMemorySaver};
/// let saver = InMemorySaver::new();
/// let config = CheckpointConfig::new("thread-1");
/// let stored = saver
///     .put(&config, Checkpoint::new(-1), CheckpointMetadata::new(CheckpointSource::Input, -1), Default::default())
///     .await?;
/// assert_eq!(saver.get_tuple(&config).await?.unwrap().config, stored);
/// # Ok::<_, waypoint_checkpoint::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Default)]
pub struct InMemorySaver {
    storage: RwLock<Map<String, Thread>>,
    /// Thread id to the live claim's token and expiry (monotonic, so clock changes do not
    /// shorten or stretch a claim).
    leases: Mutex<HashMap<String, (String, Instant)>>,
    serde: Serde,
}

#[derive(Clone, Debug, Default)]
struct Thread {
    namespaces: Map<String, Namespace>,
}

#[derive(Clone, Debug, Default)]
struct Namespace {
    /// Checkpoint id to checkpoint; ids sort in creation order.
    checkpoints: BTreeMap<String, Stored>,
    /// Channel to version to value; `None` is a versioned-but-empty channel.
    blobs: Map<String, Map<ChannelVersion, Option<SerializedValue>>>,
    /// Checkpoint id to its writes (read in [`step_order`]); may precede the checkpoint.
    writes: Map<String, Writes>,
    /// The channel names of the last checkpoint stored, shared by the [`Versions`] of every
    /// checkpoint with the same channels.
    names: Arc<[String]>,
}

#[derive(Clone, Debug)]
struct Stored {
    /// The checkpoint without channel values (those live in `blobs`), as a compact record.
    record: Box<[u8]>,
    /// The metadata as a compact record.
    metadata: Box<[u8]>,
    parent: Option<String>,
    /// The record's channel versions, so that delta walks, prunes and garbage collection
    /// read them without decoding the record.
    versions: Versions,
}

/// A checkpoint's channel versions: its channel names (sorted, shared) and their versions.
#[derive(Clone, Debug)]
struct Versions {
    names: Arc<[String]>,
    /// `versions[i]` is the version of `names[i]`.
    versions: Box<[ChannelVersion]>,
}

impl Versions {
    /// Where `channel` is in `names`, if the checkpoint names it.
    fn position(&self, channel: &str) -> Option<usize> {
        self.names
            .binary_search_by(|name| name.as_str().cmp(channel))
            .ok()
    }

    /// The version of `channel`, if the checkpoint names it.
    fn get(&self, channel: &str) -> Option<&ChannelVersion> {
        self.versions.get(self.position(channel)?)
    }

    /// Each channel with its version.
    fn iter(&self) -> impl Iterator<Item = (&String, &ChannelVersion)> {
        self.names.iter().zip(self.versions.iter())
    }
}

impl Stored {
    /// The checkpoint, without channel values.
    fn checkpoint(&self) -> Result<Checkpoint> {
        record::decode_checkpoint(&self.record)
    }

    /// The metadata.
    fn metadata(&self) -> Result<CheckpointMetadata> {
        record::decode_metadata(&self.metadata)
    }
}

/// One checkpoint's writes by `(task_id, idx)`. Boxed: a B-tree node holds room for eleven
/// entries, and most checkpoints have one or two writes (unboxed, their node took ~1.5 KiB).
type Writes = BTreeMap<(String, i64), Box<StoredWrite>>;

#[derive(Clone, Debug)]
struct StoredWrite {
    channel: String,
    value: SerializedValue,
    /// The path `put_writes` was given: reads order by it first.
    task_path: String,
}

impl InMemorySaver {
    /// An empty saver with the default serde (no encryption).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty saver that seals values at rest with `serde`'s keyring, if it has one.
    pub fn with_serde(serde: Serde) -> Self {
        InMemorySaver {
            storage: RwLock::default(),
            leases: Mutex::default(),
            serde,
        }
    }

    /// The serde values are sealed and opened with.
    pub fn serde(&self) -> &Serde {
        &self.serde
    }

    /// Checks `ttl` and gives the monotonic and wall-clock instants it ends at.
    fn lease_deadline(thread_id: &str, ttl: Duration) -> Result<(Instant, SystemTime)> {
        Lease::check(thread_id, ttl)?;
        // MAX_TTL keeps both additions far from overflowing; checked anyway, never a panic.
        let overflow = || Error::InvalidConfig(format!("a lease ttl of {ttl:?} is too long"));
        let deadline = Instant::now().checked_add(ttl).ok_or_else(overflow)?;
        let expires_at = SystemTime::now().checked_add(ttl).ok_or_else(overflow)?;
        Ok((deadline, expires_at))
    }

    /// Stores a prepared put (the caller holds the write lock).
    fn store_put(storage: &mut Map<String, Thread>, mut put: PreparedPut) {
        if let Some(child) = put.child.take() {
            Self::store_writes(storage, child);
        }
        let ns = storage
            .entry(put.thread_id)
            .or_default()
            .namespaces
            .entry(put.checkpoint_ns)
            .or_default();
        for v in put.values {
            ns.blobs
                .entry(v.channel)
                .or_default()
                .entry(v.version)
                .or_insert(v.value);
        }
        let record = record::encode_checkpoint(&put.checkpoint).into();
        // Encoded: the id moves into the key, the versions into the index.
        let id = std::mem::take(&mut put.checkpoint.id);
        let versions = ns.versions(std::mem::take(&mut put.checkpoint.channel_versions));
        let parent = match ns.checkpoints.get(&id) {
            Some(existing) => existing.parent.clone(),
            None => put.parent,
        };
        let stored = Stored {
            record,
            metadata: record::encode_metadata(&put.metadata).into(),
            parent,
            versions,
        };
        ns.checkpoints.insert(id, stored);
    }

    /// Stores one task's prepared writes (the caller holds the write lock).
    fn store_writes(storage: &mut Map<String, Thread>, w: PreparedWrites) {
        let by_task = storage
            .entry(w.thread_id)
            .or_default()
            .namespaces
            .entry(w.checkpoint_ns)
            .or_default()
            .writes
            .entry(w.checkpoint_id)
            .or_default();
        let (mut task_id, mut task_path) = (w.task_id, w.task_path);
        let last = w.rows.len().saturating_sub(1);
        for (i, row) in w.rows.into_iter().enumerate() {
            // The last row takes the call's task id and path instead of copies.
            let (id, path) = if i == last {
                (std::mem::take(&mut task_id), std::mem::take(&mut task_path))
            } else {
                (task_id.clone(), task_path.clone())
            };
            let key = (id, row.idx);
            if w.replace || !by_task.contains_key(&key) {
                let stored = StoredWrite {
                    channel: row.channel,
                    value: row.value,
                    task_path: path,
                };
                by_task.insert(key, Box::new(stored));
            }
        }
    }

    fn materialize(
        &self,
        thread_id: &str,
        ns_name: &str,
        ns: &Namespace,
        id: &str,
        stored: &Stored,
    ) -> Result<CheckpointTuple> {
        let mut checkpoint = stored.checkpoint()?;
        let null = SerializedValue::new(TAG_EMPTY, Bytes::new());
        for (channel, version) in &checkpoint.channel_versions {
            let found = ns
                .blobs
                .get(channel)
                .and_then(|versions| versions.get(version))
                .map(|value| value.as_ref().unwrap_or(&null));
            let slot = Slot::Channel {
                thread_id,
                checkpoint_ns: ns_name,
                channel,
                version: version.as_str(),
            };
            if let Some(opened) = self.serde.open_channel(found, &slot)? {
                checkpoint.channel_values.insert(channel.clone(), opened);
            }
        }
        let pending_writes = match ns.writes.get(id) {
            None => Vec::new(),
            Some(writes) => step_order(entries(writes))
                .map(|((task_id, idx), w)| {
                    let slot = write_slot(thread_id, ns_name, id, task_id, &w.channel, *idx);
                    Ok(PendingWrite {
                        task_id: task_id.clone(),
                        channel: w.channel.clone(),
                        value: self.serde.open(&w.value, &slot)?,
                    })
                })
                .collect::<Result<_>>()?,
        };
        let mut tuple = CheckpointTuple {
            config: CheckpointConfig::of(thread_id, ns_name, id),
            checkpoint,
            metadata: stored.metadata()?,
            parent_config: stored
                .parent
                .as_deref()
                .map(|p| CheckpointConfig::of(thread_id, ns_name, p)),
            pending_writes,
        };
        let latest = ns.checkpoints.last_key_value().map(|(k, _)| k.as_str()) == Some(id);
        self.serde.verify_tuple(&mut tuple, latest)?;
        Ok(tuple)
    }

    /// Re-seals every value of a copied thread for its new thread id.
    fn reseal_thread(&self, thread: &mut Thread, from: &str, to: &str) -> Result<()> {
        if !self.serde.is_encrypted() {
            return Ok(());
        }
        for (ns_name, ns) in thread.namespaces.iter_mut() {
            for (channel, versions) in ns.blobs.iter_mut() {
                for (version, value) in versions.iter_mut() {
                    let Some(value) = value else {
                        continue;
                    };
                    let slot = |thread_id| Slot::Channel {
                        thread_id,
                        checkpoint_ns: ns_name,
                        channel,
                        version: version.as_str(),
                    };
                    if is_value(value) {
                        let plain = self.serde.open(value, &slot(from))?;
                        *value = self.serde.seal(&plain, &slot(to))?;
                    } else {
                        // A versioned channel's empty marker is sealed for its slot too.
                        self.serde.open_channel(Some(value), &slot(from))?;
                        if let Some(sealed) = self.serde.seal_empty(&slot(to))? {
                            *value = sealed;
                        }
                    }
                }
            }
            for (checkpoint_id, writes) in ns.writes.iter_mut() {
                for ((task_id, idx), w) in writes.iter_mut() {
                    let slot = |t| write_slot(t, ns_name, checkpoint_id, task_id, &w.channel, *idx);
                    let plain = self.serde.open(&w.value, &slot(from))?;
                    w.value = self.serde.seal(&plain, &slot(to))?;
                }
            }
        }
        Ok(())
    }
}

/// A checkpoint's writes in the order a step applied them, LangGraph's `writes_sort_key`:
/// `(task_path, task_id, idx)`.
fn step_order<'w, I>(writes: I) -> impl Iterator<Item = (&'w (String, i64), &'w StoredWrite)>
where
    I: Iterator<Item = (&'w (String, i64), &'w StoredWrite)> + Clone,
{
    // The map gives `(task_id, idx)` order; a stable sort by path puts the path first. When
    // all share one path (one task's writes do), the map's order is the step's, and nothing
    // is collected.
    let mut paths = writes.clone().map(|(_, w)| &w.task_path);
    let first = paths.next();
    let sorted = match paths.all(|path| Some(path) == first) {
        true => None,
        false => {
            let mut ordered: Vec<_> = writes.clone().collect();
            ordered.sort_by(|a, b| a.1.task_path.cmp(&b.1.task_path));
            Some(ordered)
        }
    };
    let (in_map_order, sorted) = match sorted {
        None => (Some(writes), None),
        Some(sorted) => (None, Some(sorted.into_iter())),
    };
    in_map_order
        .into_iter()
        .flatten()
        .chain(sorted.into_iter().flatten())
}

/// A checkpoint's writes by key, unboxed.
fn entries(writes: &Writes) -> impl Iterator<Item = (&(String, i64), &StoredWrite)> + Clone {
    writes.iter().map(|(key, w)| (key, &**w))
}

fn write_slot<'a>(
    thread_id: &'a str,
    checkpoint_ns: &'a str,
    checkpoint_id: &'a str,
    task_id: &'a str,
    channel: &'a str,
    idx: i64,
) -> Slot<'a> {
    Slot::Write {
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        task_id,
        channel,
        idx,
    }
}

/// Whether a stored blob is a value (not a versioned channel's sealed empty marker).
fn is_value(value: &SerializedValue) -> bool {
    value.type_tag != TAG_EMPTY
}

/// A blob `found` among a channel's, if it is a value (not a versioned channel's empty
/// marker), with its version.
fn stored_value<'b>(
    found: Option<(&'b ChannelVersion, &'b Option<SerializedValue>)>,
) -> Option<(&'b ChannelVersion, &'b SerializedValue)> {
    match found? {
        (version, Some(value)) if is_value(value) => Some((version, value)),
        _ => None,
    }
}

impl Namespace {
    /// `versions` as a checkpoint's index, sharing the names of the last one stored when
    /// they are the same.
    fn versions(&mut self, versions: ChannelVersions) -> Versions {
        let versions = if self.names.iter().eq(versions.keys()) {
            versions.into_values().collect()
        } else {
            // New names: the checkpoint's own, moved rather than copied.
            let (names, versions): (Vec<String>, Vec<ChannelVersion>) =
                versions.into_iter().unzip();
            self.names = names.into();
            versions.into_boxed_slice()
        };
        Versions {
            names: Arc::clone(&self.names),
            versions,
        }
    }

    /// The value `stored` holds for `channel` (not a versioned channel's empty marker),
    /// with its version.
    fn value<'n>(
        &'n self,
        stored: &Stored,
        channel: &str,
    ) -> Option<(&'n ChannelVersion, &'n SerializedValue)> {
        let version = stored.versions.get(channel)?;
        stored_value(self.blobs.get(channel)?.get_key_value(version))
    }

    /// The stored ancestors of `from`, parent first.
    ///
    /// A parent's id is usually just below its child's (ids sort in creation order), so the
    /// walk steps back through the map from the last one found, a few entries at most,
    /// before it looks an id up.
    fn ancestors<'n>(&'n self, from: &'n Stored) -> impl Iterator<Item = (&'n str, &'n Stored)> {
        /// Entries stepped over (siblings, their descendants) before looking up.
        const STEPS: usize = 4;
        let mut next = from.parent.as_deref();
        let mut below: Option<btree_map::Range<'n, String, Stored>> = None;
        std::iter::from_fn(move || {
            let id = next?;
            let stepped = below.as_mut().and_then(|below| {
                below
                    .by_ref()
                    .rev()
                    .take(STEPS)
                    .take_while(|(k, _)| k.as_str() >= id)
                    .find(|(k, _)| k.as_str() == id)
            });
            let (id, stored) = match stepped {
                Some(found) => found,
                None => {
                    let found = self.checkpoints.get_key_value(id)?;
                    below = Some(
                        self.checkpoints
                            .range::<str, _>((Bound::Unbounded, Bound::Excluded(id))),
                    );
                    found
                }
            };
            next = stored.parent.as_deref();
            Some((id.as_str(), stored))
        })
        // Parent links that loop (a put naming its own id as parent) end the walk.
        .take(self.checkpoints.len())
    }

    /// The ids `KeepLatest` keeps (see [`crate::raw::ids_to_keep`]).
    fn ids_to_keep(&self) -> BTreeSet<String> {
        let Some((latest_id, latest)) = self.checkpoints.last_key_value() else {
            return BTreeSet::new();
        };
        let latest_metadata = latest.metadata().ok();
        crate::raw::ids_to_keep(
            latest_id,
            latest_metadata
                .as_ref()
                .and_then(|m| m.extra.get(metadata::DELTA_COUNTERS)),
            latest_metadata
                .as_ref()
                .and_then(|m| m.extra.get(metadata::WRITES_FROM)),
            |id| self.checkpoints.get(id).map(|c| c.parent.as_deref()),
            |id, channel| {
                self.checkpoints
                    .get(id)
                    .is_some_and(|c| self.value(c, channel).is_some())
            },
        )
    }

    /// Drops values no remaining checkpoint refers to.
    fn collect_garbage(&mut self) {
        let mut live: HashMap<&str, HashSet<&ChannelVersion>> = HashMap::new();
        for stored in self.checkpoints.values() {
            for (channel, version) in stored.versions.iter() {
                live.entry(channel).or_default().insert(version);
            }
        }
        let mut dead: Vec<(String, ChannelVersion)> = Vec::new();
        for (channel, versions) in &self.blobs {
            for version in versions.keys() {
                if !live
                    .get(channel.as_str())
                    .is_some_and(|l| l.contains(version))
                {
                    dead.push((channel.clone(), version.clone()));
                }
            }
        }
        for (channel, version) in dead {
            if let Some(versions) = self.blobs.get_mut(&channel) {
                versions.remove(&version);
                if versions.is_empty() {
                    self.blobs.remove(&channel);
                }
            }
        }
    }
}

impl Thread {
    fn has_checkpoints(&self) -> bool {
        self.namespaces
            .values()
            .any(|ns| !ns.checkpoints.is_empty())
    }
}

#[async_trait]
impl CheckpointSaver for InMemorySaver {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn sealed(&self) -> bool {
        self.serde.is_encrypted()
    }

    fn in_process(&self) -> bool {
        true
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "memory",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(), checkpoint_id = Empty,
        rows = Empty, bytes = Empty))]
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let storage = self.storage.read();
        let Some(ns) = storage
            .get(&config.thread_id)
            .and_then(|t| t.namespaces.get(config.ns()))
        else {
            return Ok(None);
        };
        let found = match config.checkpoint_id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => ns.checkpoints.get_key_value(id),
            None => ns.checkpoints.last_key_value(),
        };
        let tuple = found
            .map(|(id, stored)| self.materialize(&config.thread_id, config.ns(), ns, id, stored))
            .transpose()?;
        record_read(&tuple);
        Ok(tuple)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "memory",
        thread_id = config.map(|c| c.thread_id.as_str()),
        checkpoint_ns = config.and_then(|c| c.checkpoint_ns.as_deref()), limit = options.limit,
        filter = options.filter.is_some(), rows = Empty, bytes = Empty))]
    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: &ListOptions,
    ) -> Result<Vec<CheckpointTuple>> {
        let limit = options.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let storage = self.storage.read();
        let threads: Vec<(&String, &Thread)> = match config {
            Some(c) => storage.get_key_value(&c.thread_id).into_iter().collect(),
            None => storage.iter().collect(),
        };
        // The newest `limit` of each namespace, merged, is a superset of the global newest.
        let mut hits: Vec<(&String, &String, &String, &Namespace, &Stored)> = Vec::new();
        for (thread_id, thread) in threads {
            let namespaces: Vec<(&String, &Namespace)> =
                match config.and_then(|c| c.checkpoint_ns.as_ref()) {
                    Some(ns) => thread.namespaces.get_key_value(ns).into_iter().collect(),
                    None => thread.namespaces.iter().collect(),
                };
            for (ns_name, ns) in namespaces {
                let upper = options.before.as_deref();
                let only = config.and_then(|c| c.checkpoint_id.as_deref());
                let matching = ns
                    .checkpoints
                    .iter()
                    .rev()
                    .filter(|(id, _)| upper.is_none_or(|b| id.as_str() < b))
                    .filter(|(id, _)| only.is_none_or(|o| id.as_str() == o))
                    .filter(|(_, s)| {
                        options
                            .filter
                            .as_ref()
                            // A record that does not decode is kept: reading it reports it.
                            .is_none_or(|f| {
                                s.metadata()
                                    .map_or(true, |m| json_contains(&Value::Object(m.to_json()), f))
                            })
                    })
                    .take(limit);
                hits.extend(matching.map(|(id, s)| (thread_id, ns_name, id, ns, s)));
            }
        }
        hits.sort_by(|a, b| (b.2, b.0, b.1).cmp(&(a.2, a.0, a.1)));
        hits.truncate(limit);
        let tuples = hits
            .into_iter()
            .map(|(thread_id, ns_name, id, ns, stored)| {
                self.materialize(thread_id, ns_name, ns, id, stored)
            })
            .collect::<Result<Vec<_>>>()?;
        record_read(&tuples);
        Ok(tuples)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "memory",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(), checkpoint_id = %checkpoint.id,
        bytes = Empty))]
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig> {
        // Sealing happens here, before the lock: encryption is the slow part.
        let put = PreparedPut::new(&self.serde, config, checkpoint, metadata, new_versions)?;
        record_put(&put);
        let returned = put.config();
        Self::store_put(&mut self.storage.write(), put);
        Ok(returned)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "memory",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(),
        checkpoint_id = config.checkpoint_id.as_deref(), task_id = task_id, rows = Empty,
        bytes = Empty))]
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, SerializedValue)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        if let Some(w) = PreparedWrites::new(&self.serde, config, writes, task_id, task_path)? {
            record_writes(&w);
            Self::store_writes(&mut self.storage.write(), w);
        }
        Ok(())
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "memory",
        thread_id = %lease.thread_id, checkpoint_ns = Empty, checkpoint_id = Empty, rows = Empty,
        bytes = Empty))]
    async fn save_fenced(&self, lease: &Lease, saves: Vec<Save>) -> Result<()> {
        check_fenced_saves(lease, &saves)?;
        // Sealed before any lock, as in `put`.
        let prepared = PreparedSave::batch(&self.serde, saves)?;
        record_batch(&prepared);
        // The lease lock is held across the writes, so no claim can slip in between.
        let leases = self.leases.lock();
        if leases
            .get(&lease.thread_id)
            .is_none_or(|(token, _)| *token != lease.token)
        {
            return Err(lease_lost(lease));
        }
        let mut storage = self.storage.write();
        for save in &prepared {
            if let PreparedSave::Put(put) = save
                && let Some(parent) = put.expected_head()
                && let Some(newest) = storage
                    .get(&put.thread_id)
                    .and_then(|t| t.namespaces.get(&put.checkpoint_ns))
                    .and_then(|ns| {
                        ns.checkpoints
                            .keys()
                            .rev()
                            .find(|id| **id != put.checkpoint.id)
                    })
                && newest.as_str() > parent
            {
                return Err(crate::raw::head_moved(put, newest));
            }
        }
        for save in prepared {
            match save {
                PreparedSave::Put(put) => Self::store_put(&mut storage, *put),
                PreparedSave::Writes(w) => Self::store_writes(&mut storage, w),
            }
        }
        drop(leases);
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "memory",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(),
        checkpoint_id = config.checkpoint_id.as_deref(), channels = channels.len()))]
    async fn delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        // The generic walk, over the stored maps directly: no checkpoint is materialised,
        // so a walk costs a few lookups per ancestor.
        let mut out: BTreeMap<String, DeltaChannelHistory> = channels
            .iter()
            .map(|c| (c.clone(), DeltaChannelHistory::default()))
            .collect();
        let storage = self.storage.read();
        let (thread_id, ns_name) = (config.thread_id.as_str(), config.ns());
        let Some(ns) = storage
            .get(thread_id)
            .and_then(|t| t.namespaces.get(ns_name))
        else {
            return Ok(out);
        };
        let target = match config.checkpoint_id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => ns.checkpoints.get(id),
            None => ns.checkpoints.last_key_value().map(|(_, stored)| stored),
        };
        let Some(target) = target else {
            return Ok(out);
        };
        for (channel, history) in out.iter_mut() {
            // The ancestors down to the one holding a value (or the root), newest first: no
            // record is read, and the channel's place among the names is found again only
            // where they change.
            let blobs = ns.blobs.get(channel);
            let mut place: Option<(&Arc<[String]>, Option<usize>)> = None;
            let mut ancestors: Vec<&str> = Vec::new();
            for (id, ancestor) in ns.ancestors(target) {
                ancestors.push(id);
                let Some(blobs) = blobs else {
                    continue;
                };
                let versions = &ancestor.versions;
                let at = match place {
                    Some((names, at)) if Arc::ptr_eq(names, &versions.names) => at,
                    _ => {
                        let at = versions.position(channel);
                        place = Some((&versions.names, at));
                        at
                    }
                };
                let seed = at
                    .and_then(|i| versions.versions.get(i))
                    .and_then(|version| stored_value(blobs.get_key_value(version)));
                if let Some((version, value)) = seed {
                    let slot = Slot::Channel {
                        thread_id,
                        checkpoint_ns: ns_name,
                        channel,
                        version: version.as_str(),
                    };
                    history.seed = Some(self.serde.open(value, &slot)?);
                    break;
                }
            }
            history.writes.reserve(ancestors.len());
            for &id in ancestors.iter().rev() {
                let Some(writes) = ns.writes.get(id) else {
                    continue;
                };
                let mine = step_order(entries(writes).filter(|(_, w)| &w.channel == channel));
                for ((task_id, idx), w) in mine {
                    let slot = write_slot(thread_id, ns_name, id, task_id, channel, *idx);
                    history.writes.push(PendingWrite {
                        task_id: task_id.clone(),
                        channel: channel.clone(),
                        value: self.serde.open(&w.value, &slot)?,
                    });
                }
            }
        }
        Ok(out)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "memory",
        thread_id = thread_id))]
    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.storage.write().remove(thread_id);
        Ok(())
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "memory",
        runs = run_ids.len()))]
    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let runs: HashSet<&str> = run_ids.iter().map(String::as_str).collect();
        let mut storage = self.storage.write();
        for thread in storage.values_mut() {
            for ns in thread.namespaces.values_mut() {
                let doomed: Vec<String> = ns
                    .checkpoints
                    .iter()
                    .filter(|(_, s)| {
                        s.metadata()
                            .is_ok_and(|m| m.run_id.is_some_and(|r| runs.contains(r.as_str())))
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
                if doomed.is_empty() {
                    continue;
                }
                for id in &doomed {
                    ns.checkpoints.remove(id);
                    ns.writes.remove(id);
                }
                // Their child records on surviving parents go too (authenticated history).
                let children: HashSet<String> =
                    doomed.iter().map(|id| child_record_task(id)).collect();
                for writes in ns.writes.values_mut() {
                    writes.retain(|(task, _), _| !children.contains(task));
                }
                ns.collect_garbage();
            }
        }
        storage.retain(|_, t| {
            t.has_checkpoints() || t.namespaces.values().any(|n| !n.writes.is_empty())
        });
        Ok(())
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "memory",
        thread_id = source_thread_id, target_thread_id = target_thread_id))]
    async fn copy_thread(&self, source_thread_id: &str, target_thread_id: &str) -> Result<()> {
        if source_thread_id == target_thread_id {
            return Err(Error::Conflict("cannot copy a thread onto itself".into()));
        }
        let copy = {
            let storage = self.storage.read();
            if storage
                .get(target_thread_id)
                .is_some_and(Thread::has_checkpoints)
            {
                return Err(Error::Conflict(format!(
                    "target thread `{target_thread_id}` already has checkpoints"
                )));
            }
            match storage.get(source_thread_id) {
                Some(source) => source.clone(),
                None => return Ok(()),
            }
        };
        let mut copy = copy;
        self.reseal_thread(&mut copy, source_thread_id, target_thread_id)?;
        let mut storage = self.storage.write();
        if storage
            .get(target_thread_id)
            .is_some_and(Thread::has_checkpoints)
        {
            return Err(Error::Conflict(format!(
                "target thread `{target_thread_id}` already has checkpoints"
            )));
        }
        // Leftover writes of a deleted target must not attach to the copied checkpoints.
        storage.insert(target_thread_id.to_owned(), copy);
        Ok(())
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "memory",
        threads = thread_ids.len(), strategy = ?strategy))]
    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let mut storage = self.storage.write();
        for thread_id in thread_ids {
            match strategy {
                PruneStrategy::Delete => {
                    storage.remove(thread_id);
                }
                PruneStrategy::KeepLatest => {
                    let Some(thread) = storage.get_mut(thread_id) else {
                        continue;
                    };
                    for ns in thread.namespaces.values_mut() {
                        let keep = ns.ids_to_keep();
                        let newest = keep.last().cloned();
                        ns.checkpoints.retain(|id, _| keep.contains(id));
                        // Writes for checkpoints not stored yet (newer than the latest) stay.
                        ns.writes.retain(|id, _| {
                            keep.contains(id) || newest.as_ref().is_none_or(|n| id > n)
                        });
                        ns.collect_garbage();
                    }
                }
            }
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "memory",
        thread_id = thread_id))]
    async fn acquire_lease(&self, thread_id: &str, ttl: Duration) -> Result<Lease> {
        let (deadline, expires_at) = Self::lease_deadline(thread_id, ttl)?;
        let token = Lease::new_token();
        let mut leases = self.leases.lock();
        if let Some((_, held_until)) = leases.get(thread_id)
            && *held_until > Instant::now()
        {
            return Err(Error::Conflict(format!(
                "thread `{thread_id}` is leased by another run"
            )));
        }
        leases.insert(thread_id.to_owned(), (token.clone(), deadline));
        Ok(Lease {
            thread_id: thread_id.to_owned(),
            token,
            expires_at,
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "memory",
        thread_id = %lease.thread_id))]
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let (deadline, expires_at) = Self::lease_deadline(&lease.thread_id, ttl)?;
        let mut leases = self.leases.lock();
        match leases.get_mut(&lease.thread_id) {
            Some((token, held_until)) if *token == lease.token => {
                *held_until = deadline;
                Ok(Lease {
                    expires_at,
                    ..lease.clone()
                })
            }
            _ => Err(Error::Conflict(format!(
                "the lease on thread `{}` was lost",
                lease.thread_id
            ))),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "memory",
        thread_id = %lease.thread_id))]
    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        let mut leases = self.leases.lock();
        if leases
            .get(&lease.thread_id)
            .is_some_and(|(token, _)| *token == lease.token)
        {
            leases.remove(&lease.thread_id);
        }
        Ok(())
    }
}
