//! [`SqliteStore`]: the store on SQLite (rusqlite, bundled), in a file or in memory.
//!
//! Items live in LangGraph's `store` table (see `schema`); vectors in
//! `waypoint_store_vectors`, loaded into the in-process index when the store opens. File
//! databases run in WAL mode: one writer connection, a few readers; every process sharing a
//! file keeps its index current from the change log `waypoint_store_changes`, replayed before
//! each semantic search.

mod convert;
mod pool;
mod queries;
mod schema;

use std::fmt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use self::convert::{BACKEND, timestamp};
use self::pool::{Mode, Pool};
use self::queries::Scope;
use crate::Object;
use crate::forward_store;
use crate::raw::Engine;
use crate::raw::{Backend, Changes, ItemVectors, Row, Write};
use crate::{Error, ItemKey, Namespace, Result, StoreConfig};

/// A store in a SQLite database: a file laid out like LangGraph's `SqliteStore` (either can
/// open it), or a private in-memory database.
///
/// Every batch's writes are one transaction. Several stores (in one process or several) may
/// share a file: each semantic search first replays what the others wrote since, so new,
/// updated and deleted items reach its index at once. A file whose `store` table another
/// program made is refused with [`Error::InvalidConfig`] and left untouched. Operations run on the calling thread through
/// `block_in_place` (on tokio's blocking pool under a current-thread runtime), so they never
/// stall other tasks. Clones share the database and the index.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use serde_json::json;
/// use waypoint_store::{SqliteStore, StoreConfig, StoreExt};
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
    /// Opens (creating and migrating if needed) the database file at `path`, in WAL mode.
    pub async fn open(path: impl AsRef<Path>, config: StoreConfig) -> Result<Self> {
        Self::open_target(Target::File(path.as_ref().to_owned()), config).await
    }

    /// Opens a private in-memory database, gone when the last clone is dropped.
    pub async fn open_in_memory(config: StoreConfig) -> Result<Self> {
        Self::open_target(Target::Memory, config).await
    }

    /// Opens `sqlite:PATH`, `sqlite://PATH` or `sqlite::memory:`.
    pub async fn from_url(url: &str, config: StoreConfig) -> Result<Self> {
        Self::open_target(Target::from_url(url)?, config).await
    }

    async fn open_target(target: Target, config: StoreConfig) -> Result<Self> {
        let backend = pool::blocking(move || SqliteBackend::connect(target)).await?;
        Ok(SqliteStore {
            engine: Engine::open(backend, config).await?,
        })
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("database", &self.engine.backend().target)
            .finish()
    }
}

forward_store!(SqliteStore);

/// Which database a store opens.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    File(PathBuf),
    Memory,
}

impl Target {
    fn from_url(url: &str) -> Result<Self> {
        let rest = url
            .strip_prefix("sqlite:")
            .ok_or_else(|| Error::InvalidConfig(format!("`{url}` is not a sqlite: URL")))?;
        if rest == ":memory:" || rest == "//:memory:" {
            return Ok(Target::Memory);
        }
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() || path.contains('?') {
            return Err(Error::InvalidConfig(format!(
                "`{url}`: expected sqlite:PATH, sqlite://PATH or sqlite::memory: (no query parameters)"
            )));
        }
        Ok(Target::File(PathBuf::from(path)))
    }
}

/// Rows of a scan buffered between the blocking reader and the visitor on a current-thread
/// runtime: enough to keep both busy, few enough to keep memory flat.
const SCAN_BUFFER: usize = 64;

/// The storage engine of [`SqliteStore`].
pub(crate) struct SqliteBackend {
    writer: Pool,
    readers: Pool,
    target: Target,
    /// Whether other connections may share the database (a file): writes are then logged.
    shared: bool,
    /// Keeps the WAL checkpointer of a file database running while the backend lives.
    _checkpointer: Option<std::sync::mpsc::Sender<()>>,
}

