//! The `CheckpointSaver` trait every backend implements, and its conveniences.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value;

use crate::version::ChannelVersion;
use crate::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Error,
    PendingWrite, Result, SerializedValue, metadata,
};

/// Options of [`CheckpointSaver::list`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListOptions {
    /// JSON the metadata must contain (PostgreSQL `@>` semantics); `{}` matches everything.
    pub filter: Option<Value>,
    /// Only checkpoints whose id is strictly lower than this one (across threads, too).
    pub before: Option<String>,
    /// At most this many tuples; `Some(0)` returns none.
    pub limit: Option<usize>,
}

impl ListOptions {
    /// Sets the metadata filter.
    pub fn filter(mut self, filter: Value) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Sets the exclusive upper bound on checkpoint ids.
    pub fn before(mut self, checkpoint_id: impl Into<String>) -> Self {
        self.before = Some(checkpoint_id.into());
        self
    }

    /// Sets the maximum number of tuples.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// What [`CheckpointSaver::prune`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PruneStrategy {
    /// Keep the newest checkpoint of each namespace (and the ancestors its delta channels
    /// still need), with its writes; delete the rest.
    KeepLatest,
    /// Delete everything of the threads.
    Delete,
}

/// The optional operations a backend implements; undeclared ones return `Unsupported`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// [`CheckpointSaver::delete_for_runs`].
    pub delete_for_runs: bool,
    /// [`CheckpointSaver::copy_thread`].
    pub copy_thread: bool,
    /// [`CheckpointSaver::prune`].
    pub prune: bool,
    /// A backend-specific [`CheckpointSaver::delta_channel_history`] (the default walk works
    /// on every backend; this flag says the backend has its own).
    pub delta_history: bool,
    /// [`CheckpointSaver::acquire_lease`], [`CheckpointSaver::renew_lease`] and
    /// [`CheckpointSaver::release_lease`].
    pub leases: bool,
}

impl Capabilities {
    /// Every optional operation.
    pub const ALL: Capabilities = Capabilities {
        delete_for_runs: true,
        copy_thread: true,
        prune: true,
        delta_history: true,
        leases: true,
    };
}

/// A claim on one thread: while it is live, nobody else can claim the thread.
///
/// The token tells holders apart: renewing and releasing need it, so a holder that lost the
/// thread can never extend or free the next holder's claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The claimed thread.
    pub thread_id: String,
    /// What identifies this claim (a uuid v4), fresh for every acquisition.
    pub token: String,
    /// When the claim lapses unless renewed, by the backend's clock (the server's for
    /// PostgreSQL).
    pub expires_at: SystemTime,
}

impl Lease {
    /// The longest ttl a lease may be claimed or renewed for (a year; renew instead).
    pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 60 * 60);

    /// A fresh token for a new claim (a uuid v4 string).
    pub fn new_token() -> String {
        uuid::Uuid::new_v4().to_string()
    }

    /// Checks a claim's arguments: `InvalidConfig` for an empty thread id or a ttl that is
    /// zero or longer than [`Lease::MAX_TTL`].
    pub fn check(thread_id: &str, ttl: Duration) -> Result<()> {
        if thread_id.is_empty() {
            return Err(Error::InvalidConfig(
                "a lease needs a non-empty thread_id".into(),
            ));
        }
        crate::raw::check_id("thread_id", thread_id)?;
        if ttl.is_zero() {
            return Err(Error::InvalidConfig("a lease ttl must be positive".into()));
        }
        if ttl > Self::MAX_TTL {
            return Err(Error::InvalidConfig(format!(
                "a lease ttl of {ttl:?} exceeds the maximum of {:?}",
                Self::MAX_TTL
            )));
        }
        Ok(())
    }
}

/// What a delta channel needs to rebuild its value at a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeltaChannelHistory {
    /// The channel's writes on the ancestors path, oldest first, `(task_path, task_id, idx)`
    /// order within one checkpoint (the order a step applied them); the target checkpoint's
    /// own writes are excluded.
    pub writes: Vec<PendingWrite>,
    /// The value stored at the nearest ancestor that has one; `None` if no ancestor has.
    pub seed: Option<SerializedValue>,
}

