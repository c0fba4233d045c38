//! `PostgresSaver`: the `CheckpointSaver` trait on PostgreSQL.

use std::collections::BTreeMap;
use std::time::Duration;
use tracing::field::Empty;
use waypoint_checkpoint::raw::{
    PreparedPut, PreparedSave, PreparedWrites, check_fenced_saves, expected_heads_json, lease_lost,
    record_batch, record_put, record_read, record_writes,
};

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;
use sqlx::PgConnection;
use sqlx::postgres::{PgPool, PgRow};
use waypoint_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, DeltaChannelHistory, Error, Lease, ListOptions,
    PruneStrategy, Result, Save, Serde, SerializedValue, TupleWithHistory,
};

use crate::config::PostgresConfig;
use crate::convert::tuple_from_row;
use crate::error::{DbError, pg_error};
use crate::input::{check_lookup, check_nul};
use crate::lease;
use crate::pool::{Pool, on_conn};
use crate::queries::{self, Fence, ListQuery, Via};
use crate::schema;

/// A checkpointer on a PostgreSQL database, in the tables langgraph-checkpoint-postgres
/// uses: a Python LangGraph service and this saver can share one database.
///
/// Opening one runs [`setup`](Self::setup) unless [`PostgresConfig::auto_setup`] is off.
/// Operations take a connection from the pool (shared with the stores opened by
/// `store`) for their duration. Each has a deadline
/// ([`PostgresConfig::timeout`]) and fails with [`Error::Backend`] when the server is
/// unreachable or hangs; a connection whose operation was cut off (by the deadline or by a
/// caller dropping the future) or failed in transport is closed, never reused, so no later
/// write runs inside a transaction nobody will commit. An idempotent operation that met a
/// broken connection (the server restarted) is retried once on a fresh one, so the saver
/// recovers without being rebuilt, and one that lost a deadlock runs again. Ids are refused with [`Error::InvalidConfig`] when PostgreSQL cannot
/// store them: NUL characters, or over [`crate::MAX_ID_BYTES`] in a write (the core's rule).
#[derive(Debug, Clone)]
pub struct PostgresSaver {
    pool: Pool,
    serde: Serde,
}

impl PostgresSaver {
    /// The saves as this saver stores them (see [`Self::storable_metadata`]).
    fn storable(&self, mut saves: Vec<Save>) -> Vec<Save> {
        for save in &mut saves {
            if let Save::Put { metadata, .. } = save {
                self.storable_metadata(metadata);
            }
        }
        saves
    }

    /// Checkpoint metadata as this saver stores it: in LangGraph mode without LangGraph's
    /// legacy `writes` key, which LangGraph's own PostgreSQL saver drops too.
    fn storable_metadata(&self, metadata: &mut CheckpointMetadata) {
        if self.config().langgraph_values {
            metadata.extra.remove(waypoint_checkpoint::metadata::WRITES);
        }
    }

    /// Connects to the server `config` names and, with [`PostgresConfig::auto_setup`] (the
    /// default), runs [`setup`](Self::setup); otherwise checks that the server answers.
    pub async fn connect(config: PostgresConfig) -> Result<Self> {
        let saver = PostgresSaver {
            serde: config.serde.clone(),
            pool: Pool::new(config).map_err(Error::from_failure)?,
        };
        if saver.config().auto_setup {
            saver.setup().await?;
        } else {
            saver.pool.check().await.map_err(Error::from_failure)?;
        }
        Ok(saver)
    }

    /// Connects to `postgres://...` with default settings (see [`Self::connect`]).
    pub async fn from_url(url: &str) -> Result<Self> {
        Self::connect(PostgresConfig::from_url(url)?).await
    }

    /// Creates the schema (if one is configured) and the tables, or migrates them; numbered
    /// as langgraph-checkpoint-postgres numbers its migrations. Idempotent, and safe when
    /// several processes run it at once; refuses a database migrated by a newer version.
    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres"))]
    pub async fn setup(&self) -> Result<()> {
        self.pool
            .setup(&schema::CHECKPOINT_TABLES)
            .await
            .map_err(Error::from_failure)
    }