impl SqliteBackend {
    /// Opens the connections and migrates the schema (blocking).
    fn connect(target: Target) -> Result<Self> {
        let path = match &target {
            Target::File(path) => Some(path.as_path()),
            Target::Memory => None,
        };
        let mut writer = schema::open_connection(path)?;
        schema::migrate(&mut writer)?;
        let writer = Pool::new(vec![writer])?;
        let (readers, checkpointer) = match path {
            Some(path) => {
                let count = std::thread::available_parallelism()
                    .map_or(2, |n| n.get())
                    .clamp(2, 4);
                let conns = (0..count)
                    .map(|_| schema::open_connection(Some(path)))
                    .collect::<Result<Vec<_>>>()?;
                let checkpointer = pool::spawn_checkpointer(schema::open_connection(Some(path))?)?;
                (Pool::new(conns)?, Some(checkpointer))
            }
            // A private in-memory database exists on one connection only, without a WAL.
            None => (writer.clone(), None),
        };
        Ok(SqliteBackend {
            writer,
            readers,
            shared: matches!(target, Target::File(_)),
            target,
            _checkpointer: checkpointer,
        })
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    async fn get(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<Vec<Option<Row>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let keys = keys.to_vec();
        let now = timestamp(now);
        self.readers
            .run(move |conn| queries::get(conn, &keys, &now))
            .await
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
        match pool::mode() {
            Mode::InPlace => tokio::task::block_in_place(|| {
                queries::scan(&self.readers.take(), &scope, &now, visit)
            }),
            Mode::Direct => queries::scan(&self.readers.take(), &scope, &now, visit),
            Mode::Blocking => {
                // The visitor is borrowed, so it cannot go to the blocking pool: rows come
                // back through a small channel instead, and dropping the receiver stops the
                // query.
                let (rows, mut received) = tokio::sync::mpsc::channel(SCAN_BUFFER);
                let readers = self.readers.clone();
                let reader = tokio::task::spawn_blocking(move || {
                    queries::scan(&readers.take(), &scope, &now, &mut |row| {
                        rows.blocking_send(row).is_ok()
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
        self.writer
            .run(move |conn| queries::refresh(conn, &keys, now))
            .await
    }

    async fn namespaces(&self, now: DateTime<Utc>) -> Result<Vec<Namespace>> {
        let now = timestamp(now);
        self.readers
            .run(move |conn| queries::namespaces(conn, &now))
            .await
    }

    async fn write(&self, writes: Vec<Write>, now: DateTime<Utc>) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let log = self.shared;
        self.writer
            .run(move |conn| queries::write(conn, writes, now, log))
            .await
    }

    async fn vectors(&self, keys: Option<&[ItemKey]>) -> Result<Vec<ItemVectors>> {
        let keys = keys.map(<[ItemKey]>::to_vec);
        self.readers
            .run(move |conn| queries::vectors(conn, keys.as_deref()))
            .await
    }

    async fn sweep(&self, now: DateTime<Utc>) -> Result<Vec<ItemKey>> {
        let log = self.shared;
        self.writer
            .run(move |conn| queries::sweep(conn, now, log))
            .await
    }

    async fn changes(&self, after: i64) -> Result<Option<Changes>> {
        if !self.shared {
            return Ok(None);
        }
        let from = (after != i64::MAX).then_some(after);
        let (last_seq, keys, trimmed) = self
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(Target::from_url("sqlite::memory:").unwrap(), Target::Memory);
        assert_eq!(
            Target::from_url("sqlite:a.db").unwrap(),
            Target::File("a.db".into())
        );
        assert_eq!(
            Target::from_url("sqlite://a.db").unwrap(),
            Target::File("a.db".into())
        );
        assert_eq!(
            Target::from_url("sqlite:///tmp/a.db").unwrap(),
            Target::File("/tmp/a.db".into())
        );
        for bad in [
            "postgres://x",
            "sqlite:",
            "sqlite://",
            "sqlite:a.db?mode=ro",
        ] {
            assert!(
                matches!(Target::from_url(bad), Err(Error::InvalidConfig(_))),
                "{bad}"
            );
        }
    }
}
