//! `PostgresSaver`: the `CheckpointSaver` trait on PostgreSQL.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{PgConnection, Postgres};
use waypoint_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, DeltaChannelHistory, Error, Lease, ListOptions, PreparedPut,
    PreparedSave, PreparedWrites, PruneStrategy, Result, Save, Serde, SerializedValue,
};

use crate::config::PostgresConfig;
use crate::convert::{pg_error, tuple_from_row};
use crate::lease;
use crate::queries::{self, ListQuery};
use crate::schema;

/// Runs `$body` (a future using `$conn: &mut PgConnection`) on a pooled connection within
/// the saver's timeout (or, with `bounded = false`, a body that bounds its own waits). A connection found broken is closed rather than returned to the
/// pool, and with `retry = true` (idempotent operations) the body runs once more on a fresh
/// connection, so a server restart costs no failed call once it is back.
macro_rules! on_conn {
    ($saver:expr, retry = $retry:expr, |$conn:ident| $body:expr) => {
        on_conn!($saver, retry = $retry, bounded = true, |$conn| $body)
    };
    ($saver:expr, retry = $retry:expr, bounded = $bounded:expr, |$conn:ident| $body:expr) => {{
        let saver = &$saver;
        let mut attempts = if $retry { 2 } else { 1 };
        loop {
            attempts -= 1;
            let outcome = saver
                .deadline($bounded, async {
                    let mut pooled: PoolConnection<Postgres> =
                        saver.pool.acquire().await.map_err(pg_error)?;
                    let $conn: &mut PgConnection = &mut pooled;
                    let done = $body.await;
                    if done.as_ref().is_err_and(is_broken) {
                        pooled.close_on_drop();
                    }
                    done
                })
                .await;
            match outcome {
                Err(e) if attempts > 0 && is_broken(&e) => continue,
                done => break done,
            }
        }
    }};
}

/// A checkpointer on a PostgreSQL database, in the tables langgraph-checkpoint-postgres
/// uses: a Python LangGraph service and this saver can share one database.
///
/// Operations take a connection from a pool for their duration. Each has a deadline
/// ([`PostgresConfig::timeout`]) and fails with [`Error::Backend`] when the server is
/// unreachable; a connection that broke (the server restarted) is dropped and the operation
/// retried once on a fresh one, so the saver recovers without being rebuilt.
#[derive(Debug, Clone)]
pub struct PostgresSaver {
    pool: PgPool,
    serde: Serde,
    config: PostgresConfig,
}

impl PostgresSaver {
    /// Connects to the server `config` names and checks that it answers. Does not create
    /// tables: call [`Self::setup`] once per database (it is idempotent).
    pub async fn connect(config: PostgresConfig) -> Result<Self> {
        let mut options: PgConnectOptions = config
            .url
            .parse()
            .map_err(|e| Error::InvalidConfig(format!("invalid PostgreSQL URL: {e}")))?;
        options = options.application_name("waypoint");
        if !config.prepared_statements {
            options = options.statement_cache_capacity(0);
        }
        // JIT compiles the list query's plan for longer than the query runs. Every statement
        // here is a keyed lookup: with skewed statistics (one busy thread) the planner would
        // otherwise scan whole tables for a handful of rows.
        options = options.options([("jit", "off"), ("enable_seqscan", "off")]);
        if let Some(schema) = config.checked_schema()? {
            options = options.options([("search_path", format!("\"{schema}\""))]);
        }
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .min_connections(config.min_connections.min(config.max_connections))
            .acquire_timeout(config.timeout)
            .idle_timeout(Some(config.idle_timeout))
            // A ping per checkout would double the round trips; broken connections are
            // detected by the operation that meets them instead.
            .test_before_acquire(false)
            .connect_lazy_with(options);
        let saver = PostgresSaver {
            pool,
            serde: config.serde.clone(),
            config,
        };
        on_conn!(saver, retry = false, |conn| async {
            sqlx::query("SELECT 1")
                .persistent(false)
                .execute(conn)
                .await
                .map_err(pg_error)
                .map(drop)
        })?;
        Ok(saver)
    }

    /// Connects to `postgres://...` with default settings.
    pub async fn from_url(url: &str) -> Result<Self> {
        Self::connect(PostgresConfig::new(url)).await
    }