    /// Opens a store on this saver's pool (its connections, settings and schema), set up
    /// when [`PostgresConfig::auto_setup`] is on: one pool serves both.
    #[cfg(feature = "store")]
    pub async fn store(
        &self,
        store: waypoint_store::StoreConfig,
    ) -> waypoint_store::Result<crate::PostgresStore> {
        crate::PostgresStore::on_pool(self.pool.clone(), store).await
    }

    /// The serde values are sealed and opened with.
    pub fn serde(&self) -> &Serde {
        &self.serde
    }

    /// The settings this saver was created with.
    pub fn config(&self) -> &PostgresConfig {
        self.pool.config()
    }

    /// The connection pool, for callers that want to run their own SQL next to the saver
    /// (and its stores: they share it).
    ///
    /// Behind a transaction pooler ([`PostgresConfig::transaction_pooler`]) run statements
    /// with parameters inside a transaction (`pool.begin()`): outside one, sqlx parses and
    /// executes in two round trips, which the pooler may send to two server sessions (one
    /// may run another client's statement). Its connections carry none of the session
    /// settings there (schema, timeouts).
    pub fn pool(&self) -> &PgPool {
        self.pool.pg()
    }

    /// Streams the checkpoints `list` selects, newest first, decoding each row as it
    /// arrives: memory stays flat however long the history. Behind a transaction pooler
    /// ([`PostgresConfig::transaction_pooler`]) the rows are read in one transaction, on a
    /// task of the current Tokio runtime that keeps up to 64 rows ahead of the reader.
    pub fn list_stream(
        &self,
        config: Option<&CheckpointConfig>,
        options: &ListOptions,
    ) -> BoxStream<'_, Result<CheckpointTuple>> {
        if options.limit == Some(0) {
            return futures::stream::empty().boxed();
        }
        let query = list_query(config, options)
            .map(|q| q.build(true, self.config().persistent()))
            .and_then(|query| {
                let begin = self.pool.pooled_begin().map_err(Error::from_failure)?;
                Ok((query, begin))
            });
        let rows = match query {
            Ok((query, None)) => query.fetch(self.pool.pg()).boxed(),
            Ok((query, Some(begin))) => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => in_transaction(&runtime, self.pool.pg().clone(), begin, query),
                Err(e) => {
                    return futures::stream::once(async move {
                        Err(Error::backend(
                            "postgres",
                            format!("list_stream needs a Tokio runtime: {e}"),
                        ))
                    })
                    .boxed();
                }
            },
            Err(e) => return futures::stream::once(async { Err(e) }).boxed(),
        };
        rows.map_err(pg_error)
            .and_then(move |row| async move { tuple_from_row(&row, &self.serde, false) })
            .boxed()
    }
}

/// The rows of `query`, read in one transaction opened by `begin` on a task of `runtime`
/// that keeps up to 64 rows ahead; it stops (rolling back) once the stream is dropped.
fn in_transaction(
    runtime: &tokio::runtime::Handle,
    pg: PgPool,
    begin: String,
    query: sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments>,
) -> BoxStream<'static, sqlx::Result<PgRow>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    runtime.spawn(async move {
        let read = async {
            let mut tx = pg.begin_with(begin).await?;
            let mut rows = query.fetch(&mut *tx);
            while let Some(row) = rows.next().await {
                let failed = row.is_err();
                if sender.send(row).await.is_err() || failed {
                    return Ok(());
                }
            }
            drop(rows);
            tx.commit().await
        };
        if let Err(e) = read.await {
            let _ = sender.send(Err(e)).await;
        }
    });
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|row| (row, receiver))
    })
    .boxed()
}

