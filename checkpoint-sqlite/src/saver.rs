//! `SqliteSaver`: the `CheckpointSaver` trait on SQLite.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tracing::field::Empty;
use waypoint_checkpoint::raw::{
    PreparedPut, PreparedSave, PreparedWrites, check_fenced_saves, lease_lost, record_batch,
    record_put, record_read, record_writes,
};

use async_trait::async_trait;
use waypoint_checkpoint::serde::record;
use waypoint_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, DeltaChannelHistory, Error, Lease, ListOptions, PendingWrite,
    PruneStrategy, Result, Save, Serde, SerializedValue, Slot,
};

use crate::cache::BlobCache;
use crate::config::SqliteConfig;
use crate::convert::{RawBlob, RawWrite, tag};
use crate::error::{DbError, sqlite_error};
use crate::lease::{self, Claim, Fence};
use crate::pool::Database;
use crate::queries::{self, CopiedValue, ListQuery};
use crate::schema;

/// A checkpointer on a SQLite database (file or in memory).
///
/// One writer connection serializes writes; reader connections (file databases) serve reads
/// concurrently in WAL mode. Every connection waits for another process's lock (up to
/// `busy_timeout`) rather than failing. [`SqliteSaver::store`] opens a store on the same
/// connections.
#[derive(Debug, Clone)]
pub struct SqliteSaver {
    db: Database,
    cache: Arc<BlobCache>,
    serde: Serde,
}

impl SqliteSaver {
    /// Writes a batch in one transaction (one commit), only if its `fence` passes, checked
    /// inside the same transaction: a held lease still holds the thread (`Conflict`
    /// otherwise), or no live lease holds it (`Ok(false)` otherwise, nothing written).
    async fn save_prepared(&self, fence: Fence, saves: Vec<Save>) -> Result<bool> {
        // Prepared (validated, sealed) here, then written in one transaction.
        let prepared = PreparedSave::batch(&self.serde, saves)?;
        record_batch(&prepared);
        if prepared.is_empty() && matches!(fence, Fence::None) {
            return Ok(true);
        }
        let cache = self.cache.clone();
        let mut prepared = Some(prepared);
        self.db
            .writer
            .run_quick(move |conn| {
                let Some(saves) = prepared.as_ref() else {
                    return Ok(true);
                };
                // Immediate: the write lock is taken before the lease is read, so no other
                // process can claim the thread between the check and the commit.
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(sqlite_error)?;
                match &fence {
                    Fence::Held(lease) if !lease::holds(&tx, lease)? => {
                        return Err(lease_lost(lease));
                    }
                    Fence::Unleased(thread_id) if !lease::unleased(&tx, thread_id)? => {
                        return Ok(false);
                    }
                    _ => {}
                }
                if !matches!(fence, Fence::None) {
                    for save in saves {
                        if let PreparedSave::Put(put) = save
                            && let Some(parent) = put.expected_head()
                            && let Some(newest) = queries::newest_other(&tx, put)?
                            && newest.as_str() > parent
                        {
                            return Err(waypoint_checkpoint::raw::head_moved(put, &newest));
                        }
                    }
                }
                let mut stored = Vec::new();
                for save in saves {
                    match save {
                        PreparedSave::Put(put) => {
                            let checkpoint = record::encode_checkpoint(&put.checkpoint);
                            let metadata = record::encode_metadata(&put.metadata);
                            let skip = queries::stored_already(&tx, put, &cache)?;
                            stored.push(queries::put_in(&tx, put, &checkpoint, &metadata, &skip)?);
                        }
                        PreparedSave::Writes(w) => queries::put_writes_in(&tx, w)?,
                    }
                }
                tx.commit().map_err(sqlite_error)?;
                let puts = prepared
                    .take()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| match s {
                        PreparedSave::Put(put) => Some(*put),
                        PreparedSave::Writes(_) => None,
                    });
                for (put, stored) in puts.zip(&stored) {
                    cache_blobs(&cache, put, stored);
                }
                Ok(true)
            })
            .await
    }

    /// Opens (creating if needed) the database `config` names; runs [`Self::setup`] unless
    /// `auto_setup` is off. Fails clearly on a file that is not a SQLite database or whose
    /// schema is newer than this build.
    pub async fn open(config: SqliteConfig) -> Result<Self> {
        let db = Database::open(config, schema::check_open)
            .await
            .map_err(Error::from_failure)?;
        let saver = SqliteSaver {
            cache: Arc::new(BlobCache::new(db.config.cache_bytes)),
            serde: db.config.serde.clone(),
            db,
        };
        if saver.db.config.auto_setup {
            saver.setup().await?;
        }
        Ok(saver)
    }

    /// Opens a file database with default settings.
    pub async fn from_path(path: impl AsRef<Path>) -> Result<Self> {
        Self::open(SqliteConfig::file(path)).await
    }

    /// Opens `sqlite:PATH` or `sqlite::memory:` with default settings.
    pub async fn from_url(url: &str) -> Result<Self> {
        Self::open(SqliteConfig::from_url(url)?).await
    }

    /// Creates or migrates the tables; idempotent, and safe when processes run it at once.
    pub async fn setup(&self) -> Result<()> {
        self.db
            .writer
            .run(schema::migrate)
            .await
            .map_err(Error::from_failure)
    }

    /// Opens a store on this saver's connections (one pool for both); runs the store's
    /// `setup()` when the saver's config has `auto_setup`. In memory, the store sees the
    /// saver's database.
    #[cfg(feature = "store")]
    pub async fn store(
        &self,
        config: waypoint_store::StoreConfig,
    ) -> waypoint_store::Result<crate::SqliteStore> {
        crate::SqliteStore::on(self.db.clone(), config, true).await
    }

    /// The serde values are sealed and opened with.
    pub fn serde(&self) -> &Serde {
        &self.serde
    }

    /// The settings this saver was opened with.
    pub fn config(&self) -> &SqliteConfig {
        &self.db.config
    }

    /// Runs a write that may remove or move stored values, then forgets cached values.
    async fn write_then_forget<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let cache = self.cache.clone();
        self.db
            .writer
            .run(move |conn| {
                let done = f(conn);
                cache.clear();
                done
            })
            .await
    }

    fn open_values(
        &self,
        raws: Vec<crate::convert::RawCheckpoint>,
    ) -> Result<Vec<CheckpointTuple>> {
        raws.into_iter()
            .map(|r| r.into_tuple(&self.serde, false))
            .collect()
    }

    fn open_write(&self, config: &CheckpointConfig, id: &str, w: RawWrite) -> Result<PendingWrite> {
        let slot = Slot::Write {
            thread_id: &config.thread_id,
            checkpoint_ns: config.ns(),
            checkpoint_id: id,
            task_id: &w.task_id,
            channel: &w.channel,
            idx: w.idx,
        };
        let value = self
            .serde
            .open(&SerializedValue::new(w.type_tag, w.blob), &slot)?;
        Ok(PendingWrite {
            task_id: w.task_id,
            channel: w.channel,
            value,
        })
    }
}