/// One `put` or `put_writes` call, for [`CheckpointSaver::save_batch`].
#[derive(Clone, Debug)]
// Puts are the common case (one per super-step): boxing them would add an allocation each.
#[allow(clippy::large_enum_variant)]
pub enum Save {
    /// The arguments of [`CheckpointSaver::put`].
    Put {
        /// The parent's config.
        config: CheckpointConfig,
        /// The checkpoint.
        checkpoint: Checkpoint,
        /// Its metadata.
        metadata: CheckpointMetadata,
        /// The channels it changed.
        new_versions: ChannelVersions,
    },
    /// The arguments of [`CheckpointSaver::put_writes`].
    Writes {
        /// The checkpoint the writes belong to.
        config: CheckpointConfig,
        /// Channel and value, in task order.
        writes: Vec<(String, SerializedValue)>,
        /// The task.
        task_id: String,
        /// The task's path.
        task_path: String,
    },
}

/// Durable storage of checkpoints and pending writes, one implementation per backend.
///
/// Semantics every implementation follows (the conformance suite pins each one):
/// * Latest = greatest checkpoint id in `(thread_id, checkpoint_ns)`; namespaces never mix.
/// * Channel values are stored per `(thread, ns, channel, version)`, only for channels in
///   `new_versions`; others are joined by version from older checkpoints.
/// * Pending writes belong to one checkpoint and are returned ordered by
///   `(task_path, task_id, idx)`, LangGraph's `writes_sort_key`: the order a step applied its
///   tasks' writes (paths compare as bytes, `idx` as a number).
#[async_trait]
pub trait CheckpointSaver: Send + Sync + Debug {
    /// Short backend name used in errors (`memory`, `sqlite`, ...).
    fn backend(&self) -> &'static str;

    /// The optional operations this backend implements.
    fn capabilities(&self) -> Capabilities;

    /// Whether stored values are sealed with a keyring; reads then fail closed: a channel a
    /// checkpoint names whose stored value is missing, nulled or unsealed is an error, never
    /// an absent channel.
    fn sealed(&self) -> bool {
        false
    }

    /// Whether a save completes in this process, waiting on no I/O (the in-memory saver): a
    /// runtime then gains nothing by saving in the background, and saves in line instead.
    fn in_process(&self) -> bool {
        false
    }

    /// The checkpoint `config` names, or the latest of its thread and namespace.
    ///
    /// Returns `None` for an unknown thread, namespace or id. The tuple's config is exactly
    /// thread, namespace and id; channel values are fully materialised.
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>>;

