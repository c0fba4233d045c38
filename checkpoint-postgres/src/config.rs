//! Where the server is, how the pool behaves, and whether opening sets the tables up: one
//! config for the saver and the store.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgSslMode};
use waypoint_checkpoint::raw::redact_url;
use waypoint_checkpoint::{Result, Serde};

use crate::error::{DbError, Failure};

/// Settings of a [`crate::PostgresSaver`] and of a `PostgresStore`: one pool, one set of
/// names. Its `Debug` output shows the URL without its password.
#[derive(Clone)]
pub struct PostgresConfig {
    /// `postgres://user:password@host:port/database?...` (libpq URL syntax).
    pub url: String,
    /// The schema holding the tables (default: the server's `search_path`, usually
    /// `public`). Setup creates it when missing.
    pub schema: Option<String>,
    /// Most connections the pool opens (default 16).
    pub max_connections: u32,
    /// Connections kept open while idle (default 1).
    pub min_connections: u32,
    /// How long one operation may take, waiting for a connection included, before it fails
    /// with a backend error (default 10 s). A refused connection is retried (the server may
    /// be restarting) for seven tenths of it; then the error says why none came (refused,
    /// no answer, TLS, authentication, every connection busy), naming the server and the
    /// operation.
    pub timeout: Duration,
    /// How long an idle connection stays in the pool (default 10 min).
    pub idle_timeout: Duration,
    /// How long the server lets a session sit idle inside a transaction before it ends the
    /// session, rolling the transaction back (`idle_in_transaction_session_timeout`): a
    /// backstop against a transaction left open by a client that stalled or vanished, which
    /// would hold its row locks (a thread's lease) indefinitely. `None` (the default) is
    /// three times [`timeout`](Self::timeout), at least one second.
    pub idle_in_transaction_timeout: Option<Duration>,
    /// How long the server lets one statement run (`statement_timeout`), so that a statement
    /// whose client gave up does not run on. `None` (the default) leaves the server's setting;
    /// setup is never limited. It bounds a streamed `list` too: set it above the longest read.
    pub statement_timeout: Option<Duration>,
    /// Server-side prepared statements (default on). Turn off behind PgBouncer in
    /// transaction mode, where a statement prepared on one server connection is unknown on
    /// the next.
    pub prepared_statements: bool,
    /// Whether the URL reaches PostgreSQL through a pooler in transaction mode (PgBouncer's
    /// `pool_mode = transaction`, Supavisor's transaction mode), which may run consecutive
    /// transactions of one client connection on different server sessions and drops the
    /// startup `options` (default: the URL's `transaction_pooler=true`, else off). On, every
    /// operation runs in one transaction opening with the session settings (schema,
    /// timeouts) as `SET LOCAL`, prepared statements are off whatever
    /// [`prepared_statements`](Self::prepared_statements) says, and setup is one transaction
    /// that builds indexes inside it (not `CONCURRENTLY`).
    pub transaction_pooler: bool,
    /// Whether opening a saver or a store runs its `setup()` (default on): creates or
    /// migrates its tables, idempotently. Off, call `setup()` yourself.
    pub auto_setup: bool,
    /// Whether and how the connection is encrypted and the server verified; `None` (the
    /// default) keeps the URL's `sslmode`, else `prefer`.
    pub ssl_mode: Option<SslMode>,
    /// The CA certificates (PEM) the server's certificate must chain to, trusted beside the
    /// webpki roots (the URL's `sslrootcert`); `None` keeps the URL's.
    pub ssl_root_cert: Option<PathBuf>,
    /// The client certificate and its private key (PEM) for `cert` authentication (the
    /// URL's `sslcert` and `sslkey`); `None` keeps the URL's.
    pub ssl_client_cert: Option<(PathBuf, PathBuf)>,
    /// The saver's: seals stored values when it has a keyring.
    pub serde: Serde,
    /// The saver's: whether values are written as Python LangGraph reads them (default on):
    /// a runtime on this saver then encodes in `Format::LangGraph` (LangChain messages,
    /// LangGraph `Interrupt` and `Send` as Python objects) and stores appending channels
    /// whole, so every supported LangGraph reads the thread. Off: Waypoint's faster
    /// positional encoding and delta history, readable by Waypoint only.
    pub langgraph_values: bool,
    /// The store's: keeps an indexed store's vectors in LangGraph's `store_vectors` table and
    /// searches them with pgvector inside PostgreSQL, as Python's `PostgresStore` does
    /// (shared with it; no vectors in process memory), instead of the in-process index
    /// (default off; the URL's `store_vectors=pgvector`). The server needs the extension.
    pub pgvector: bool,
    /// The store's, in pgvector mode: the least `hnsw.ef_search` a search runs with (default
    /// 400; pgvector's own default is 40); a search wanting more rows runs with that many
    /// (at most pgvector's 1000). Higher finds more of the true nearest, more slowly: on
    /// 5,000 random unit vectors of 384 dimensions recall@10 was 0.51 at 40, 0.94 at 200,
    /// 0.996 at 400 (example `pgvector_bench`).
    pub pgvector_ef_search: u32,
}

