//! Opening a checkpointer and a store from one URL, whichever backend it names.
//!
//! | URL | backend | cargo feature of `waypoint-runtime` |
//! |---|---|---|
//! | `memory:` | [`InMemorySaver`] and [`InMemoryStore`] (process-local, empty at start) | always |
//! | `sqlite:PATH`, `sqlite://PATH`, `sqlite::memory:` | `SqliteSaver` and `SqliteStore` on one file | `sqlite` |
//! | `postgres://...`, `postgresql://...` | `PostgresSaver` and `PostgresStore` on one pool | `postgres` |
//! | `redis://...`, `rediss://...`, `redis+unix://...`, `unix://...` | `RedisSaver` and `RedisStore` on one connection | `redis` |
//!
//! One rule for tables on every backend: opening creates or migrates them (idempotently)
//! unless [`Connect::auto_setup`] is off, in which case nothing in the database is changed and
//! a later `setup()` on the saver and the store does it. A URL whose backend was not compiled
//! in is an [`Error::InvalidConfig`] naming the feature to enable.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let connection = waypoint_runtime::connect("memory:").await?;
//! let _ = (connection.checkpointer, connection.store);
//! # Ok::<(), waypoint_runtime::Error>(()) }).unwrap();
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use waypoint_checkpoint::raw::redact_url;
use waypoint_checkpoint::{CheckpointSaver, InMemorySaver};
use waypoint_store::{InMemoryStore, Store, StoreConfig};

use crate::{Error, Result};

/// The backend a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// `memory:`.
    Memory,
    /// `sqlite:PATH`, `sqlite://PATH` or `sqlite::memory:`.
    Sqlite,
    /// `postgres://...` or `postgresql://...`.
    Postgres,
    /// `redis://...`, `rediss://...`, `redis+unix://...` or `unix://...`.
    Redis,
}

/// Every scheme `connect` opens, and its backend: the one table.
const SCHEMES: [(&str, Backend); 8] = [
    ("memory", Backend::Memory),
    ("sqlite", Backend::Sqlite),
    ("postgres", Backend::Postgres),
    ("postgresql", Backend::Postgres),
    ("redis", Backend::Redis),
    ("rediss", Backend::Redis),
    ("redis+unix", Backend::Redis),
    ("unix", Backend::Redis),
];

impl Backend {
    /// The backend `url`'s scheme names, or an error listing the accepted forms (showing
    /// `url` without its password).
    pub fn of(url: &str) -> Result<Backend> {
        let scheme = url.split(':').next().unwrap_or_default();
        SCHEMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(scheme) && url.contains(':'))
            .map(|(_, backend)| *backend)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "unknown URL `{}`: use memory:, sqlite:PATH, postgres://... or redis://...",
                    redact_url(url)
                ))
            })
    }

    /// The cargo feature of `waypoint-runtime` that compiles this backend in (`None`: always).
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Backend::Memory => None,
            Backend::Sqlite => Some("sqlite"),
            Backend::Postgres => Some("postgres"),
            Backend::Redis => Some("redis"),
        }
    }

    /// Whether this build can open the backend.
    pub fn compiled_in(self) -> bool {
        match self {
            Backend::Memory => true,
            Backend::Sqlite => cfg!(feature = "sqlite"),
            Backend::Postgres => cfg!(feature = "postgres"),
            Backend::Redis => cfg!(feature = "redis"),
        }
    }
}

/// A checkpointer and a store opened together: on a database backend both share one pool
/// (or connection) and one config.
#[derive(Clone)]
pub struct Connection {
    /// The backend the URL named.
    pub backend: Backend,
    /// The checkpointer.
    pub checkpointer: Arc<dyn CheckpointSaver>,
    /// The long-term memory store.
    pub store: Arc<dyn Store>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// Opens the checkpointer and the store `url` names, creating or migrating their tables
/// (see the [module docs](self) for the URL forms). For other settings use [`Connect`].
pub async fn connect(url: &str) -> Result<Connection> {
    Connect::new(url).open().await
}

/// Options for opening a URL: what [`connect`] does with its defaults.
#[derive(Clone, Debug)]
pub struct Connect {
    url: String,
    store: StoreConfig,
    auto_setup: bool,
    create: bool,
    timeout: Duration,
}

impl Connect {
    /// Options for `url`: tables set up, a missing SQLite file created, 10 s to connect.
    pub fn new(url: impl Into<String>) -> Self {
        Connect {
            url: url.into(),
            store: StoreConfig::new(),
            auto_setup: true,
            create: true,
            timeout: Duration::from_secs(10),
        }
    }