    /// Checkpoints newest first (by id, globally, also across threads).
    ///
    /// `config` `None` lists every thread; its `checkpoint_ns` `None` lists every namespace,
    /// `Some("")` only the root; its `checkpoint_id` restricts to that id.
    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: &ListOptions,
    ) -> Result<Vec<CheckpointTuple>>;

    /// Stores `checkpoint` as a child of `config.checkpoint_id`, atomically.
    ///
    /// Only channels in `new_versions` are written (a versioned channel without a value is
    /// stored as empty). Re-putting an existing id replaces checkpoint and metadata and keeps
    /// the parent. Top-level NUL characters are stripped from metadata strings. Returns the
    /// exact config of the new checkpoint.
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig>;

    /// Stores one task's writes against `config.checkpoint_id` (which need not exist yet).
    ///
    /// Keyed by `(task_id, idx)` with `idx` the position or the reserved channel's index.
    /// A call whose writes all target reserved channels replaces (last wins); any other call
    /// inserts each row only if absent (first wins), so retried tasks are idempotent.
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, SerializedValue)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()>;

    /// Deletes every checkpoint, value and write of a thread in all namespaces; unknown
    /// threads are a no-op.
    async fn delete_thread(&self, thread_id: &str) -> Result<()>;

    /// Applies `saves` in order, as the same `put` / `put_writes` calls would.
    ///
    /// Backends with transactions apply the whole batch in one (all or nothing, one commit):
    /// a runtime saving in the background hands over everything queued since its last
    /// batch, so a slow commit amortises over several steps. The default calls one by one.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend(),
        thread_id = saves.first().map(Save::thread_id), rows = saves.len()))]
    async fn save_batch(&self, saves: Vec<Save>) -> Result<()> {
        for save in saves {
            match save {
                Save::Put {
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                } => {
                    self.put(&config, checkpoint, metadata, new_versions)
                        .await?;
                }
                Save::Writes {
                    config,
                    writes,
                    task_id,
                    task_path,
                } => {
                    self.put_writes(&config, writes, &task_id, &task_path)
                        .await?
                }
            }
        }
        Ok(())
    }

    /// Applies `saves` as [`save_batch`](Self::save_batch) does, but only while `lease` still
    /// holds its thread; `Error::Conflict` otherwise, with nothing written.
    ///
    /// The check and the writes are one atomic step on the backend (one transaction, script or
    /// lock), so a run that lost its lease (paused past its ttl while another run took the
    /// thread, or released) can never write after the next holder. A lease that lapsed but
    /// that nobody took over still holds, as for [`renew_lease`](Self::renew_lease). Every
    /// save must name the lease's thread (`InvalidConfig` otherwise). Every backend that
    /// declares `leases` implements it.
    async fn save_fenced(&self, lease: &Lease, saves: Vec<Save>) -> Result<()> {
        let _ = (lease, saves);
        Err(self.unsupported("save_fenced"))
    }

    /// Stores a checkpoint as [`put`](Self::put) does unless a live lease holds its thread:
    /// `Ok(None)` then, with nothing written. For writes that need no lease of their own
    /// (an update forking a named checkpoint) but must never land under a running writer.
    ///
    /// The check and the write are one atomic step: a lapsed lease is taken over (its holder's
    /// next fenced write fails), and a claim made meanwhile waits for it. The default claims a
    /// lease, puts under it and releases it; backends with leases may do it in one statement.
    async fn put_unleased(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<Option<CheckpointConfig>> {
        if !self.capabilities().leases {
            return self
                .put(config, checkpoint, metadata, new_versions)
                .await
                .map(Some);
        }
        let lease = match self
            .acquire_lease(&config.thread_id, Duration::from_secs(30))
            .await
        {
            Ok(lease) => lease,
            Err(Error::Conflict(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let (stored, save) = Save::put(config, checkpoint, metadata, new_versions);
        let saved = self.save_fenced(&lease, vec![save]).await;
        // A failed release leaves the lease to lapse; the write stands either way.
        let _ = self.release_lease(&lease).await;
        saved.map(|()| Some(stored))
    }

    /// The version that follows `current` for a channel (LangGraph's string form).
    fn next_version(&self, current: Option<&ChannelVersion>) -> Result<ChannelVersion> {
        ChannelVersion::next(current)
    }

    /// Whether what is stored here is shared with Python LangGraph, so values must be written
    /// as it reads them: a runtime left on its default encoding then writes
    /// [`Format::LangGraph`](crate::Format::LangGraph) and stores appending channels whole.
    /// `false` by default; `true` for PostgreSQL unless configured otherwise.
    fn langgraph_values(&self) -> bool {
        false
    }

    /// Deletes checkpoints (and their writes) whose metadata `run_id` is in `run_ids`.
    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        let _ = run_ids;
        Err(self.unsupported("delete_for_runs"))
    }

    /// Copies a whole thread (all namespaces, ids, parents, values, writes) to an empty one.
    ///
    /// An unknown source leaves the target empty; a target with checkpoints is a `Conflict`.
    async fn copy_thread(&self, source_thread_id: &str, target_thread_id: &str) -> Result<()> {
        let _ = (source_thread_id, target_thread_id);
        Err(self.unsupported("copy_thread"))
    }

    /// Prunes the given threads; unknown threads and an empty list are no-ops.
    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let _ = (thread_ids, strategy);
        Err(self.unsupported("prune"))
    }

    /// For each channel, the writes and seed needed to rebuild it at `config`'s checkpoint
    /// (latest when no id is given), walking parent links back to a stored value.
    async fn delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        walk_delta_history(self, config, channels).await
    }

    /// The checkpoint `config` names (latest without an id), with the delta histories of
    /// those of `channels` it versions but stores no value for (the ones a reader rebuilds):
    /// [`Self::get_tuple`] and then [`Self::delta_channel_history`], in one round trip where
    /// the backend can answer both at once.
    async fn get_tuple_with_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<Option<TupleWithHistory>> {
        let Some(tuple) = self.get_tuple(config).await? else {
            return Ok(None);
        };
        let missing = unvalued_channels(&tuple, channels);
        let history = if missing.is_empty() {
            BTreeMap::new()
        } else {
            self.delta_channel_history(&tuple.config, &missing).await?
        };
        Ok(Some((tuple, history)))
    }

    /// Claims `thread_id` for `ttl`; `Error::Conflict` while another live lease holds it. An
    /// expired lease is taken over.
    ///
    /// One atomic step on the backend, so of concurrent claims (from any process sharing the
    /// database) exactly one wins. An empty thread id or a zero ttl is `InvalidConfig`.
    async fn acquire_lease(&self, thread_id: &str, ttl: Duration) -> Result<Lease> {
        let _ = (thread_id, ttl);
        Err(self.unsupported("acquire_lease"))
    }

    /// Extends a lease this caller holds to `ttl` from now; `Error::Conflict` if it was lost
    /// (expired and taken by someone else, or released).
    ///
    /// A lease that expired but that nobody has taken over is still this caller's and is
    /// renewed: nobody else can have written to the thread in between.
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let _ = (lease, ttl);
        Err(self.unsupported("renew_lease"))
    }

    /// Gives the lease up; releasing a lease no longer held (expired, taken over) is a no-op
    /// and never frees someone else's.
    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        let _ = lease;
        Err(self.unsupported("release_lease"))
    }

    /// The `Unsupported` error for `operation` on this backend.
    fn unsupported(&self, operation: &'static str) -> Error {
        Error::Unsupported {
            operation,
            backend: self.backend(),
        }
    }
}