    /// Creates the schema (if one is configured) and the tables, or migrates them; numbered
    /// as langgraph-checkpoint-postgres numbers its migrations. Idempotent, and safe when
    /// several processes run it at once.
    pub async fn setup(&self) -> Result<()> {
        let schema = self.config.checked_schema()?.map(str::to_owned);
        let wait = self.config.timeout.max(Duration::from_secs(60));
        let mut conn = self.pool.acquire().await.map_err(pg_error)?;
        schema::migrate(&mut conn, schema.as_deref(), wait).await
    }

    /// The serde values are sealed and opened with.
    pub fn serde(&self) -> &Serde {
        &self.serde
    }

    /// The settings this saver was created with.
    pub fn config(&self) -> &PostgresConfig {
        &self.config
    }

    /// The connection pool, for callers that want to run their own SQL next to the saver.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Streams the checkpoints `list` selects, newest first, decoding each row as it
    /// arrives: memory stays flat however long the history.
    pub fn list_stream(
        &self,
        config: Option<&CheckpointConfig>,
        options: &ListOptions,
    ) -> BoxStream<'_, Result<CheckpointTuple>> {
        if options.limit == Some(0) {
            return futures::stream::empty().boxed();
        }
        let query = match list_query(config, options) {
            Ok(q) => q.build(true, self.config.prepared_statements),
            Err(e) => return futures::stream::once(async { Err(e) }).boxed(),
        };
        query
            .fetch(&self.pool)
            .map_err(pg_error)
            .and_then(move |row| async move { tuple_from_row(&row, &self.serde) })
            .boxed()
    }

    /// `fut`, failing with [`Error::Backend`] if `bounded` and it takes longer than the
    /// timeout.
    async fn deadline<T>(
        &self,
        bounded: bool,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        if !bounded {
            return fut.await;
        }
        tokio::time::timeout(self.config.timeout, fut)
            .await
            .unwrap_or_else(|_| Err(timed_out(self.config.timeout)))
    }
}

/// The error of an operation the server did not answer in time.
pub(crate) fn timed_out(timeout: Duration) -> Error {
    Error::backend("postgres", format!("no answer within {timeout:?}"))
}

/// Whether an error means the connection itself failed (rather than the statement).
fn is_broken(e: &Error) -> bool {
    let Error::Backend { source, .. } = e else {
        return false;
    };
    match source.downcast_ref::<sqlx::Error>() {
        Some(sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed) => true,
        // The server is shutting down or restarting (admin_shutdown, crash_shutdown,
        // cannot_connect_now): this connection is gone.
        Some(sqlx::Error::Database(db)) => {
            matches!(db.code().as_deref(), Some("57P01" | "57P02" | "57P03"))
        }
        _ => false,
    }
}