impl PostgresConfig {
    /// Default settings for the server at `url` (checked when connecting).
    pub fn new(url: impl Into<String>) -> Self {
        let url = url.into();
        PostgresConfig {
            transaction_pooler: url_param(&url, POOLER_PARAM) == Some("true"),
            pgvector: url_param(&url, VECTORS_PARAM) == Some("pgvector"),
            url,
            schema: None,
            max_connections: 16,
            min_connections: 1,
            timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(600),
            idle_in_transaction_timeout: None,
            statement_timeout: None,
            prepared_statements: true,
            auto_setup: true,
            ssl_mode: None,
            ssl_root_cert: None,
            ssl_client_cert: None,
            serde: Serde::default(),
            langgraph_values: true,
            pgvector_ef_search: 400,
        }
    }

    /// Default settings for `postgres://...` or `postgresql://...`, refusing any other URL
    /// (and one libpq cannot read) with [`waypoint_checkpoint::Error::InvalidConfig`].
    pub fn from_url(url: &str) -> Result<Self> {
        Self::parse(url).map_err(waypoint_checkpoint::Error::from_failure)
    }

    /// [`from_url`](Self::from_url), failing with the crate's own failure.
    pub(crate) fn parse(url: &str) -> Result<Self, Failure> {
        let config = PostgresConfig::new(url);
        config.connect_options()?;
        Ok(config)
    }

    /// Keeps an indexed store's vectors in pgvector (see [`PostgresConfig::pgvector`]).
    pub fn pgvector(mut self, on: bool) -> Self {
        self.pgvector = on;
        self
    }

    /// Sets the least `hnsw.ef_search` of pgvector mode's searches (see
    /// [`PostgresConfig::pgvector_ef_search`]).
    pub fn pgvector_ef_search(mut self, ef_search: u32) -> Self {
        self.pgvector_ef_search = ef_search;
        self
    }

    /// Keeps the tables in `schema` (letters, digits and `_`, not starting with a digit).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Sets the pool's size.
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Sets how many connections stay open while idle.
    pub fn min_connections(mut self, n: u32) -> Self {
        self.min_connections = n;
        self
    }

    /// Sets the per-operation timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how long an idle connection stays open.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets how long the server lets a session idle inside a transaction.
    pub fn idle_in_transaction_timeout(mut self, timeout: Duration) -> Self {
        self.idle_in_transaction_timeout = Some(timeout);
        self
    }