impl Save {
    /// The put of `checkpoint` after `config`, and the config it is stored under.
    pub fn put(
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> (CheckpointConfig, Save) {
        let stored = CheckpointConfig::of(&config.thread_id, config.ns(), &checkpoint.id);
        let save = Save::Put {
            config: config.clone(),
            checkpoint,
            metadata,
            new_versions,
        };
        (stored, save)
    }

    /// The thread the save writes to.
    pub fn thread_id(&self) -> &str {
        match self {
            Save::Put { config, .. } | Save::Writes { config, .. } => &config.thread_id,
        }
    }
}

/// `InvalidConfig` unless every save writes to the lease's thread; backends call it before
/// [`CheckpointSaver::save_fenced`] writes anything.
pub fn check_fenced_saves(lease: &Lease, saves: &[Save]) -> Result<()> {
    match saves.iter().find(|s| s.thread_id() != lease.thread_id) {
        Some(other) => Err(Error::InvalidConfig(format!(
            "a save for thread `{}` cannot be fenced by the lease on thread `{}`",
            other.thread_id(),
            lease.thread_id
        ))),
        None => Ok(()),
    }
}

/// The `Conflict` of a fenced save whose lease no longer holds its thread.
pub fn lease_lost(lease: &Lease) -> Error {
    Error::Conflict(format!(
        "the lease on thread `{}` was lost (it lapsed and another run took the thread, or it \
         was released): nothing was written",
        lease.thread_id
    ))
}

/// The checkpoint ids [`PruneStrategy::KeepLatest`] keeps in one namespace: the latest, its
/// parent when the latest's `writes` metadata is rebuilt from the parent's pending writes
/// (`writes_from`, see [`metadata::writes_from_parent`]), and the ancestors its delta
/// channels (the keys of its metadata's `counters` entry, LangGraph's counters since each
/// channel's last snapshot) still need to rebuild their values. `parent(id)` is the parent
/// of a stored checkpoint (`None` when `id` is not stored: the walk ends) and
/// `has_value(id, channel)` whether that checkpoint stores the channel's value.
pub fn ids_to_keep<'s>(
    latest: &'s str,
    counters: Option<&serde_json::Value>,
    writes_from: Option<&serde_json::Value>,
    parent: impl Fn(&str) -> Option<Option<&'s str>>,
    has_value: impl Fn(&str, &str) -> bool,
) -> BTreeSet<String> {
    let mut keep = BTreeSet::from([latest.to_owned()]);
    if let (true, Some(Some(id))) = (metadata::writes_from_parent(writes_from), parent(latest)) {
        keep.insert(id.to_owned());
    }
    let mut open: Vec<&str> = match counters {
        Some(serde_json::Value::Object(counters)) => counters
            .keys()
            .map(String::as_str)
            .filter(|channel| !has_value(latest, channel))
            .collect(),
        _ => Vec::new(),
    };
    let mut next = parent(latest).flatten();
    // A parent link back into the walk (a checkpoint saved as its own parent) ends it.
    let mut walked = BTreeSet::from([latest]);
    while let (false, Some(id)) = (open.is_empty(), next) {
        let (true, Some(grandparent)) = (walked.insert(id), parent(id)) else {
            break;
        };
        keep.insert(id.to_owned());
        open.retain(|channel| !has_value(id, channel));
        next = grandparent;
    }
    keep
}