/// A batch of saves prepared (validated, sealed, checked storable, JSON encoded) before any
/// connection is taken, so that writing it is statements only.
struct Batch {
    saves: Vec<PreparedSave>,
    /// Checkpoint and metadata JSON of each put (empty for writes), and how many of its
    /// values are of its `new_versions` (see [`queries::put`]).
    texts: Vec<(String, String, usize)>,
}

impl Batch {
    fn prepare(serde: &Serde, saves: Vec<Save>) -> Result<Self> {
        // Every put is prepared, in order: the n-th prepared put is the n-th given.
        let mut renewed: Vec<usize> = (saves.iter())
            .filter_map(|save| match save {
                Save::Put { new_versions, .. } => Some(new_versions.len()),
                Save::Writes { .. } => None,
            })
            .collect();
        renewed.reverse();
        let saves = PreparedSave::batch(serde, saves)?;
        record_batch(&saves);
        let texts = saves
            .iter()
            .map(|save| match save {
                PreparedSave::Put(put) => Ok((
                    json_text(&put.checkpoint)?,
                    json_text(&put.metadata)?,
                    renewed.pop().unwrap_or(put.values.len()),
                )),
                PreparedSave::Writes(_) => Ok((String::new(), String::new(), 0)),
            })
            .collect::<Result<_>>()?;
        Ok(Batch { saves, texts })
    }

    fn is_empty(&self) -> bool {
        self.saves.is_empty()
    }

    /// Writes every save, in order, in the caller's transaction; with `heads`
    /// ([`expected_heads_json`]), puts whose expected head moved are refused.
    async fn write(&self, conn: &mut PgConnection, heads: &str, persistent: bool) -> Result<()> {
        for (save, (checkpoint, metadata, renewed)) in self.saves.iter().zip(&self.texts) {
            match save {
                PreparedSave::Put(put) => queries::put(
                    &mut *conn,
                    put,
                    *renewed,
                    checkpoint,
                    metadata,
                    Fence::None,
                    heads,
                    Via::Bound { persistent },
                )
                .await
                .map(drop),
                PreparedSave::Writes(w) => queries::put_writes(&mut *conn, w, persistent).await,
            }
            .map_err(|e| self.error(e))?;
        }
        Ok(())
    }

    /// Maps a driver error; the head trigger's refusal (SQLSTATE `WP409`, the newest id as
    /// its message) is the `Conflict` of the put that expected another head.
    fn error(&self, e: sqlx::Error) -> Error {
        match &e {
            sqlx::Error::Database(db) if db.code().as_deref() == Some("WP409") => {
                waypoint_checkpoint::raw::head_moved_in(&self.saves, db.message())
            }
            _ => pg_error(e),
        }
    }
}

/// The `(thread, ns, id)` a history read of `channels` at `config` targets (no id: the
/// latest), once both are checked storable.
fn history_target<'a>(
    config: &'a CheckpointConfig,
    channels: &[String],
) -> Result<(&'a str, &'a str, Option<&'a str>)> {
    check_lookup(config)?;
    channels
        .iter()
        .try_for_each(|c| check_nul("channel name", c))?;
    let id = config.checkpoint_id.as_deref().filter(|id| !id.is_empty());
    Ok((config.thread_id.as_str(), config.ns(), id))
}

fn list_query(config: Option<&CheckpointConfig>, options: &ListOptions) -> Result<ListQuery> {
    config.map(check_lookup).transpose()?;
    check_nul("before", options.before.as_deref().unwrap_or(""))?;
    Ok(ListQuery {
        thread_id: config.map(|c| c.thread_id.clone()),
        checkpoint_ns: config.and_then(|c| c.checkpoint_ns.clone()),
        checkpoint_id: config.and_then(|c| c.checkpoint_id.clone()),
        before: options.before.clone(),
        filter: options.filter.as_ref().map(json_text).transpose()?,
        limit: options.limit,
    })
}