    /// Sets how long the server lets one statement run.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = Some(timeout);
        self
    }

    /// Turns server-side prepared statements on or off.
    pub fn prepared_statements(mut self, on: bool) -> Self {
        self.prepared_statements = on;
        self
    }

    /// Says whether the URL reaches PostgreSQL through a pooler in transaction mode (see
    /// [`transaction_pooler`](Self::transaction_pooler)).
    pub fn transaction_pooler(mut self, on: bool) -> Self {
        self.transaction_pooler = on;
        self
    }

    /// Turns setup on opening on or off (see [`auto_setup`](Self::auto_setup)).
    pub fn auto_setup(mut self, on: bool) -> Self {
        self.auto_setup = on;
        self
    }

    /// Turns the LangGraph-compatible value encoding on or off (see
    /// [`langgraph_values`](Self::langgraph_values)).
    pub fn langgraph_values(mut self, on: bool) -> Self {
        self.langgraph_values = on;
        self
    }

    /// Sets whether and how the connection is encrypted and the server verified (as the
    /// URL's `sslmode`).
    pub fn ssl_mode(mut self, mode: SslMode) -> Self {
        self.ssl_mode = Some(mode);
        self
    }

    /// Trusts the CA certificates in the PEM file `path` for the server's certificate (as the
    /// URL's `sslrootcert`).
    pub fn ssl_root_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.ssl_root_cert = Some(path.into());
        self
    }

    /// Presents the client certificate `cert` with its private key `key`, both PEM files (as
    /// the URL's `sslcert` and `sslkey`).
    pub fn ssl_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.ssl_client_cert = Some((cert.into(), key.into()));
        self
    }

    /// Sets the serde values are sealed and opened with.
    pub fn serde(mut self, serde: Serde) -> Self {
        self.serde = serde;
        self
    }

    /// The `idle_in_transaction_session_timeout` sessions get, in whole milliseconds (at
    /// least 1: 0 would turn it off).
    pub(crate) fn idle_in_transaction_millis(&self) -> u128 {
        let timeout = self
            .idle_in_transaction_timeout
            .unwrap_or_else(|| (self.timeout * 3).max(Duration::from_secs(1)));
        timeout.as_millis().max(1)
    }

    /// Whether statements are prepared on the server and cached per connection: never behind
    /// a transaction pooler, where the next transaction may find another server session.
    pub(crate) fn persistent(&self) -> bool {
        self.prepared_statements && !self.transaction_pooler
    }

    /// The settings every session runs with (name, value as SQL): startup `options`, or,
    /// behind a transaction pooler, `SET LOCAL` in each transaction.
    fn session_settings(&self) -> Result<Vec<(&'static str, String)>, Failure> {
        // JIT compiles a plan for longer than these keyed statements run. With skewed
        // statistics (one busy thread) the planner would otherwise scan whole tables for a
        // handful of rows: every statement here is a keyed lookup, and the one that reads a
        // whole table (the store loading its vectors) turns sequential scans back on.
        let mut settings = vec![("jit", "off".into()), ("enable_seqscan", "off".into())];
        // Setup's idempotent statements would have the server send notices ("relation ...
        // already exists, skipping"), which sqlx logs at info level: warnings and up only.
        settings.push(("client_min_messages", "warning".into()));
        // A session left idle inside a transaction (its client stalled or vanished) is ended
        // by the server, releasing its locks.
        let idle_in_transaction = self.idle_in_transaction_millis().to_string();
        settings.push(("idle_in_transaction_session_timeout", idle_in_transaction));
        if let Some(timeout) = self.statement_timeout {
            settings.push(("statement_timeout", timeout.as_millis().max(1).to_string()));
        }
        if let Some(schema) = self.checked_schema()? {
            settings.push(("search_path", format!("\"{schema}\"")));
        }
        Ok(settings)
    }

    /// Behind a transaction pooler, the statements opening an operation's transaction:
    /// `BEGIN` and the session settings, one round trip; `None` on a direct connection.
    pub(crate) fn pooled_begin(&self) -> Result<Option<String>, Failure> {
        Ok(self.pooled_settings()?.map(|set| format!("BEGIN; {set}")))
    }

    /// Behind a transaction pooler, the session settings as `SET LOCAL` statements (`; `
    /// between them), for the transaction they open or join; `None` on a direct connection.
    pub(crate) fn pooled_settings(&self) -> Result<Option<String>, Failure> {
        if !self.transaction_pooler {
            return Ok(None);
        }
        let set: Vec<String> = (self.session_settings()?.iter())
            .map(|(name, value)| format!("SET LOCAL {name} = {value}"))
            .collect();
        Ok(Some(set.join("; ")))
    }

    /// The schema name, checked to be a plain SQL identifier.
    pub(crate) fn checked_schema(&self) -> Result<Option<&str>, Failure> {
        let Some(schema) = self.schema.as_deref() else {
            return Ok(None);
        };
        let mut chars = schema.chars();
        let plain = schema.len() <= 63
            && chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !plain {
            return Err(Failure::InvalidConfig(format!(
                "schema name `{schema}` must be 1-63 ASCII letters, digits or `_`, not starting with a digit"
            )));
        }
        Ok(Some(schema))
    }

    /// How every pooled session connects: the URL's settings, then the session settings
    /// these options ask for.
    pub(crate) fn connect_options(&self) -> Result<PgConnectOptions, Failure> {
        let url = redact_url(&self.url);
        if !["postgres://", "postgresql://"]
            .iter()
            .any(|scheme| self.url.starts_with(scheme))
        {
            return Err(Failure::InvalidConfig(format!(
                "{url} is not a PostgreSQL URL: it starts with postgres:// or postgresql://"
            )));
        }
        let mut options: PgConnectOptions =
            without_param(&without_param(&self.url, POOLER_PARAM), VECTORS_PARAM)
                .parse()
                .map_err(|e| {
                    Failure::InvalidConfig(format!("invalid PostgreSQL URL {url}: {e}"))
                })?;
        options = options.application_name("waypoint");
        if let Some(mode) = self.ssl_mode {
            options = options.ssl_mode(mode.driver());
        }
        if let Some(path) = &self.ssl_root_cert {
            options = options.ssl_root_cert(path);
        }
        if let Some((cert, key)) = &self.ssl_client_cert {
            options = options.ssl_client_cert(cert).ssl_client_key(key);
        }
        match url_param(&self.url, POOLER_PARAM) {
            None | Some("true" | "false") => {}
            Some(other) => {
                return Err(Failure::InvalidConfig(format!(
                    "{url}: {POOLER_PARAM} is `true` or `false`, not `{other}`"
                )));
            }
        }
        match url_param(&self.url, VECTORS_PARAM) {
            None | Some("pgvector" | "memory") => {}
            Some(other) => {
                return Err(Failure::InvalidConfig(format!(
                    "{url}: {VECTORS_PARAM} is `pgvector` or `memory`, not `{other}`"
                )));
            }
        }
        if !self.persistent() {
            options = options.statement_cache_capacity(0);
        }
        // A transaction pooler cannot carry startup options to the server sessions it lends
        // (PgBouncer refuses them unless told to ignore them): they go in each transaction.
        // Nor sqlx's `extra_float_digits` (whose default, since PostgreSQL 12, is exact
        // anyway): so PgBouncer needs no `ignore_startup_parameters`.
        if self.transaction_pooler {
            options = options.extra_float_digits(None);
        } else {
            for (name, value) in self.session_settings()? {
                options = options.options([(name, value)]);
            }
        }
        Ok(options)
    }
}

