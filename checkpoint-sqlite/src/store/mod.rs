//! [`SqliteStore`]: the store on SQLite, on the saver's connections or its own.
//!
//! Items live in LangGraph's `store` table (see `schema`); vectors in
//! `waypoint_store_vectors`, loaded into the in-process index when the store opens. Every
//! process sharing a file keeps its index current from the change log
//! `waypoint_store_changes`, replayed before each semantic search.
//! The lexical leg of hybrid search runs inside SQLite, on an FTS5 table (see `lexical`):
//! opening a store reads nothing for it.

mod convert;
mod lexical;
mod queries;
mod schema;

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};
use waypoint_store::raw::{
    Backend, Changes, Engine, ItemVectors, LexicalQuery, Row, Write, async_trait,
};
use waypoint_store::{Error, ItemKey, Namespace, Object, Result, StoreConfig, forward_store};

use self::convert::Scope;
use self::convert::timestamp;
use crate::config::{SqliteConfig, Target};
use crate::error::{BACKEND, DbError};
use crate::pool::{self, Database, Mode};

/// A store in a SQLite database: a file laid out like LangGraph's `SqliteStore` (either can
/// open it), or an in-memory database.
///
/// Every batch's writes are one transaction. Several stores (in one process or several) may
/// share a file: each semantic search first replays what the others wrote since, so new,
/// updated and deleted items reach its index at once. A file whose `store` table another
/// program made is refused with [`Error::InvalidConfig`] and left untouched. Operations run on
/// the calling thread through `block_in_place` (on tokio's blocking pool under a
/// current-thread runtime), so they never stall other tasks. Clones share the database and
/// the index.
///
/// [`SqliteStore::open`] opens connections of its own, set up as the saver's are;
/// [`SqliteSaver::store`](crate::SqliteSaver::store) opens a store on the saver's.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use serde_json::json;
/// use waypoint_checkpoint_sqlite::SqliteStore;
/// use waypoint_store::{StoreConfig, StoreExt};
///
/// let store = SqliteStore::from_url("sqlite::memory:", StoreConfig::default()).await?;
/// store.put(["users", "alice"], "prefs", json!({"theme": "dark"})).await?;
/// let item = store.get(["users", "alice"], "prefs").await?.expect("just put");
/// assert_eq!(item.value["theme"], "dark");
/// # Ok::<_, waypoint_store::Error>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    engine: Engine<SqliteBackend>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database `config` names on connections of its own; runs
    /// [`Self::setup`] unless `auto_setup` is off. A `store` table another program made, or a
    /// store schema newer than this build, is refused before anything touches the file.
    pub async fn open(config: SqliteConfig, store: StoreConfig) -> Result<Self> {
        // A private in-memory database has no other writer: its writes need no change log.
        let logged = matches!(config.target, Target::File(_));
        let db = Database::open(config, schema::check_open)
            .await
            .map_err(Error::from_failure)?;
        Self::on(db, store, logged).await
    }

    /// Opens a file database with default settings.
    pub async fn from_path(path: impl AsRef<Path>, store: StoreConfig) -> Result<Self> {
        Self::open(SqliteConfig::file(path), store).await
    }

    /// Opens `sqlite:PATH`, `sqlite://PATH` or `sqlite::memory:` with default settings.
    pub async fn from_url(url: &str, store: StoreConfig) -> Result<Self> {
        let config = SqliteConfig::parse_url(url).map_err(Error::from_failure)?;
        Self::open(config, store).await
    }

    /// A store on `db`'s connections; `logged` when other stores may share the database, so
    /// that writes go to the change log their indexes follow.
    pub(crate) async fn on(db: Database, store: StoreConfig, logged: bool) -> Result<Self> {
        let backend = SqliteBackend {
            db,
            logged,
            reload_first: AtomicBool::new(false),
        };
        let auto_setup = backend.db.config.auto_setup;
        let ready = backend
            .db
            .writer
            .run(move |conn| {
                if auto_setup {
                    schema::migrate(conn)?;
                } else {
                    schema::check_open(conn)?;
                }
                schema::is_set_up(conn)
            })
            .await
            .map_err(Error::from_failure)?;
        // Before setup there is nothing to load yet: the first catch-up after it loads
        // everything.
        let engine = if ready {
            Engine::open(backend, store).await?
        } else {
            backend.reload_first.store(true, Ordering::Relaxed);
            Engine::new(backend, store)?
        };
        Ok(SqliteStore { engine })
    }

    /// Creates or migrates the store's tables (LangGraph's `store_migrations` numbering, then
    /// Waypoint's); idempotent, and safe when processes run it at once. Refuses, untouched, a
    /// database whose `store` table another program made or whose store schema is newer than
    /// this build.
    pub async fn setup(&self) -> Result<()> {
        self.engine.backend().setup().await
    }

    /// Counts describing the store's in-process vector index now (`None` without an index):
    /// its size, and how much of its graph was restored from the saved snapshot at open.
    pub fn index_stats(&self) -> Option<waypoint_store::index::IndexStats> {
        self.engine.index_stats()
    }

    /// Saves the in-process vector index's graph now (after a running build finishes), so the
    /// next open restores it instead of building it; `false` when nothing changed since the
    /// last save or there is no index. Stores also save it in the background after builds.
    pub async fn save_index_snapshot(&self) -> Result<bool> {
        self.engine.save_index_snapshot().await
    }

    /// The settings this store's connections were opened with.
    pub fn config(&self) -> &SqliteConfig {
        &self.engine.backend().db.config
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("database", &self.config().target)
            .finish()
    }
}

forward_store!(SqliteStore);

/// The most keys a get reads as a short operation (see [`Database::read`]).
const SHORT_GET: usize = 8;

