//! [`PostgresStore`]: the store on PostgreSQL (sqlx), in LangGraph's `store` table.
//!
//! Items live in the table langgraph-checkpoint-postgres's `PostgresStore` uses (migrations
//! `store_migrations` v0 to v3), so a Python LangGraph service and a Waypoint service share
//! plain items. Waypoint's additions (`waypoint_store_migrations`): `ttl_minutes` as a double,
//! an index for newest-first pages, vectors in `waypoint_store_vectors` (BYTEA of
//! little-endian f32, loaded into the in-process index), and a change log,
//! `waypoint_store_changes`, from which every process keeps its index current, and the last
//! snapshot of an index's search graph, `waypoint_store_index_snapshot`, restored at open.
//!
//! Triggers on `store` feed the log, so it holds every client's writes: inserts, updates of
//! a value (not TTL refreshes), deletes, TTL sweeps, Python's included. The column
//! `waypoint_embedded_at` says which version of a value (its `updated_at`) the stored vectors
//! were made from; a writer that does not embed (Python, a store without an index, plain SQL)
//! moves `updated_at` past it, so the item's old vectors stop being used at once, and the
//! next semantic search of any indexed process embeds it from that process's index fields
//! (one process per item, under an advisory lock) before it runs. A write by any client is
//! thus found by the first search after its commit (a few milliseconds in the interop tests),
//! and an overwritten item no longer matches its old text. Items written while no Waypoint
//! process was open are embedded the same way, up to 128 per search, newest first. The
//! triggers cost 6 to 9 µs of server time per row inserted and 12 to 28 µs per row updated
//! (see the README and the `put_cost_with_and_without_the_log_trigger` measurement in
//! `tests/store.rs`).

mod convert;
mod embed;
mod lexical;
mod pgvector;
mod queries;
mod schema;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use sqlx::PgConnection;
use sqlx::postgres::PgPool;
use waypoint_store::raw::{
    Backend, Changes, Engine, FieldVector, ItemVectors, LexicalQuery, Row, VectorQuery, Write,
};
use waypoint_store::{
    Error, IndexConfig, ItemKey, Namespace, Object, Result, StoreConfig, forward_store,
};

use self::convert::{MAX_ID_BYTES, Timestamp, check_size, check_text, storable, value_text};
use self::queries::{LogPosition, Prepared};
use crate::config::PostgresConfig;
use crate::error::{DbError, Failure, Kind};
use crate::pool::{Pool, on_conn};

/// A store on a PostgreSQL database, in the `store` table LangGraph's Python
/// `PostgresStore` uses: both can read and write the same items.
///
/// Opening one runs [`setup`](Self::setup) unless [`PostgresConfig::auto_setup`] is off
/// (idempotent, safe from several processes at once). Every batch's writes are one
/// statement: atomic, one round trip. Semantic search is served by the in-process index,
/// loaded from the stored vectors at connect and kept current with other processes' writes
/// through a change log that each semantic search replays first. Each operation has a
/// deadline ([`PostgresConfig::timeout`]) and fails with [`Error::Backend`] when the server
/// is away; a broken connection is retried once on a fresh one. Clones share the connections
/// and the index; a store opened with [`PostgresSaver::store`](crate::PostgresSaver::store)
/// shares the saver's connections too.
///
/// Writes of any other client of the table (Python's `PostgresStore`, a store without an
/// index) reach the index too: such an item is embedded from this store's index fields by
/// the next semantic search of any indexed process, once, and its old vectors are never used
/// (LangGraph keeps its own vectors in pgvector; they are not read, and Python's `index=False`
/// is not seen). An item the embedder fails on stays out of semantic results and is tried
/// again a minute later; a process whose embedder is not the application's (an inspection
/// tool) should set [`StoreConfig::embed_others`] off. Values, keys and
/// namespaces cannot hold NUL characters (`jsonb` and `text` cannot), and a key, a namespace
/// (its labels joined by `.`) or an index path over 512 bytes cannot be indexed: such a put
/// fails with [`Error::InvalidValue`] or [`Error::InvalidNamespace`].
///
/// ```no_run
/// # async fn demo() -> waypoint_store::Result<()> {
/// use serde_json::json;
/// use waypoint_checkpoint_postgres::{PostgresConfig, PostgresStore};
/// use waypoint_store::{IndexConfig, StoreConfig, StoreExt};
///
/// let store = PostgresStore::connect(
///     PostgresConfig::new("postgres://app@localhost/agents").schema("tenant_a"),
///     StoreConfig::new().index(IndexConfig::hashing(64)),
/// )
/// .await?;
/// store.put(["users", "alice"], "prefs", json!({"theme": "dark"})).await?;
/// assert!(store.get(["users", "alice"], "prefs").await?.is_some());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    engine: Engine<PgBackend>,
}