/// A checkpoint tuple with the delta histories of its channels stored without a value
/// ([`CheckpointSaver::get_tuple_with_history`]).
pub type TupleWithHistory = (CheckpointTuple, BTreeMap<String, DeltaChannelHistory>);

/// Those of `channels` (each once, sorted) that `tuple`'s checkpoint versions but stores no
/// value for: the ones [`CheckpointSaver::get_tuple_with_history`] reads a history of.
pub fn unvalued_channels(tuple: &CheckpointTuple, channels: &[String]) -> Vec<String> {
    let checkpoint = &tuple.checkpoint;
    let wanted: BTreeSet<&String> = channels
        .iter()
        .filter(|c| {
            checkpoint.channel_versions.contains_key(*c)
                && !checkpoint.channel_values.contains_key(*c)
        })
        .collect();
    wanted.into_iter().cloned().collect()
}

/// The delta-history walk over `get_tuple` and parent links; works on any saver.
///
/// Each ancestor's writes keep the order `get_tuple` gives them, `(task_path, task_id, idx)`.
pub async fn walk_delta_history<S: CheckpointSaver + ?Sized>(
    saver: &S,
    config: &CheckpointConfig,
    channels: &[String],
) -> Result<BTreeMap<String, DeltaChannelHistory>> {
    let mut out: BTreeMap<String, DeltaChannelHistory> = channels
        .iter()
        .map(|c| (c.clone(), DeltaChannelHistory::default()))
        .collect();
    if channels.is_empty() {
        return Ok(out);
    }
    let Some(target) = saver.get_tuple(config).await? else {
        return Ok(out);
    };
    // Writes are gathered newest ancestor first, then reversed per channel at the end.
    let mut open: Vec<String> = out.keys().cloned().collect();
    let mut chunks: BTreeMap<String, Vec<Vec<PendingWrite>>> = BTreeMap::new();
    let mut seeds: BTreeMap<String, SerializedValue> = BTreeMap::new();
    let mut next = target.parent_config;
    // A parent link back into the walk (a checkpoint saved as its own parent) ends it.
    let mut walked = BTreeSet::from([target.checkpoint.id.clone()]);
    while let Some(parent) = next.take() {
        let id = parent.checkpoint_id.clone().unwrap_or_default();
        if open.is_empty() || !walked.insert(id) {
            break;
        }
        let Some(ancestor) = saver.get_tuple(&parent).await? else {
            break;
        };
        open.retain(|channel| {
            let writes: Vec<PendingWrite> = ancestor
                .pending_writes
                .iter()
                .filter(|w| &w.channel == channel)
                .cloned()
                .collect();
            chunks.entry(channel.clone()).or_default().push(writes);
            match ancestor.checkpoint.channel_values.get(channel) {
                Some(value) => {
                    seeds.insert(channel.clone(), value.clone());
                    false
                }
                None => true,
            }
        });
        next = ancestor.parent_config;
    }
    for (channel, history) in out.iter_mut() {
        if let Some(chunks) = chunks.remove(channel) {
            history.writes = chunks.into_iter().rev().flatten().collect();
        }
        history.seed = seeds.remove(channel);
    }
    Ok(out)
}