    /// The store's settings (index, TTL, ...).
    pub fn store_config(mut self, store: StoreConfig) -> Self {
        self.store = store;
        self
    }

    /// Whether opening creates or migrates the tables (default true). Off, nothing in the
    /// database is changed: for read-only tools, or where migrations run separately.
    pub fn auto_setup(mut self, on: bool) -> Self {
        self.auto_setup = on;
        self
    }

    /// Whether a SQLite file that does not exist yet is created (default true). Off, a
    /// missing file is an error (an inspector should not create a database for a typo).
    pub fn create(mut self, on: bool) -> Self {
        self.create = on;
        self
    }

    /// How long opening may take before the server counts as unreachable (default 10 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The backend the URL names.
    pub fn backend(&self) -> Result<Backend> {
        Backend::of(&self.url)
    }

    /// Opens the checkpointer and the store, on one pool where the backend has one.
    pub async fn open(&self) -> Result<Connection> {
        let backend = self.prepare().await?;
        self.within(async {
            let saver = self.saver(backend).await?;
            let store = saver.store(self.store.clone()).await?;
            Ok(Connection {
                backend,
                checkpointer: saver.into_checkpointer(),
                store,
            })
        })
        .await
    }

    /// Opens the checkpointer alone (the store's tables are not touched).
    pub async fn checkpointer(&self) -> Result<Arc<dyn CheckpointSaver>> {
        let backend = self.prepare().await?;
        self.within(async { Ok(self.saver(backend).await?.into_checkpointer()) })
            .await
    }

    /// Opens the store alone, on a pool of its own.
    pub async fn store(&self) -> Result<Arc<dyn Store>> {
        let backend = self.prepare().await?;
        let config = self.store.clone();
        self.within(async move {
            Ok(match backend {
                Backend::Memory => Arc::new(InMemoryStore::with_config(config)?) as Arc<dyn Store>,
                #[cfg(feature = "sqlite")]
                Backend::Sqlite => Arc::new(
                    waypoint_checkpoint_sqlite::SqliteStore::open(self.sqlite_config()?, config)
                        .await?,
                ),
                #[cfg(feature = "postgres")]
                Backend::Postgres => Arc::new(
                    waypoint_checkpoint_postgres::PostgresStore::connect(
                        self.postgres_config()?,
                        config,
                    )
                    .await?,
                ),
                #[cfg(feature = "redis")]
                Backend::Redis => Arc::new(
                    waypoint_checkpoint_redis::RedisStore::connect(self.redis_config()?, config)
                        .await?,
                ),
                #[allow(unreachable_patterns)]
                other => return Err(self.not_compiled_in(other)),
            })
        })
        .await
    }

    /// Opens the checkpointer of `backend`.
    async fn saver(&self, backend: Backend) -> Result<Saver> {
        Ok(match backend {
            Backend::Memory => Saver::Memory,
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => Saver::Sqlite(
                waypoint_checkpoint_sqlite::SqliteSaver::open(self.sqlite_config()?).await?,
            ),
            #[cfg(feature = "postgres")]
            Backend::Postgres => Saver::Postgres(
                waypoint_checkpoint_postgres::PostgresSaver::connect(self.postgres_config()?)
                    .await?,
            ),
            #[cfg(feature = "redis")]
            Backend::Redis => Saver::Redis(
                waypoint_checkpoint_redis::RedisSaver::connect(self.redis_config()?).await?,
            ),
            #[allow(unreachable_patterns)]
            other => return Err(self.not_compiled_in(other)),
        })
    }

    #[cfg(feature = "sqlite")]
    fn sqlite_config(&self) -> Result<waypoint_checkpoint_sqlite::SqliteConfig> {
        let config = waypoint_checkpoint_sqlite::SqliteConfig::from_url(&self.url)?;
        Ok(config.auto_setup(self.auto_setup))
    }

    #[cfg(feature = "postgres")]
    fn postgres_config(&self) -> Result<waypoint_checkpoint_postgres::PostgresConfig> {
        let config = waypoint_checkpoint_postgres::PostgresConfig::from_url(&self.url)?;
        Ok(config.auto_setup(self.auto_setup))
    }