impl PostgresStore {
    /// Connects to the server `config` names and, with [`PostgresConfig::auto_setup`] (the
    /// default), runs [`setup`](Self::setup); then loads the stored vectors into the index.
    pub async fn connect(config: PostgresConfig, store: StoreConfig) -> Result<Self> {
        Self::on_pool(Pool::new(config).map_err(Error::from_failure)?, store).await
    }

    /// Connects to `postgres://...` with default pool settings (see [`Self::connect`]).
    pub async fn from_url(url: &str, store: StoreConfig) -> Result<Self> {
        let config = PostgresConfig::parse(url).map_err(Error::from_failure)?;
        Self::connect(config, store).await
    }

    /// A store on `pool`, set up if its config says so.
    pub(crate) async fn on_pool(pool: Pool, store: StoreConfig) -> Result<Self> {
        let backend = PgBackend::new(pool, store.clone());
        if backend.pool.config().auto_setup {
            backend.setup().await?;
        } else if !backend.is_set_up().await? {
            // Before setup (or before this build's migrations) there is nothing to load yet:
            // the first catch-up loads everything.
            backend.reload_first.store(true, Ordering::Relaxed);
            return Ok(PostgresStore {
                engine: Engine::new(backend, store)?,
            });
        }
        backend.open_pgvector(false).await?;
        Ok(PostgresStore {
            engine: Engine::open(backend, store).await?,
        })
    }

    /// Creates the schema (if one is configured) and the tables, or migrates them: LangGraph's
    /// `store_migrations` numbering, then Waypoint's. Idempotent, and safe when several
    /// processes run it at once; refuses a database migrated by a newer version.
    pub async fn setup(&self) -> Result<()> {
        self.engine.backend().setup().await
    }

    /// Counts describing the store's in-process vector index now (`None` without one, as in
    /// pgvector mode).
    pub fn index_stats(&self) -> Option<waypoint_store::index::IndexStats> {
        self.engine.index_stats()
    }

    /// Saves the in-process vector index's graph now (after a running build finishes), so the
    /// next open restores it instead of building it; `false` when nothing changed since the
    /// last save or there is no index. Stores also save it in the background after builds.
    pub async fn save_index_snapshot(&self) -> Result<bool> {
        self.engine.save_index_snapshot().await
    }

    /// The settings this store was opened with (shared with the saver it came from, if any).
    pub fn config(&self) -> &PostgresConfig {
        self.engine.backend().pool.config()
    }

    /// The connection pool, for callers that run their own SQL next to the store (and the
    /// saver it came from: they share it).
    ///
    /// Behind a transaction pooler ([`PostgresConfig::transaction_pooler`]) run statements
    /// with parameters inside a transaction (`pool.begin()`): outside one, sqlx parses and
    /// executes in two round trips, which the pooler may send to two server sessions (one
    /// may run another client's statement). Its connections carry none of the session
    /// settings there (schema, timeouts).
    pub fn pool(&self) -> &PgPool {
        self.engine.backend().pool.pg()
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.config().schema)
            .field("max_connections", &self.config().max_connections)
            .finish_non_exhaustive()
    }
}

forward_store!(PostgresStore);

/// The change-log positions this backend handed out, by the cursor the engine holds.
///
/// A cursor is `xmin << 16 | n`, unique per read: a cursor no longer remembered still says
/// that every change below `xmin` was read, so the read from it is complete, only wider.
#[derive(Default)]
struct LogCursors {
    recent: Mutex<(u16, VecDeque<(i64, LogPosition)>)>,
}

impl LogCursors {
    /// How many positions are remembered (the engine uses the newest, or one it kept after a
    /// failed catch-up).
    const KEEP: usize = 4;