fn json_text(value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::serialization("json", e))
}

/// Writes a committed put's values through to the blob cache, marked as committed, those
/// `stored` says it stored; marks the cached entries of the others (their rows were stored
/// before, and a version that had a value kept it). Never before the commit, so the cache
/// never holds uncommitted data.
fn cache_blobs(cache: &BlobCache, put: PreparedPut, stored: &[bool]) {
    // One key to mark with, refilled per value: no allocation per lookup.
    let mut seen = (
        put.thread_id.clone(),
        put.checkpoint_ns.clone(),
        String::new(),
        String::new(),
    );
    for (v, stored) in put.values.into_iter().zip(stored) {
        if !stored {
            seen.2.clear();
            seen.2.push_str(&v.channel);
            seen.3.clear();
            seen.3.push_str(v.version.as_str());
            cache.mark_committed(&seen);
            continue;
        }
        let key = (
            put.thread_id.clone(),
            put.checkpoint_ns.clone(),
            v.channel.clone(),
            v.version.to_string(),
        );
        let blob = match v.value {
            Some(value) => RawBlob {
                channel: v.channel,
                version: v.version.to_string(),
                type_tag: tag(&value),
                blob: value.bytes,
            },
            None => RawBlob::empty(v.channel, v.version.to_string()),
        };
        cache.insert_committed(key, Some(blob));
    }
}