/// JSON text PostgreSQL's `jsonb` accepts: it cannot hold U+0000, so NUL characters are
/// removed from every string and key (top-level metadata strings lose theirs in the core).
fn json_text(value: &impl serde::Serialize) -> Result<String> {
    let text = serde_json::to_string(value).map_err(|e| Error::serialization("json", e))?;
    if !text.contains("\\u0000") {
        return Ok(text);
    }
    let mut value: Value =
        serde_json::from_str(&text).map_err(|e| Error::serialization("json", e))?;
    strip_nul(&mut value);
    serde_json::to_string(&value).map_err(|e| Error::serialization("json", e))
}

fn strip_nul(value: &mut Value) {
    match value {
        Value::String(s) => s.retain(|c| c != '\0'),
        Value::Array(items) => items.iter_mut().for_each(strip_nul),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (mut key, mut v) in entries {
                key.retain(|c| c != '\0');
                strip_nul(&mut v);
                map.insert(key, v);
            }
        }
        _ => {}
    }
}

#[async_trait]
impl CheckpointSaver for PostgresSaver {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn sealed(&self) -> bool {
        self.serde.is_encrypted()
    }

    fn langgraph_values(&self) -> bool {
        self.config().langgraph_values
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(), checkpoint_id = Empty,
        rows = Empty, bytes = Empty))]
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        check_lookup(config)?;
        let id = config.checkpoint_id.clone().filter(|id| !id.is_empty());
        let persistent = self.config().persistent();
        let tuple = on_conn!(self.pool, retry = true, |conn| async {
            let query = queries::get(
                config.thread_id.clone(),
                config.ns().to_owned(),
                id.clone(),
                persistent,
            );
            let row = query.fetch_optional(conn).await.map_err(pg_error)?;
            // Read without an id, the row is its namespace's newest.
            row.map(|row| tuple_from_row(&row, &self.serde, id.is_none()))
                .transpose()
        })?;
        record_read(&tuple);
        Ok(tuple)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
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
        let persistent = self.config().persistent();
        // A long history may take longer than the timeout to read; each row may not.
        // Checkpoints first, then each value they share once: consecutive checkpoints
        // mostly hold the same versions.
        let timeout = self.config().timeout;
        let tuples = on_conn!(self.pool, retry = true, bounded = false, |conn| async {
            let query = list_query(config, options)?.build(false, persistent);
            let heads = queries::fetch_heads(&mut *conn, query, &self.serde, timeout).await?;
            let values = queries::fetch_values(conn, &heads, persistent, timeout).await?;
            heads
                .into_iter()
                .map(|head| {
                    let (thread, ns) = (head.scope().0.to_owned(), head.scope().1.to_owned());
                    head.into_tuple(&self.serde, false, |channel, version| {
                        let key = (
                            thread.clone(),
                            ns.clone(),
                            channel.to_owned(),
                            version.to_owned(),
                        );
                        values.get(&key).cloned()
                    })
                })
                .collect::<Result<Vec<_>>>()
        })?;
        record_read(&tuples);
        Ok(tuples)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(), checkpoint_id = %checkpoint.id,
        bytes = Empty))]
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        mut metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig> {
        self.storable_metadata(&mut metadata);
        let renewed = new_versions.len();
        let put = PreparedPut::new(&self.serde, config, checkpoint, metadata, new_versions)?;
        record_put(&put);
        let (checkpoint, metadata) = (json_text(&put.checkpoint)?, json_text(&put.metadata)?);
        let via = Via::of(self.pool.pooled_settings(), self.config().persistent());
        // One message, one transaction of its own: behind a pooler too (see `Via`).
        on_conn!(self.pool, retry = true, pinned = false, |conn| async {
            queries::put(
                conn,
                &put,
                renewed,
                &checkpoint,
                &metadata,
                Fence::None,
                "",
                via,
            )
            .await
            .map_err(pg_error)
        })?;
        Ok(put.config())
    }

    /// One statement: the thread is claimed, already lapsed, in the put's own transaction,
    /// so it costs what a put costs and leaves no live lease behind.
    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(), checkpoint_id = %checkpoint.id,
        bytes = Empty))]
    async fn put_unleased(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        mut metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<Option<CheckpointConfig>> {
        self.storable_metadata(&mut metadata);
        let renewed = new_versions.len();
        let put = PreparedPut::new(&self.serde, config, checkpoint, metadata, new_versions)?;
        check_nul("thread_id", &put.thread_id)?;
        record_put(&put);
        let (checkpoint, metadata) = (json_text(&put.checkpoint)?, json_text(&put.metadata)?);
        let via = Via::of(self.pool.pooled_settings(), self.config().persistent());
        // One token for every attempt: a retry after a lost reply finds the row it wrote.
        let token = Lease::new_token();
        let fence = Fence::Claim(&put.thread_id, &token);
        let written = on_conn!(self.pool, retry = true, pinned = false, |conn| async {
            queries::put(conn, &put, renewed, &checkpoint, &metadata, fence, "", via)
                .await
                .map_err(pg_error)
        })?;
        Ok(written.then(|| put.config()))
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
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
        let persistent = self.config().persistent();
        on_conn!(self.pool, retry = true, |conn| async {
            queries::put_writes(conn, &w, persistent)
                .await
                .map_err(pg_error)
        })
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        thread_id = saves.first().map(Save::thread_id),
        checkpoint_ns = Empty, checkpoint_id = Empty, rows = Empty, bytes = Empty))]
    async fn save_batch(&self, saves: Vec<Save>) -> Result<()> {
        let batch = Batch::prepare(&self.serde, self.storable(saves))?;
        if batch.is_empty() {
            return Ok(());
        }
        let persistent = self.config().persistent();
        // Every statement is idempotent, so a batch cut off by a broken connection (rolled
        // back as a whole) is safe to retry.
        on_conn!(self.pool, retry = true, |conn| async {
            let mut tx = sqlx::Connection::begin(conn).await.map_err(pg_error)?;
            batch.write(&mut tx, "", persistent).await?;
            tx.commit().await.map_err(pg_error)
        })
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        thread_id = %lease.thread_id, checkpoint_ns = Empty, checkpoint_id = Empty, rows = Empty,
        bytes = Empty))]
    async fn save_fenced(&self, lease: &Lease, saves: Vec<Save>) -> Result<()> {
        check_fenced_saves(lease, &saves)?;
        check_nul("lease token", &lease.token)?;
        let batch = Batch::prepare(&self.serde, self.storable(saves))?;
        let heads = expected_heads_json(&batch.saves);
        let persistent = self.config().persistent();
        // One put (a run's step in sync durability, the common case) is one statement that
        // checks the lease itself: one round trip, as an unfenced put.
        if let ([PreparedSave::Put(put)], [(checkpoint, metadata, renewed)]) =
            (&batch.saves[..], &batch.texts[..])
        {
            let fence = Fence::Held(&lease.thread_id, &lease.token);
            let via = Via::of(self.pool.pooled_settings(), persistent);
            let written = on_conn!(self.pool, retry = true, pinned = false, |conn| async {
                queries::put(
                    conn, put, *renewed, checkpoint, metadata, fence, &heads, via,
                )
                .await
                .map_err(|e| batch.error(e))
            })?;
            return if written {
                Ok(())
            } else {
                Err(lease_lost(lease))
            };
        }
        // The lease row stays locked until the commit: a takeover, renewal or release waits
        // for the writes, and writes after a takeover find another token. Idempotent, as
        // `save_batch`.
        on_conn!(self.pool, retry = true, |conn| async {
            let mut tx = sqlx::Connection::begin(conn).await.map_err(pg_error)?;
            if !lease::lock_if_held(&mut tx, lease, persistent).await? {
                return Err(lease_lost(lease));
            }
            batch.write(&mut tx, &heads, persistent).await?;
            tx.commit().await.map_err(pg_error)
        })
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        thread_id = thread_id))]
    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        check_nul("thread_id", thread_id)?;
        let persistent = self.config().persistent();
        on_conn!(self.pool, retry = true, |conn| async {
            queries::delete_thread(conn, thread_id, persistent)
                .await
                .map_err(pg_error)
        })
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        runs = run_ids.len()))]
    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        run_ids.iter().try_for_each(|id| check_nul("run_id", id))?;
        on_conn!(self.pool, retry = true, |conn| async {
            queries::delete_for_runs(conn, run_ids, self.config().persistent()).await
        })
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        thread_id = source_thread_id, target_thread_id = target_thread_id))]
    async fn copy_thread(&self, source_thread_id: &str, target_thread_id: &str) -> Result<()> {
        if source_thread_id == target_thread_id {
            return Err(Error::Conflict("cannot copy a thread onto itself".into()));
        }
        check_nul("source thread_id", source_thread_id)?;
        waypoint_checkpoint::raw::check_id("target thread_id", target_thread_id)?;
        let copied = on_conn!(self.pool, retry = false, |conn| async {
            queries::copy_thread(
                conn,
                source_thread_id,
                target_thread_id,
                &self.serde,
                self.config().persistent(),
            )
            .await
        })?;
        if !copied {
            return Err(Error::Conflict(format!(
                "target thread `{target_thread_id}` already has checkpoints"
            )));
        }
        Ok(())
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        threads = thread_ids.len(), strategy = ?strategy))]
    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        if thread_ids.is_empty() {
            return Ok(());
        }
        thread_ids
            .iter()
            .try_for_each(|id| check_nul("thread_id", id))?;
        let keep_latest = strategy == PruneStrategy::KeepLatest;
        on_conn!(self.pool, retry = true, |conn| async {
            queries::prune(conn, thread_ids, keep_latest, self.config().persistent()).await
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "postgres",
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
        let target = history_target(config, channels)?;
        let persistent = self.config().persistent();
        on_conn!(self.pool, retry = true, |conn| queries::delta_history(
            conn,
            &self.serde,
            target,
            channels,
            persistent
        ))
    }

    /// One statement where the seed pointers answer (a fork's read: one round trip instead
    /// of two).
    #[tracing::instrument(level = "info", skip_all, fields(backend = "postgres",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(),
        checkpoint_id = config.checkpoint_id.as_deref(), channels = channels.len()))]
    async fn get_tuple_with_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<Option<TupleWithHistory>> {
        // No history asked (LangGraph's value layout has no appending channel): get_tuple's
        // own statement, without the seed reads.
        if channels.is_empty() {
            return Ok(self.get_tuple(config).await?.map(|t| (t, BTreeMap::new())));
        }
        let target = history_target(config, channels)?;
        let persistent = self.config().persistent();
        on_conn!(self.pool, retry = true, |conn| queries::get_with_history(
            conn,
            &self.serde,
            target,
            channels,
            persistent
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "postgres",
        thread_id = thread_id))]
    async fn acquire_lease(&self, thread_id: &str, ttl: Duration) -> Result<Lease> {
        let ttl = lease::ttl_micros(thread_id, ttl)?;
        // One token for every attempt: a retry after a lost reply finds the row it wrote.
        let token = Lease::new_token();
        let persistent = self.config().persistent();
        on_conn!(self.pool, retry = true, |conn| lease::acquire(
            conn, thread_id, &token, ttl, persistent
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "postgres",
        thread_id = %lease.thread_id))]
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let ttl = lease::ttl_micros(&lease.thread_id, ttl)?;
        check_nul("thread_id", &lease.thread_id)?;
        check_nul("lease token", &lease.token)?;
        let persistent = self.config().persistent();
        on_conn!(self.pool, retry = true, |conn| lease::renew(
            conn, lease, ttl, persistent
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "postgres",
        thread_id = %lease.thread_id))]
    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        check_nul("thread_id", &lease.thread_id)?;
        check_nul("lease token", &lease.token)?;
        let persistent = self.config().persistent();
        on_conn!(self.pool, retry = true, |conn| lease::release(
            conn, lease, persistent
        ))
    }
}