    fn position(&self, cursor: i64) -> LogPosition {
        let recent = self.recent.lock();
        recent
            .1
            .iter()
            .find(|(c, _)| *c == cursor)
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| LogPosition::from_xid(cursor >> 16))
    }

    fn remember(&self, position: LogPosition) -> i64 {
        let mut recent = self.recent.lock();
        let (counter, positions) = &mut *recent;
        *counter = counter.wrapping_add(1);
        // Transaction ids stay far below 2^47 (2^15 wraparounds of 32-bit ids); a larger one
        // gets a cursor without the counter, which is merely never remembered.
        let cursor = match position.xmin.checked_mul(1 << 16) {
            Some(shifted) if position.xmin >= 0 => shifted | i64::from(*counter),
            _ => return position.xmin,
        };
        positions.push_front((cursor, position));
        positions.truncate(Self::KEEP);
        cursor
    }
}

/// First page of a scan; pages double from there.
const FIRST_PAGE: i64 = 32;
/// Largest page of a scan: bounds the memory one page holds.
const MAX_PAGE: i64 = 1024;

/// Rows and vectors in PostgreSQL.
pub(crate) struct PgBackend {
    /// The connections, shared with the saver the store came from (if any).
    pool: Pool,
    /// The index, TTL policy and whether to embed other writers' items.
    store: StoreConfig,
    /// Change-log positions handed to the engine.
    log: LogCursors,
    persistent: bool,
    /// The first read of the change log reports it incomplete (the index loads everything):
    /// the store was opened before setup had run.
    reload_first: AtomicBool,
    /// Seeds the advisory locks under which one process embeds an item (per schema).
    lock_seed: i64,
    /// Items the embedder failed on, left alone for a while.
    failures: embed::Failures,
    /// When this process next trims the change log.
    next_trim: Mutex<Instant>,
    /// In pgvector mode (with an index): its statements, once setup or opening made them.
    pgvector: Option<OnceLock<pgvector::Pgvector>>,
}

impl PgBackend {
    /// The store's backend on `pool` (whose config was checked when the pool was made).
    fn new(pool: Pool, store: StoreConfig) -> Self {
        let config = pool.config();
        PgBackend {
            persistent: config.persistent(),
            lock_seed: schema::lock_key(config.schema.as_deref()),
            log: LogCursors::default(),
            reload_first: AtomicBool::new(false),
            failures: embed::Failures::default(),
            next_trim: Mutex::new(Instant::now()),
            pgvector: (config.pgvector && store.index.is_some()).then(OnceLock::new),
            store,
            pool,
        }
    }