    #[cfg(feature = "redis")]
    fn redis_config(&self) -> Result<waypoint_checkpoint_redis::RedisConfig> {
        let config = waypoint_checkpoint_redis::RedisConfig::from_url(&self.url)?;
        Ok(config.auto_setup(self.auto_setup))
    }

    /// The URL's backend, once it is known to be compiled in and reachable.
    async fn prepare(&self) -> Result<Backend> {
        let backend = Backend::of(&self.url)?;
        if !backend.compiled_in() {
            return Err(self.not_compiled_in(backend));
        }
        match backend {
            Backend::Sqlite if !self.create => require_file(&self.url)?,
            Backend::Postgres => probe(&self.url, 5432, self.timeout).await?,
            Backend::Redis => probe(&self.url, 6379, self.timeout).await?,
            _ => {}
        }
        Ok(backend)
    }

    /// The error for a URL whose backend this build lacks, naming the feature to enable.
    fn not_compiled_in(&self, backend: Backend) -> Error {
        let feature = backend.feature().unwrap_or("default");
        Error::InvalidConfig(format!(
            "`{}` needs the {feature} backend, which this build does not have: enable the \
             `{feature}` feature of waypoint-runtime",
            redact_url(&self.url)
        ))
    }

    /// Runs `opening` within the timeout, naming the URL (without its password) on failure.
    async fn within<T>(&self, opening: impl Future<Output = Result<T>>) -> Result<T> {
        let shown = redact_url(&self.url);
        match tokio::time::timeout(self.timeout, opening).await {
            Ok(Ok(opened)) => Ok(opened),
            Ok(Err(e)) => Err(Error::Connect {
                url: shown,
                source: e.into(),
            }),
            Err(_) => Err(Error::Connect {
                url: shown,
                source: format!("no answer within {:?}", self.timeout).into(),
            }),
        }
    }
}

/// An opened checkpointer, which can open a store on its own pool.
enum Saver {
    Memory,
    #[cfg(feature = "sqlite")]
    Sqlite(waypoint_checkpoint_sqlite::SqliteSaver),
    #[cfg(feature = "postgres")]
    Postgres(waypoint_checkpoint_postgres::PostgresSaver),
    #[cfg(feature = "redis")]
    Redis(waypoint_checkpoint_redis::RedisSaver),
}

impl Saver {
    /// A store sharing the checkpointer's pool (its own, for memory).
    async fn store(&self, config: StoreConfig) -> Result<Arc<dyn Store>> {
        Ok(match self {
            Saver::Memory => Arc::new(InMemoryStore::with_config(config)?),
            #[cfg(feature = "sqlite")]
            Saver::Sqlite(saver) => Arc::new(saver.store(config).await?),
            #[cfg(feature = "postgres")]
            Saver::Postgres(saver) => Arc::new(saver.store(config).await?),
            #[cfg(feature = "redis")]
            Saver::Redis(saver) => Arc::new(saver.store(config).await?),
        })
    }