/// Conveniences over [`CheckpointSaver`], for every saver.
#[async_trait]
pub trait CheckpointSaverExt: CheckpointSaver {
    /// The checkpoint `config` names (or the latest), without metadata or writes.
    async fn get(&self, config: &CheckpointConfig) -> Result<Option<Checkpoint>> {
        Ok(self.get_tuple(config).await?.map(|t| t.checkpoint))
    }

    /// The latest checkpoint tuple of a thread's root namespace.
    async fn latest(&self, thread_id: &str) -> Result<Option<CheckpointTuple>> {
        self.get_tuple(&CheckpointConfig::new(thread_id)).await
    }

    /// Every checkpoint of a thread, all namespaces, newest first.
    async fn list_thread(&self, thread_id: &str) -> Result<Vec<CheckpointTuple>> {
        self.list(
            Some(&CheckpointConfig::new(thread_id)),
            &ListOptions::default(),
        )
        .await
    }
}

impl<T: CheckpointSaver + ?Sized> CheckpointSaverExt for T {}

macro_rules! forward_saver {
    ($($ty:ty),*) => {$(
        #[async_trait]
        impl<T: CheckpointSaver + ?Sized> CheckpointSaver for $ty {
            fn backend(&self) -> &'static str {
                (**self).backend()
            }
            fn capabilities(&self) -> Capabilities {
                (**self).capabilities()
            }
            fn sealed(&self) -> bool {
                (**self).sealed()
            }
            fn in_process(&self) -> bool {
                (**self).in_process()
            }
            async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
                (**self).get_tuple(config).await
            }
            async fn list(
                &self,
                config: Option<&CheckpointConfig>,
                options: &ListOptions,
            ) -> Result<Vec<CheckpointTuple>> {
                (**self).list(config, options).await
            }
            async fn put(
                &self,
                config: &CheckpointConfig,
                checkpoint: Checkpoint,
                metadata: CheckpointMetadata,
                new_versions: ChannelVersions,
            ) -> Result<CheckpointConfig> {
                (**self).put(config, checkpoint, metadata, new_versions).await
            }
            async fn put_unleased(
                &self,
                config: &CheckpointConfig,
                checkpoint: Checkpoint,
                metadata: CheckpointMetadata,
                new_versions: ChannelVersions,
            ) -> Result<Option<CheckpointConfig>> {
                (**self).put_unleased(config, checkpoint, metadata, new_versions).await
            }
            async fn put_writes(
                &self,
                config: &CheckpointConfig,
                writes: Vec<(String, SerializedValue)>,
                task_id: &str,
                task_path: &str,
            ) -> Result<()> {
                (**self).put_writes(config, writes, task_id, task_path).await
            }
            async fn delete_thread(&self, thread_id: &str) -> Result<()> {
                (**self).delete_thread(thread_id).await
            }
            async fn save_batch(&self, saves: Vec<Save>) -> Result<()> {
                (**self).save_batch(saves).await
            }
            async fn save_fenced(&self, lease: &Lease, saves: Vec<Save>) -> Result<()> {
                (**self).save_fenced(lease, saves).await
            }
            fn langgraph_values(&self) -> bool {
                (**self).langgraph_values()
            }
            fn next_version(&self, current: Option<&ChannelVersion>) -> Result<ChannelVersion> {
                (**self).next_version(current)
            }
            async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
                (**self).delete_for_runs(run_ids).await
            }
            async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
                (**self).copy_thread(source, target).await
            }
            async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
                (**self).prune(thread_ids, strategy).await
            }
            async fn delta_channel_history(
                &self,
                config: &CheckpointConfig,
                channels: &[String],
            ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
                (**self).delta_channel_history(config, channels).await
            }
            async fn get_tuple_with_history(
                &self,
                config: &CheckpointConfig,
                channels: &[String],
            ) -> Result<Option<TupleWithHistory>> {
                (**self).get_tuple_with_history(config, channels).await
            }
            async fn acquire_lease(&self, thread_id: &str, ttl: Duration) -> Result<Lease> {
                (**self).acquire_lease(thread_id, ttl).await
            }
            async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
                (**self).renew_lease(lease, ttl).await
            }
            async fn release_lease(&self, lease: &Lease) -> Result<()> {
                (**self).release_lease(lease).await
            }
        }
    )*};
}

forward_saver!(Arc<T>, Box<T>, &T);