#[async_trait]
impl CheckpointSaver for SqliteSaver {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn sealed(&self) -> bool {
        self.serde.is_encrypted()
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(), checkpoint_id = Empty,
        rows = Empty, bytes = Empty))]
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let (thread_id, ns) = (config.thread_id.clone(), config.ns().to_owned());
        let id = config.checkpoint_id.clone().filter(|id| !id.is_empty());
        let cache = self.cache.clone();
        let raw = self
            .db
            .read(move |conn| {
                queries::read(conn, |conn| {
                    queries::get(conn, &thread_id, &ns, id.as_deref(), &cache)
                })
            })
            .await?;
        let latest = config.checkpoint_id.as_deref().is_none_or(str::is_empty);
        let tuple = raw.map(|r| r.into_tuple(&self.serde, latest)).transpose()?;
        record_read(&tuple);
        Ok(tuple)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        thread_id = config.map(|c| c.thread_id.as_str()),
        checkpoint_ns = config.and_then(|c| c.checkpoint_ns.as_deref()), limit = options.limit,
        filter = options.filter.is_some(), rows = Empty, bytes = Empty))]
    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: &ListOptions,
    ) -> Result<Vec<CheckpointTuple>> {
        if options.limit == Some(0) {
            return Ok(Vec::new());
        }
        let query = ListQuery {
            thread_id: config.map(|c| c.thread_id.clone()),
            checkpoint_ns: config.and_then(|c| c.checkpoint_ns.clone()),
            checkpoint_id: config.and_then(|c| c.checkpoint_id.clone()),
            before: options.before.clone(),
            filter: options.filter.as_ref().map(json_text).transpose()?,
            limit: options.limit,
        };
        let raws = self
            .db
            .readers
            .run({
                let cache = self.cache.clone();
                move |conn| queries::read(conn, |conn| queries::list(conn, &query, &cache))
            })
            .await?;
        let tuples = self.open_values(raws)?;
        record_read(&tuples);
        Ok(tuples)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(), checkpoint_id = %checkpoint.id,
        bytes = Empty))]
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let put = PreparedPut::new(&self.serde, config, checkpoint, metadata, new_versions)?;
        record_put(&put);
        let returned = put.config();
        let checkpoint = record::encode_checkpoint(&put.checkpoint);
        let metadata = record::encode_metadata(&put.metadata);
        let cache = self.cache.clone();
        let mut put = Some(put);
        self.db
            .writer
            .run_quick(move |conn| -> Result<()> {
                let Some(done) = put.as_ref() else {
                    return Ok(());
                };
                let stored = queries::put(conn, done, &checkpoint, &metadata, &cache)?;
                put.take()
                    .into_iter()
                    .for_each(|put| cache_blobs(&cache, put, &stored));
                Ok(())
            })
            .await?;
        Ok(returned)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        thread_id = saves.first().map(Save::thread_id),
        checkpoint_ns = Empty, checkpoint_id = Empty, rows = Empty, bytes = Empty))]
    async fn save_batch(&self, saves: Vec<Save>) -> Result<()> {
        self.save_prepared(Fence::None, saves).await.map(drop)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        thread_id = %lease.thread_id, checkpoint_ns = Empty, checkpoint_id = Empty, rows = Empty,
        bytes = Empty))]
    async fn save_fenced(&self, lease: &Lease, saves: Vec<Save>) -> Result<()> {
        check_fenced_saves(lease, &saves)?;
        self.save_prepared(Fence::Held(lease.clone()), saves)
            .await
            .map(drop)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        thread_id = %config.thread_id, checkpoint_ns = Empty, checkpoint_id = Empty, rows = Empty,
        bytes = Empty))]
    async fn put_unleased(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<Option<CheckpointConfig>> {
        // One transaction: no lease of its own to claim and release.
        let fence = Fence::Unleased(config.thread_id.clone());
        let (stored, save) = Save::put(config, checkpoint, metadata, new_versions);
        let saved = self.save_prepared(fence, vec![save]).await?;
        Ok(saved.then_some(stored))
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
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
        let Some(w) = PreparedWrites::new(&self.serde, config, writes, task_id, task_path)? else {
            return Ok(());
        };
        record_writes(&w);
        self.db
            .writer
            .run_quick(move |conn| queries::put_writes(conn, &w))
            .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        thread_id = thread_id))]
    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let thread_id = thread_id.to_owned();
        self.write_then_forget(move |conn| queries::delete_thread(conn, &thread_id))
            .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        runs = run_ids.len()))]
    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let run_ids = json_text(&run_ids)?;
        self.write_then_forget(move |conn| queries::delete_for_runs(conn, &run_ids))
            .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        thread_id = source_thread_id, target_thread_id = target_thread_id))]
    async fn copy_thread(&self, source_thread_id: &str, target_thread_id: &str) -> Result<()> {
        if source_thread_id == target_thread_id {
            return Err(Error::Conflict("cannot copy a thread onto itself".into()));
        }
        let (source, target) = (source_thread_id.to_owned(), target_thread_id.to_owned());
        let serde = self.serde.clone();
        let copied = self
            .write_then_forget(move |conn| {
                let reseal = |v: CopiedValue<'_>| -> Result<(String, Vec<u8>)> {
                    let stored = SerializedValue::new(v.type_tag, v.blob);
                    let (from, to) = match v.slot {
                        Ok((channel, version)) => (
                            Slot::Channel {
                                thread_id: &source,
                                checkpoint_ns: v.ns,
                                channel,
                                version,
                            },
                            Slot::Channel {
                                thread_id: &target,
                                checkpoint_ns: v.ns,
                                channel,
                                version,
                            },
                        ),
                        Err((checkpoint_id, task_id, channel, idx)) => (
                            Slot::Write {
                                thread_id: &source,
                                checkpoint_ns: v.ns,
                                checkpoint_id,
                                task_id,
                                channel,
                                idx,
                            },
                            Slot::Write {
                                thread_id: &target,
                                checkpoint_ns: v.ns,
                                checkpoint_id,
                                task_id,
                                channel,
                                idx,
                            },
                        ),
                    };
                    let sealed = serde.reseal(&stored, &from, &to)?;
                    Ok((tag(&sealed), sealed.bytes.to_vec()))
                };
                let reseal: queries::Reseal<'_> = if serde.is_encrypted() {
                    Some(&reseal)
                } else {
                    None
                };
                queries::copy_thread(conn, &source, &target, reseal)
            })
            .await?;
        if !copied {
            return Err(Error::Conflict(format!(
                "target thread `{target_thread_id}` already has checkpoints"
            )));
        }
        Ok(())
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "sqlite",
        threads = thread_ids.len(), strategy = ?strategy))]
    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        if thread_ids.is_empty() {
            return Ok(());
        }
        let thread_ids = thread_ids.to_vec();
        let keep_latest = strategy == PruneStrategy::KeepLatest;
        self.write_then_forget(move |conn| queries::prune(conn, &thread_ids, keep_latest))
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "sqlite",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(),
        checkpoint_id = config.checkpoint_id.as_deref(), channels = channels.len()))]
    async fn delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        if channels.is_empty() {
            return Ok(BTreeMap::new());
        }
        let (thread_id, ns) = (config.thread_id.clone(), config.ns().to_owned());
        let id = config.checkpoint_id.clone().filter(|id| !id.is_empty());
        let wanted = channels.to_vec();
        let found = self
            .db
            .read(move |conn| {
                queries::read(conn, |conn| {
                    crate::history::delta_history(conn, &thread_id, &ns, id.as_deref(), &wanted)
                })
            })
            .await?;
        let mut out = BTreeMap::new();
        for (channel, raw) in found.histories {
            let mut history = DeltaChannelHistory {
                writes: Vec::with_capacity(raw.writes.len()),
                seed: None,
            };
            // Each write opens with the checkpoint it belongs to (sealed values are bound to it).
            for (ancestor, w) in raw.writes {
                history
                    .writes
                    .push(self.open_write(config, &found.chain[ancestor], w)?);
            }
            if let Some(b) = raw.seed {
                let slot = Slot::Channel {
                    thread_id: &config.thread_id,
                    checkpoint_ns: config.ns(),
                    channel: &b.channel,
                    version: &b.version,
                };
                history.seed = Some(
                    self.serde
                        .open(&SerializedValue::new(b.type_tag, b.blob), &slot)?,
                );
            }
            out.insert(channel, history);
        }
        Ok(out)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "sqlite",
        thread_id = thread_id))]
    async fn acquire_lease(&self, thread_id: &str, ttl: Duration) -> Result<Lease> {
        let claim = Claim::acquire(thread_id, ttl)?;
        self.db
            .writer
            .run_quick(move |conn| claim.clone().run_acquire(conn))
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "sqlite",
        thread_id = %lease.thread_id))]
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let claim = Claim::renew(lease, ttl)?;
        self.db
            .writer
            .run_quick(move |conn| claim.clone().run_renew(conn))
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "sqlite",
        thread_id = %lease.thread_id))]
    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        let (thread_id, token) = (lease.thread_id.clone(), lease.token.clone());
        self.db
            .writer
            .run_quick(move |conn| lease::release(conn, &thread_id, &token))
            .await
    }
}