/// Rows of a scan buffered between the blocking reader and the visitor on a current-thread
/// runtime: enough to keep both busy, few enough to keep memory flat.
const SCAN_BUFFER: usize = 64;

/// The storage engine of [`SqliteStore`].
struct SqliteBackend {
    db: Database,
    /// Whether other stores may share the database (a file, or a saver's database that may
    /// hand out several stores): writes are then logged.
    logged: bool,
    /// Set when the store opened before its tables existed: the first catch-up reloads the
    /// whole index.
    reload_first: AtomicBool,
}

impl SqliteBackend {
    async fn setup(&self) -> Result<()> {
        self.db
            .writer
            .run(schema::migrate)
            .await
            .map_err(Error::from_failure)
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn name(&self) -> &'static str {
        BACKEND
    }

    async fn get(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<Vec<Option<Row>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let short = keys.len() <= SHORT_GET;
        let keys = keys.to_vec();
        let now = timestamp(now);
        let get = move |conn: &mut rusqlite::Connection| queries::get(conn, &keys, &now);
        // A few rows are a short read (on the warm writer when it is idle, right on this
        // worker); more go to a reader where blocking is allowed.
        if short {
            self.db.read(get).await
        } else {
            self.db.readers.run(get).await
        }
    }

    async fn scan(
        &self,
        prefix: &Namespace,
        _contains: Option<&Object>,
        now: DateTime<Utc>,
        visit: &mut (dyn FnMut(Row) -> bool + Send),
    ) -> Result<()> {
        let scope = Scope::new(prefix);
        let now = timestamp(now);
        let readers = &self.db.readers;
        match pool::mode() {
            Mode::InPlace => tokio::task::block_in_place(|| {
                readers.with(|conn| queries::scan(conn, &scope, &now, visit))
            }),
            Mode::Direct => readers.with(|conn| queries::scan(conn, &scope, &now, visit)),
            Mode::Blocking => {
                // The visitor is borrowed, so it cannot go to the blocking pool: rows come
                // back through a small channel instead, and dropping the receiver stops the
                // query.
                let (rows, mut received) = tokio::sync::mpsc::channel(SCAN_BUFFER);
                let readers = readers.clone();
                let reader = tokio::task::spawn_blocking(move || {
                    readers.with(|conn| {
                        queries::scan(conn, &scope, &now, &mut |row| {
                            rows.blocking_send(row).is_ok()
                        })
                    })
                });
                while let Some(row) = received.recv().await {
                    if !visit(row) {
                        break;
                    }
                }
                drop(received);
                reader.await.map_err(|e| Error::backend(BACKEND, e))?
            }
        }
    }

    async fn refresh(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let keys = keys.to_vec();
        self.db
            .writer
            .run(move |conn| queries::refresh(conn, &keys, now))
            .await
    }

    async fn namespaces(&self, now: DateTime<Utc>) -> Result<Vec<Namespace>> {
        let now = timestamp(now);
        self.db
            .readers
            .run(move |conn| queries::namespaces(conn, &now))
            .await
    }

    async fn write(&self, writes: Vec<Write>, now: DateTime<Utc>) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let log = self.logged;
        self.db
            .writer
            .run(move |conn| queries::write(conn, writes, now, log))
            .await
    }

    async fn vectors(&self, keys: Option<&[ItemKey]>) -> Result<Vec<ItemVectors>> {
        let keys = keys.map(<[ItemKey]>::to_vec);
        self.db
            .readers
            .run(move |conn| queries::vectors(conn, keys.as_deref()))
            .await
    }

    async fn sweep(&self, now: DateTime<Utc>) -> Result<Vec<ItemKey>> {
        let log = self.logged;
        self.db
            .writer
            .run(move |conn| queries::sweep(conn, now, log))
            .await
    }

    fn searches_lexical(&self) -> bool {
        true
    }

    async fn search_lexical(
        &self,
        query: LexicalQuery<'_>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(ItemKey, f32)>> {
        let terms = query.terms.to_vec();
        let prefix = query.prefix.clone();
        let limit = query.limit;
        let now = timestamp(now);
        self.db
            .readers
            .run(move |conn| lexical::search(conn, &terms, &prefix, limit, &now))
            .await
    }

    async fn backfill_lexical(&self) -> Result<()> {
        let written = self.db.writer.run(lexical::backfill).await?;
        tracing::debug!(written, "store.lexical.backfill");
        Ok(())
    }

    async fn load_index_snapshot(&self) -> Result<Option<Vec<u8>>> {
        self.db.readers.run(queries::load_snapshot).await
    }

    async fn save_index_snapshot(&self, snapshot: Vec<u8>) -> Result<()> {
        let now = timestamp(Utc::now());
        self.db
            .writer
            .run(move |conn| queries::save_snapshot(conn, &snapshot, &now))
            .await
    }

    async fn changes(&self, after: i64) -> Result<Option<Changes>> {
        if !self.logged {
            return Ok(None);
        }
        if after != i64::MAX && self.reload_first.swap(false, Ordering::Relaxed) {
            return Ok(Some(Changes {
                last_seq: after,
                keys: Vec::new(),
                complete: false,
            }));
        }
        let from = (after != i64::MAX).then_some(after);
        let (last_seq, keys, trimmed) = self
            .db
            .readers
            .run(move |conn| queries::changes(conn, from))
            .await?;
        // Incomplete when entries this reader had not read were trimmed, or when the log is
        // behind the reader (the file was replaced).
        let complete = from.is_none_or(|after| trimmed <= after && last_seq >= after);
        Ok(Some(Changes {
            last_seq,
            keys,
            complete,
        }))
    }
}