fn list_query(config: Option<&CheckpointConfig>, options: &ListOptions) -> Result<ListQuery> {
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

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let id = config.checkpoint_id.clone().filter(|id| !id.is_empty());
        let persistent = self.config.prepared_statements;
        on_conn!(self, retry = true, |conn| async {
            let query = queries::get(
                config.thread_id.clone(),
                config.ns().to_owned(),
                id.clone(),
                persistent,
            );
            let row = query.fetch_optional(conn).await.map_err(pg_error)?;
            row.map(|row| tuple_from_row(&row, &self.serde)).transpose()
        })
    }

    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: &ListOptions,
    ) -> Result<Vec<CheckpointTuple>> {
        if options.limit == Some(0) {
            return Ok(Vec::new());
        }
        let persistent = self.config.prepared_statements;
        // A long history may take longer than the timeout to read; each row may not.
        // Checkpoints first, then each value they share once: consecutive checkpoints
        // mostly hold the same versions.
        let timeout = self.config.timeout;
        on_conn!(self, retry = true, bounded = false, |conn| async {
            let query = list_query(config, options)?.build(false, persistent);
            let heads = queries::fetch_heads(&mut *conn, query, &self.serde, timeout).await?;
            let values = queries::fetch_values(conn, &heads, persistent, timeout).await?;
            heads
                .into_iter()
                .map(|head| {
                    let (thread, ns) = (head.scope().0.to_owned(), head.scope().1.to_owned());
                    head.into_tuple(&self.serde, |channel, version| {
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
        })
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let put = PreparedPut::new(&self.serde, config, checkpoint, metadata, new_versions)?;
        let (checkpoint, metadata) = (json_text(&put.checkpoint)?, json_text(&put.metadata)?);
        let persistent = self.config.prepared_statements;
        on_conn!(self, retry = true, |conn| async {
            queries::put(conn, &put, &checkpoint, &metadata, persistent)
                .await
                .map_err(pg_error)
        })?;
        Ok(put.config())
    }

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
        let persistent = self.config.prepared_statements;
        on_conn!(self, retry = true, |conn| async {
            queries::put_writes(conn, &w, persistent)
                .await
                .map_err(pg_error)
        })
    }

    async fn save_batch(&self, saves: Vec<Save>) -> Result<()> {
        // Prepared (validated, sealed) first, then written in one transaction: one commit.
        let prepared = PreparedSave::batch(&self.serde, saves)?;
        if prepared.is_empty() {
            return Ok(());
        }
        let mut texts = Vec::with_capacity(prepared.len());
        for save in &prepared {
            texts.push(match save {
                PreparedSave::Put(put) => (json_text(&put.checkpoint)?, json_text(&put.metadata)?),
                PreparedSave::Writes(_) => (String::new(), String::new()),
            });
        }
        let persistent = self.config.prepared_statements;
        // Every statement is idempotent, so a batch cut off by a broken connection (rolled
        // back as a whole) is safe to retry.
        on_conn!(self, retry = true, |conn| async {
            let mut tx = sqlx::Connection::begin(conn).await.map_err(pg_error)?;
            for (save, (checkpoint, metadata)) in prepared.iter().zip(&texts) {
                match save {
                    PreparedSave::Put(put) => {
                        queries::put(&mut tx, put, checkpoint, metadata, persistent).await
                    }
                    PreparedSave::Writes(w) => queries::put_writes(&mut tx, w, persistent).await,
                }
                .map_err(pg_error)?;
            }
            tx.commit().await.map_err(pg_error)
        })
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let persistent = self.config.prepared_statements;
        on_conn!(self, retry = true, |conn| async {
            queries::delete_thread(conn, thread_id, persistent)
                .await
                .map_err(pg_error)
        })
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        on_conn!(self, retry = true, |conn| async {
            queries::delete_for_runs(conn, run_ids, self.config.prepared_statements).await
        })
    }

    async fn copy_thread(&self, source_thread_id: &str, target_thread_id: &str) -> Result<()> {
        if source_thread_id == target_thread_id {
            return Err(Error::Conflict("cannot copy a thread onto itself".into()));
        }
        let copied = on_conn!(self, retry = false, |conn| async {
            queries::copy_thread(
                conn,
                source_thread_id,
                target_thread_id,
                &self.serde,
                self.config.prepared_statements,
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

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        if thread_ids.is_empty() {
            return Ok(());
        }
        let keep_latest = strategy == PruneStrategy::KeepLatest;
        on_conn!(self, retry = true, |conn| async {
            queries::prune(
                conn,
                thread_ids,
                keep_latest,
                self.config.prepared_statements,
            )
            .await
        })
    }

    async fn delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        if channels.is_empty() {
            return Ok(BTreeMap::new());
        }
        let id = config.checkpoint_id.as_deref().filter(|id| !id.is_empty());
        let target = (config.thread_id.as_str(), config.ns(), id);
        let persistent = self.config.prepared_statements;
        on_conn!(self, retry = true, |conn| queries::delta_history(
            conn,
            &self.serde,
            target,
            channels,
            persistent
        ))
    }

    async fn acquire_lease(&self, thread_id: &str, ttl: Duration) -> Result<Lease> {
        let ttl = lease::ttl_micros(thread_id, ttl)?;
        // One token for every attempt: a retry after a lost reply finds the row it wrote.
        let token = Lease::new_token();
        let persistent = self.config.prepared_statements;
        on_conn!(self, retry = true, |conn| lease::acquire(
            conn, thread_id, &token, ttl, persistent
        ))
    }

    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let ttl = lease::ttl_micros(&lease.thread_id, ttl)?;
        let persistent = self.config.prepared_statements;
        on_conn!(self, retry = true, |conn| lease::renew(
            conn, lease, ttl, persistent
        ))
    }

    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        let persistent = self.config.prepared_statements;
        on_conn!(self, retry = true, |conn| lease::release(
            conn, lease, persistent
        ))
    }
}