    /// Whether setup has run. Boxed (as `async_trait` boxes the backend's methods) so that
    /// `connect`'s future stays provably `Send`: from a generic context the compiler cannot
    /// see through sqlx's executor lifetimes.
    fn is_set_up(&self) -> BoxFuture<'_, Result<bool>> {
        async move {
            let set_up: std::result::Result<bool, Failure> =
                on_conn!(self.pool, retry = false, |conn| schema::is_set_up(conn));
            set_up.map_err(Error::from_failure)
        }
        .boxed()
    }

    /// Creates or migrates the store's tables (in pgvector mode, LangGraph's vector tables).
    fn setup(&self) -> BoxFuture<'_, Result<()>> {
        async move {
            self.pool
                .setup(&schema::STORE_TABLES)
                .await
                .map_err(Error::from_failure)?;
            self.open_pgvector(true).await
        }
        .boxed()
    }

    /// In pgvector mode, makes its statements, after LangGraph's vector migrations with
    /// `migrate`.
    async fn open_pgvector(&self, migrate: bool) -> Result<()> {
        let (Some(slot), Some(index)) = (&self.pgvector, &self.store.index) else {
            return Ok(());
        };
        if !migrate && slot.get().is_some() {
            return Ok(());
        }
        let lock = self.lock_seed;
        let made = on_conn!(self.pool, retry = false, |conn| pgvector::Pgvector::setup(
            conn,
            (index.dims, index.distance),
            lock,
            migrate
        ))?;
        let _ = slot.set(made);
        Ok(())
    }

    /// The pgvector statements: made at setup or opening, else now.
    async fn pgvector(&self) -> Result<Option<&pgvector::Pgvector>> {
        let Some(slot) = &self.pgvector else {
            return Ok(None);
        };
        if slot.get().is_none() {
            self.open_pgvector(false).await?;
        }
        Ok(slot.get())
    }

    /// Embeds up to [`embed::BATCH`] items whose vectors were not made from their current
    /// value (another writer changed them), newest first, and stores their vectors; returns
    /// the keys stored. Each item is locked while it is embedded, so one process embeds it;
    /// an item another process holds is left to it. Failures of the embedder are not errors
    /// here: the item is left out of semantic results and tried again later.
    #[tracing::instrument(name = "store.embed_others", level = "debug", skip_all,
        fields(backend = "postgres", rows = tracing::field::Empty))]
    async fn embed_unembedded(
        &self,
        index: &IndexConfig,
        now: convert::Timestamp,
    ) -> Result<Vec<ItemKey>> {
        let skip = self.failures.current();
        let mut conn = self
            .pool
            .deadline(true, self.pool.acquire())
            .await
            .map_err(Error::from_failure)?;
        let conn_ref: &mut PgConnection = &mut conn;
        // Behind a transaction pooler, one transaction: its locks and statements stay on one
        // server session, and its end releases the locks.
        let done = crate::schema::pinned!(
            &self.pool,
            conn_ref,
            self.embed_on(conn_ref, index, now, &skip)
        )
        .await;
        conn.finish(&done);
        if done.is_err() {
            // The session may hold locks: closed, never reused.
            conn.discard();
        }
        if let Ok(stored) = &done {
            tracing::Span::current().record("rows", stored.len());
        }
        done
    }

    /// [`embed_unembedded`](Self::embed_unembedded) on `conn`; on success the session holds
    /// no lock.
    async fn embed_on(
        &self,
        conn: &mut PgConnection,
        index: &IndexConfig,
        now: convert::Timestamp,
        skip: &[(ItemKey, convert::Timestamp)],
    ) -> Result<Vec<ItemKey>> {
        let locked = self
            .pool
            .deadline(
                true,
                queries::lock_unembedded(
                    conn,
                    now,
                    skip,
                    (embed::BATCH, i32::try_from(index.dims).unwrap_or(i32::MAX)),
                    self.lock_seed,
                    self.pool.config().transaction_pooler,
                    self.persistent,
                ),
            )
            .await?;
        if locked.is_empty() {
            return Ok(Vec::new());
        }
        let unembedded = self
            .pool
            .deadline(
                true,
                queries::read_unembedded(conn, &locked, self.persistent),
            )
            .await?;
        let values = unembedded.clone();
        let mut ready = embed::embed_items(index, unembedded, &self.failures).await;
        // Rows locked in key order, as writers lock them.
        ready.sort_by(|a, b| a.0.cmp(&b.0));
        let bodies = if index.lexical {
            lexical::bodies(&values, &ready)
        } else {
            Vec::new()
        };
        let stored = if ready.is_empty() {
            Ok(Vec::new())
        } else {
            self.pool
                .deadline(
                    true,
                    queries::store_embedded(conn, &ready, &bodies, self.persistent),
                )
                .await
        };
        let stored = match stored {
            // Lost a deadlock with a writer: embedded again at the next search.
            Err(e) if e.kind() == Kind::Transient => Vec::new(),
            other => other?,
        };
        self.pool
            .deadline(true, queries::unlock(conn, self.persistent))
            .await?;
        Ok(stored)
    }

    /// Trims the change log if this process has not for a minute (the sweeper trims it too):
    /// other writers (Python's) log changes whether or not a Waypoint sweeper runs.
    async fn trim_if_due(&self, now: convert::Timestamp) {
        {
            let mut next = self.next_trim.lock();
            if Instant::now() < *next {
                return;
            }
            *next = Instant::now() + Duration::from_secs(60);
        }
        // Best effort, like a sweep: the next one comes in a minute.
        let _ = on_conn!(self.pool, retry = false, |conn| queries::trim(
            conn,
            now,
            self.persistent
        ));
    }
}

/// The keys PostgreSQL can hold, with their positions in `keys`.
fn storable_keys(keys: &[ItemKey]) -> (Vec<usize>, Vec<ItemKey>) {
    keys.iter()
        .enumerate()
        .filter(|(_, k)| storable(k))
        .map(|(i, k)| (i, k.clone()))
        .unzip()
}

#[async_trait]
impl Backend for PgBackend {
    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn get(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<Vec<Option<Row>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let now = Timestamp::new(now);
        if keys.iter().all(storable) {
            return on_conn!(self.pool, retry = true, |conn| queries::get(
                conn,
                keys,
                now,
                self.persistent
            ));
        }
        // A key PostgreSQL cannot hold cannot have been stored.
        let (positions, asked) = storable_keys(keys);
        let found = on_conn!(self.pool, retry = true, |conn| queries::get(
            conn,
            &asked,
            now,
            self.persistent
        ))?;
        let mut rows = vec![None; keys.len()];
        for (position, row) in positions.into_iter().zip(found) {
            rows[position] = row;
        }
        Ok(rows)
    }

