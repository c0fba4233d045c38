//! Where the server is, how the pool behaves, and the store on top.

use std::fmt;
use std::time::Duration;
use waypoint_checkpoint::raw::redact_url;

use crate::{Error, Result, StoreConfig};

/// Settings of a [`PostgresStore`](crate::PostgresStore). Its `Debug` output shows the URL
/// without its password.
#[derive(Clone)]
pub struct PostgresStoreConfig {
    /// `postgres://user:password@host:port/database?...` (libpq URL syntax).
    pub url: String,
    /// The schema holding the tables (default: the server's `search_path`, usually `public`).
    /// [`PostgresStore::setup`](crate::PostgresStore::setup) creates it when missing.
    pub schema: Option<String>,
    /// Most connections the pool opens (default 16).
    pub max_connections: u32,
    /// How long an operation waits for a free connection (default 10 s).
    pub acquire_timeout: Duration,
    /// How long one statement may run, enforced by the server and, for a server that stopped
    /// answering, by the client (default 30 s).
    pub statement_timeout: Duration,
    /// How long a connection may sit idle before it is closed rather than reused (default
    /// 10 min).
    pub idle_timeout: Duration,
    /// How long the server lets a session sit idle inside a transaction before it ends the
    /// session, rolling the transaction back (`idle_in_transaction_session_timeout`): a
    /// backstop against a client that stalled or vanished mid-transaction. `None` (the
    /// default) is three times [`statement_timeout`](Self::statement_timeout), at least one
    /// second.
    pub idle_in_transaction_timeout: Option<Duration>,
    /// Server-side prepared statements (default on). Turn off behind PgBouncer in transaction
    /// mode, where a statement prepared on one server connection is unknown on the next.
    pub prepared_statements: bool,
    /// The store's index, TTL policy and whether it embeds other writers' items
    /// ([`StoreConfig::embed_others`]).
    pub store: StoreConfig,
}

impl PostgresStoreConfig {
    /// Default settings for the server at `url`, with no index and no default TTL.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresStoreConfig {
            url: url.into(),
            schema: None,
            max_connections: 16,
            acquire_timeout: Duration::from_secs(10),
            statement_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(600),
            idle_in_transaction_timeout: None,
            prepared_statements: true,
            store: StoreConfig::default(),
        }
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

    /// Sets how long an operation waits for a connection.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// Sets how long one statement may run.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = timeout;
        self
    }

    /// Sets how long the server lets a session idle inside a transaction.
    pub fn idle_in_transaction_timeout(mut self, timeout: Duration) -> Self {
        self.idle_in_transaction_timeout = Some(timeout);
        self
    }

    /// The `idle_in_transaction_session_timeout` sessions get, in whole milliseconds (at
    /// least 1: 0 would turn it off).
    pub(crate) fn idle_in_transaction_millis(&self) -> u128 {
        let timeout = self
            .idle_in_transaction_timeout
            .unwrap_or_else(|| (self.statement_timeout * 3).max(Duration::from_secs(1)));
        timeout.as_millis().max(1)
    }

    /// Turns server-side prepared statements on or off.
    pub fn prepared_statements(mut self, on: bool) -> Self {
        self.prepared_statements = on;
        self
    }

    /// Turns embedding other writers' items on or off (see
    /// [`StoreConfig::embed_others`]).
    pub fn embed_others(mut self, on: bool) -> Self {
        self.store.embed_others = on;
        self
    }

    /// Sets the store's index and TTL policy.
    pub fn store(mut self, store: StoreConfig) -> Self {
        self.store = store;
        self
    }

    /// The schema name, checked to be a plain SQL identifier.
    pub(crate) fn checked_schema(&self) -> Result<Option<&str>> {
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
            return Err(Error::InvalidConfig(format!(
                "schema name `{schema}` must be 1-63 ASCII letters, digits or `_`, not starting with a digit"
            )));
        }
        Ok(Some(schema))
    }
}

impl fmt::Debug for PostgresStoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStoreConfig")
            .field("url", &redact_url(&self.url))
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field(
                "idle_in_transaction_timeout",
                &self.idle_in_transaction_timeout,
            )
            .field("prepared_statements", &self.prepared_statements)
            .field("store", &self.store)
            .finish()
    }
}