    /// The checkpointer, shared.
    fn into_checkpointer(self) -> Arc<dyn CheckpointSaver> {
        match self {
            Saver::Memory => Arc::new(InMemorySaver::new()),
            #[cfg(feature = "sqlite")]
            Saver::Sqlite(saver) => Arc::new(saver),
            #[cfg(feature = "postgres")]
            Saver::Postgres(saver) => Arc::new(saver),
            #[cfg(feature = "redis")]
            Saver::Redis(saver) => Arc::new(saver),
        }
    }
}

/// Opens (and drops) a TCP connection to the host and port of a `scheme://` URL, so that an
/// unreachable server is reported at once with its address and the cause, not as a pool
/// timeout. A URL without a host (a Unix socket) is left to the driver.
async fn probe(url: &str, default_port: u16, timeout: Duration) -> Result<()> {
    let parsed = url::Url::parse(url).map_err(|e| {
        Error::InvalidConfig(format!("cannot parse the URL `{}`: {e}", redact_url(url)))
    })?;
    let host = match parsed.host() {
        Some(url::Host::Domain(name)) if !name.is_empty() => name.to_owned(),
        Some(url::Host::Ipv4(address)) => address.to_string(),
        Some(url::Host::Ipv6(address)) => address.to_string(),
        _ => return Ok(()),
    };
    let port = parsed.port().unwrap_or(default_port);
    let shown = match parsed.host() {
        Some(url::Host::Ipv6(_)) => format!("[{host}]:{port}"),
        _ => format!("{host}:{port}"),
    };
    let reached = tokio::time::timeout(
        timeout,
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await;
    let cause = match reached {
        Ok(Ok(_)) => return Ok(()),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {timeout:?}"),
    };
    Err(Error::Connect {
        url: redact_url(url),
        source: format!("cannot reach {shown}: {cause}").into(),
    })
}

/// Fails unless the file of a `sqlite:PATH` URL exists (`sqlite::memory:` always passes).
fn require_file(url: &str) -> Result<()> {
    let rest = url.strip_prefix("sqlite:").unwrap_or(url);
    if rest == ":memory:" {
        return Ok(());
    }
    let path = rest.strip_prefix("//").unwrap_or(rest);
    let path = path.split('?').next().unwrap_or(path);
    if Path::new(path).is_file() {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "no SQLite database at `{path}`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_table_names_every_backend() {
        assert_eq!(Backend::of("memory:").unwrap(), Backend::Memory);
        assert_eq!(Backend::of("sqlite:a.db").unwrap(), Backend::Sqlite);
        assert_eq!(Backend::of("sqlite::memory:").unwrap(), Backend::Sqlite);
        assert_eq!(Backend::of("postgresql://h/db").unwrap(), Backend::Postgres);
        assert_eq!(Backend::of("POSTGRES://h/db").unwrap(), Backend::Postgres);
        for url in [
            "redis://h:1/",
            "rediss://h/",
            "redis+unix:///tmp/r.sock",
            "unix:///r",
        ] {
            assert_eq!(Backend::of(url).unwrap(), Backend::Redis, "{url}");
        }
    }

    #[test]
    fn unknown_urls_are_refused_without_their_secrets() {
        for url in ["mysql://me:hunter2@db/x", "", "redis", "waypoint.db"] {
            let err = Backend::of(url).unwrap_err().to_string();
            assert!(err.contains("unknown URL"), "{err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
    }

    #[tokio::test]
    async fn memory_opens_a_saver_and_a_store() -> Result<()> {
        let connection = connect("memory:").await?;
        assert_eq!(connection.backend, Backend::Memory);
        assert!(connection.store.batch(Vec::new()).await?.is_empty());
        let config = waypoint_checkpoint::CheckpointConfig::new("t");
        assert!(connection.checkpointer.get_tuple(&config).await?.is_none());
        Ok(())
    }

    #[tokio::test]
    async fn a_backend_not_compiled_in_names_its_feature() {
        for (url, backend) in [
            ("sqlite::memory:", Backend::Sqlite),
            ("postgres://127.0.0.1:1/db", Backend::Postgres),
            ("redis://127.0.0.1:1/", Backend::Redis),
        ] {
            if backend.compiled_in() {
                continue;
            }
            let feature = backend.feature().unwrap();
            let err = connect(url).await.unwrap_err().to_string();
            assert!(
                err.contains(&format!("`{feature}` feature of waypoint-runtime")),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn an_unreachable_server_is_named_at_once() {
        let start = std::time::Instant::now();
        let err = probe(
            "postgres://me:pw@127.0.0.1:1/db",
            5432,
            Duration::from_secs(5),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("cannot reach 127.0.0.1:1:"), "{err}");
        assert!(!err.contains(":pw@"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(5));
        let err = probe("redis://[::1]:1/", 6379, Duration::from_secs(5))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot reach [::1]:1:"), "{err}");
        // A Unix socket is left to the driver.
        assert!(
            probe(
                "postgres:///db?host=/run/postgresql",
                5432,
                Duration::from_secs(1)
            )
            .await
            .is_ok()
        );
        // What no driver can parse is refused without echoing the password.
        let err = probe("postgres://u:hun/ter2@h/db", 5432, Duration::from_secs(1))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot parse the URL"), "{err}");
        assert!(!err.contains("ter2"), "{err}");
    }

    #[test]
    fn a_missing_sqlite_file_is_refused_when_asked() {
        let err = require_file("sqlite:/nonexistent/w.db")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no SQLite database at `/nonexistent/w.db`"),
            "{err}"
        );
        assert!(require_file("sqlite::memory:").is_ok());
    }
}