/// The URL query parameter saying the URL reaches a transaction pooler (`true`/`false`).
const POOLER_PARAM: &str = "transaction_pooler";

/// The URL query parameter choosing where an indexed store keeps and searches its vectors
/// (`pgvector`, or `memory`: the in-process index).
const VECTORS_PARAM: &str = "store_vectors";

/// The value of the query parameter `name` in `url`, if present.
fn url_param<'a>(url: &'a str, name: &str) -> Option<&'a str> {
    let (_, query) = url.split_once('?')?;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

/// `url` without the query parameter `name` (which the driver does not know).
fn without_param(url: &str, name: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| pair.split('=').next() != Some(name))
        .collect();
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("url", &redact_url(&self.url))
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .field("min_connections", &self.min_connections)
            .field("timeout", &self.timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field(
                "idle_in_transaction_timeout",
                &self.idle_in_transaction_timeout,
            )
            .field("statement_timeout", &self.statement_timeout)
            .field("prepared_statements", &self.prepared_statements)
            .field("transaction_pooler", &self.transaction_pooler)
            .field("auto_setup", &self.auto_setup)
            .field("ssl_mode", &self.ssl_mode)
            .field("ssl_root_cert", &self.ssl_root_cert)
            .field("ssl_client_cert", &self.ssl_client_cert)
            .field("serde", &self.serde)
            .field("langgraph_values", &self.langgraph_values)
            .field("pgvector", &self.pgvector)
            .field("pgvector_ef_search", &self.pgvector_ef_search)
            .finish()
    }
}

/// Whether the connection is encrypted, and what of the server is verified: libpq's
/// `sslmode` values, with libpq's meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// Plaintext, or TLS (unverified) if the server insists.
    Allow,
    /// TLS (unverified) if the server offers it, plaintext otherwise (sqlx's and libpq's
    /// default).
    Prefer,
    /// TLS, unverified: encrypts, but does not prove whom to.
    Require,
    /// TLS, the certificate verified to chain to a trusted CA, whatever host name it holds
    /// in libpq; with sqlx 0.8.6 a certificate naming another host is still refused
    /// (launchbadge/sqlx#3793), as in `VerifyFull`.
    VerifyCa,
    /// TLS, the certificate verified to chain to a trusted CA and to name the URL's host.
    VerifyFull,
}

impl SslMode {
    /// The driver's name for this mode.
    fn driver(self) -> PgSslMode {
        match self {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Allow => PgSslMode::Allow,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require => PgSslMode::Require,
            SslMode::VerifyCa => PgSslMode::VerifyCa,
            SslMode::VerifyFull => PgSslMode::VerifyFull,
        }
    }
}
