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
            let (checkpointer, store) = match backend {
                Backend::Memory => memory(self.store.clone())?,
                Backend::Sqlite => self.sqlite(Parts::Both).await?,
                Backend::Postgres => self.postgres(Parts::Both).await?,
                Backend::Redis => self.redis(Parts::Both).await?,
            };
            Ok(Connection {
                backend,
                checkpointer: checkpointer.expect("both parts were opened"),
                store: store.expect("both parts were opened"),
            })
        })
        .await
    }

    /// Opens the checkpointer alone.
    pub async fn checkpointer(&self) -> Result<Arc<dyn CheckpointSaver>> {
        Ok(self.part(Parts::Checkpointer).await?.0.expect("opened"))
    }

    /// Opens the store alone.
    pub async fn store(&self) -> Result<Arc<dyn Store>> {
        Ok(self.part(Parts::Store).await?.1.expect("opened"))
    }

    async fn part(&self, parts: Parts) -> Result<Opened> {
        let backend = self.prepare().await?;
        self.within(async {
            match backend {
                Backend::Memory => memory(self.store.clone()),
                Backend::Sqlite => self.sqlite(parts).await,
                Backend::Postgres => self.postgres(parts).await,
                Backend::Redis => self.redis(parts).await,
            }
        })
        .await
    }

    /// The URL's backend, once it is known to be compiled in and reachable.
    async fn prepare(&self) -> Result<Backend> {
        let backend = Backend::of(&self.url)?;
        if let Some(feature) = backend.feature().filter(|_| !backend.compiled_in()) {
            return Err(Error::InvalidConfig(format!(
                "`{}` needs the {feature} backend, which this build does not have: enable the \
                 `{feature}` feature of waypoint-runtime",
                redact_url(&self.url)
            )));
        }
        match backend {
            Backend::Sqlite if !self.create => require_file(&self.url)?,
            Backend::Postgres => probe(&self.url, 5432, self.timeout).await?,
            Backend::Redis => probe(&self.url, 6379, self.timeout).await?,
            _ => {}
        }
        Ok(backend)
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

    #[cfg(feature = "sqlite")]
    async fn sqlite(&self, parts: Parts) -> Result<Opened> {
        use waypoint_checkpoint_sqlite::{SqliteConfig, SqliteSaver, SqliteStore};
        let config = SqliteConfig::from_url(&self.url)?.auto_setup(self.auto_setup);
        Ok(match parts {
            Parts::Store => (
                None,
                Some(Arc::new(
                    SqliteStore::open(config, self.store.clone()).await?,
                )),
            ),
            _ => {
                let saver = SqliteSaver::open(config).await?;
                let store = match parts {
                    Parts::Both => Some(Arc::new(saver.store(self.store.clone()).await?) as _),
                    _ => None,
                };
                (Some(Arc::new(saver)), store)
            }
        })
    }

    #[cfg(feature = "postgres")]
    async fn postgres(&self, parts: Parts) -> Result<Opened> {
        use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver, PostgresStore};
        let config = PostgresConfig::from_url(&self.url)?.auto_setup(self.auto_setup);
        Ok(match parts {
            Parts::Store => (
                None,
                Some(Arc::new(
                    PostgresStore::connect(config, self.store.clone()).await?,
                )),
            ),
            _ => {
                let saver = PostgresSaver::connect(config).await?;
                let store = match parts {
                    Parts::Both => Some(Arc::new(saver.store(self.store.clone()).await?) as _),
                    _ => None,
                };
                (Some(Arc::new(saver)), store)
            }
        })
    }

    #[cfg(feature = "redis")]
    async fn redis(&self, parts: Parts) -> Result<Opened> {
        use waypoint_checkpoint_redis::{RedisConfig, RedisSaver, RedisStore};
        let config = RedisConfig::from_url(&self.url)?.auto_setup(self.auto_setup);
        Ok(match parts {
            Parts::Store => (
                None,
                Some(Arc::new(
                    RedisStore::connect(config, self.store.clone()).await?,
                )),
            ),
            _ => {
                let saver = RedisSaver::connect(config).await?;
                let store = match parts {
                    Parts::Both => Some(Arc::new(saver.store(self.store.clone()).await?) as _),
                    _ => None,
                };
                (Some(Arc::new(saver)), store)
            }
        })
    }

    #[cfg(not(feature = "sqlite"))]
    async fn sqlite(&self, _: Parts) -> Result<Opened> {
        unreachable!("prepare() refuses backends that are not compiled in")
    }

    #[cfg(not(feature = "postgres"))]
    async fn postgres(&self, _: Parts) -> Result<Opened> {
        unreachable!("prepare() refuses backends that are not compiled in")
    }

    #[cfg(not(feature = "redis"))]
    async fn redis(&self, _: Parts) -> Result<Opened> {
        unreachable!("prepare() refuses backends that are not compiled in")
    }
}

/// Which parts a call opens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Checkpointer,
    Store,
    Both,
}

/// What a backend opened.
type Opened = (Option<Arc<dyn CheckpointSaver>>, Option<Arc<dyn Store>>);

fn memory(store: StoreConfig) -> Result<Opened> {
    Ok((
        Some(Arc::new(InMemorySaver::new())),
        Some(Arc::new(InMemoryStore::with_config(store)?)),
    ))
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