    async fn scan(
        &self,
        prefix: &Namespace,
        contains: Option<&Object>,
        now: DateTime<Utc>,
        visit: &mut (dyn FnMut(Row) -> bool + Send),
    ) -> Result<()> {
        if prefix.labels().iter().any(|l| l.contains('\0')) {
            return Ok(());
        }
        let now = Timestamp::new(now);
        // `{}` contains every object: no hint is the same statement, always true.
        let contains = serde_json::Value::Object(contains.cloned().unwrap_or_default());
        // jsonb cannot hold U+0000, so no stored value can equal a filter that has one.
        if contains.to_string().contains("\\u0000") {
            return Ok(());
        }
        let mut cursor = None;
        let mut page = FIRST_PAGE;
        loop {
            // A retried page resumes after the last row visited.
            let (seen, more) = on_conn!(self.pool, retry = true, |conn| queries::scan_page(
                conn,
                (prefix, &contains),
                now,
                &mut cursor,
                page,
                self.persistent,
                &mut *visit
            ))?;
            if !more || seen < page {
                return Ok(());
            }
            page = (page * 2).min(MAX_PAGE);
        }
    }

    async fn refresh(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<()> {
        let (_, keys) = storable_keys(keys);
        if keys.is_empty() {
            return Ok(());
        }
        let now = Timestamp::new(now);
        on_conn!(self.pool, retry = true, |conn| queries::refresh(
            conn,
            &keys,
            now,
            self.persistent
        ))
    }

    async fn namespaces(&self, now: DateTime<Utc>) -> Result<Vec<Namespace>> {
        let now = Timestamp::new(now);
        on_conn!(self.pool, retry = true, |conn| queries::namespaces(
            conn,
            now,
            self.persistent
        ))
    }

    async fn write(&self, writes: Vec<Write>, now: DateTime<Utc>) -> Result<()> {
        // Later writes to a key replace earlier ones: one statement cannot touch a row twice.
        let mut prepared: BTreeMap<&ItemKey, Prepared<'_>> = BTreeMap::new();
        // In pgvector mode the vectors go to `store_vectors`, in the same transaction.
        let pgvector = self.pgvector().await?;
        let mut vectors: BTreeMap<&ItemKey, &[FieldVector]> = BTreeMap::new();
        for write in &writes {
            match write {
                Write::Delete(key) => {
                    vectors.remove(key);
                    if storable(key) {
                        prepared.insert(key, Prepared::Delete);
                    } else {
                        prepared.remove(key);
                    }
                }
                Write::Put(put) => {
                    check_text(&put.key)?;
                    check_size(&put.key)?;
                    for field in put.vectors.iter().flatten() {
                        if field.field.contains('\0') {
                            return Err(Error::InvalidValue(format!(
                                "the index path {:?} contains a NUL character",
                                field.field
                            )));
                        }
                        if field.field.len() > MAX_ID_BYTES {
                            return Err(Error::InvalidValue(format!(
                                "the index path is {} bytes, over the PostgreSQL store's limit of {MAX_ID_BYTES} bytes",
                                field.field.len()
                            )));
                        }
                    }
                    let mut own = put.vectors.as_deref();
                    if let Some(fields) = own.filter(|_| pgvector.is_some()) {
                        vectors.insert(&put.key, fields);
                        own = None;
                    }
                    prepared.insert(
                        &put.key,
                        Prepared::Put {
                            text: value_text(&put.key, &put.value)?,
                            ttl_minutes: put.ttl_minutes,
                            vectors: own,
                            lexical: put.texts.as_deref().map(lexical::body),
                        },
                    );
                }
            }
        }
        if prepared.is_empty() {
            return Ok(());
        }
        let now = Timestamp::new(now);
        if let Some(pgvector) = pgvector {
            let owners: Vec<(&ItemKey, &[FieldVector])> = vectors.into_iter().collect();
            return on_conn!(self.pool, retry = true, |conn| pgvector::write(
                conn,
                pgvector,
                &prepared,
                &owners,
                now,
                self.persistent
            ));
        }
        on_conn!(self.pool, retry = true, |conn| queries::write(
            conn,
            &prepared,
            now,
            self.persistent
        ))
    }

    fn searches_vectors(&self) -> bool {
        self.pgvector.is_some()
    }

    async fn search_vectors(
        &self,
        query: VectorQuery<'_>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(Row, f32)>> {
        let Some(pgvector) = self.pgvector().await? else {
            return Err(Error::Unsupported {
                operation: "search_vectors",
                backend: "postgres",
            });
        };
        let now = Timestamp::new(now);
        let ef_search = self.pool.config().pgvector_ef_search;
        on_conn!(self.pool, retry = true, |conn| pgvector
            .search(conn, query, now, ef_search))
    }

    fn searches_lexical(&self) -> bool {
        true
    }

    async fn load_index_snapshot(&self) -> Result<Option<Vec<u8>>> {
        on_conn!(self.pool, retry = true, |conn| queries::load_snapshot(
            conn,
            self.persistent
        ))
    }

    async fn save_index_snapshot(&self, snapshot: Vec<u8>) -> Result<()> {
        on_conn!(self.pool, retry = true, |conn| queries::save_snapshot(
            conn,
            &snapshot,
            self.persistent
        ))
    }

    async fn backfill_lexical(&self) -> Result<()> {
        let pgvector = self.pgvector().await?.is_some();
        loop {
            let written = on_conn!(self.pool, retry = true, |conn| lexical::backfill(
                conn,
                pgvector,
                self.persistent
            ))?;
            tracing::debug!(written, "store.lexical.backfill");
            if written < lexical::BACKFILL_BATCH {
                return Ok(());
            }
        }
    }

    async fn search_lexical(
        &self,
        query: LexicalQuery<'_>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(ItemKey, f32)>> {
        let now = Timestamp::new(now);
        on_conn!(self.pool, retry = true, |conn| lexical::search(
            conn,
            query.terms,
            query.prefix,
            query.limit,
            now,
            self.persistent
        ))
    }

    async fn vectors(&self, keys: Option<&[ItemKey]>) -> Result<Vec<ItemVectors>> {
        let keys = match keys {
            Some(keys) => {
                let (_, keys) = storable_keys(keys);
                if keys.is_empty() {
                    return Ok(Vec::new());
                }
                Some(keys)
            }
            None => None,
        };
        on_conn!(self.pool, retry = true, |conn| queries::vectors(
            conn,
            keys.as_deref(),
            self.persistent
        ))
    }

    async fn sweep(&self, now: DateTime<Utc>) -> Result<Vec<ItemKey>> {
        let now = Timestamp::new(now);
        on_conn!(self.pool, retry = true, |conn| queries::sweep(
            conn,
            now,
            self.persistent
        ))
    }

    async fn changes(&self, after: i64) -> Result<Option<Changes>> {
        if after != i64::MAX && self.reload_first.swap(false, Ordering::Relaxed) {
            return Ok(Some(Changes {
                last_seq: after,
                keys: Vec::new(),
                complete: false,
            }));
        }
        let from = (after != i64::MAX).then(|| self.log.position(after));
        let now = Timestamp::new(Utc::now());
        let read = on_conn!(self.pool, retry = true, |conn| queries::changes(
            conn,
            from.as_ref(),
            now,
            self.persistent
        ))?;
        // Complete unless the sweeper trimmed changes this reader had not read yet.
        let complete = from.as_ref().is_none_or(|f| read.trimmed < f.xmin);
        let mut keys = read.keys;
        // Items other writers changed get their vectors before the caller loads them.
        if read.unembedded
            && self.store.embed_others
            && let Some(index) = &self.store.index
        {
            keys.extend(self.embed_unembedded(index, now).await?);
        }
        self.trim_if_due(now).await;
        Ok(Some(Changes {
            last_seq: self.log.remember(read.position),
            keys,
            complete,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_cursors_are_unique_and_fall_back_to_their_xmin() {
        let cursors = LogCursors::default();
        let at = |xmin, next, running: &[i64]| LogPosition {
            xmin,
            next,
            running: running.to_vec(),
        };
        let first = cursors.remember(at(700, 705, &[700, 702]));
        let second = cursors.remember(at(700, 710, &[700]));
        assert_ne!(first, second, "same xmin, distinct cursors");
        assert_eq!(cursors.position(first), at(700, 705, &[700, 702]));
        assert_eq!(cursors.position(second), at(700, 710, &[700]));
        for _ in 0..LogCursors::KEEP {
            cursors.remember(at(800, 800, &[]));
        }
        // Forgotten: read everything from its xmin on.
        assert_eq!(cursors.position(first), LogPosition::from_xid(700));
        assert_eq!(cursors.position(0), LogPosition::from_xid(0));
    }
}
