//! Where the server is and how the pool behaves.

use std::fmt;
use std::time::Duration;
use waypoint_checkpoint::raw::redact_url;

use waypoint_checkpoint::{Error, Result, Serde};

/// Settings of a [`crate::PostgresSaver`]. Its `Debug` output shows the URL without its
/// password.
#[derive(Clone)]
pub struct PostgresConfig {
    /// `postgres://user:password@host:port/database?...` (libpq URL syntax).
    pub url: String,
    /// The schema holding the tables (default: the server's `search_path`, usually
    /// `public`). [`crate::PostgresSaver::setup`] creates it when missing.
    pub schema: Option<String>,
    /// Most connections the pool opens (default 16).
    pub max_connections: u32,
    /// Connections kept open while idle (default 1).
    pub min_connections: u32,
    /// How long one operation may take, waiting for a connection included, before it fails
    /// with [`Error::Backend`] (default 10 s).
    pub timeout: Duration,
    /// How long an idle connection stays in the pool (default 10 min).
    pub idle_timeout: Duration,
    /// How long the server lets a session sit idle inside a transaction before it ends the
    /// session, rolling the transaction back (`idle_in_transaction_session_timeout`): a
    /// backstop against a transaction left open by a client that stalled or vanished, which
    /// would hold its row locks (a thread's lease) indefinitely. `None` (the default) is
    /// three times [`timeout`](Self::timeout), at least one second.
    pub idle_in_transaction_timeout: Option<Duration>,
    /// Server-side prepared statements (default on). Turn off behind PgBouncer in
    /// transaction mode, where a statement prepared on one server connection is unknown on
    /// the next.
    pub prepared_statements: bool,
    /// Seals stored values when it has a keyring.
    pub serde: Serde,
    /// Whether values are written as Python LangGraph reads them (default on): a runtime on
    /// this saver then encodes in `Format::LangGraph` (LangChain messages, LangGraph
    /// `Interrupt` and `Send` as Python objects) and stores appending channels whole, so
    /// every supported LangGraph reads the thread. Off: Waypoint's faster positional
    /// encoding and delta history, readable by Waypoint only.
    pub langgraph_values: bool,
}

impl PostgresConfig {
    /// Default settings for the server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresConfig {
            url: url.into(),
            schema: None,
            max_connections: 16,
            min_connections: 1,
            timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(600),
            idle_in_transaction_timeout: None,
            prepared_statements: true,
            serde: Serde::default(),
            langgraph_values: true,
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

    /// Sets the per-operation timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
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
            .unwrap_or_else(|| (self.timeout * 3).max(Duration::from_secs(1)));
        timeout.as_millis().max(1)
    }

    /// Turns server-side prepared statements on or off.
    pub fn prepared_statements(mut self, on: bool) -> Self {
        self.prepared_statements = on;
        self
    }

    /// Turns the LangGraph-compatible value encoding on or off (see
    /// [`langgraph_values`](Self::langgraph_values)).
    pub fn langgraph_values(mut self, on: bool) -> Self {
        self.langgraph_values = on;
        self
    }

    /// Sets the serde values are sealed and opened with.
    pub fn serde(mut self, serde: Serde) -> Self {
        self.serde = serde;
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
            .field("prepared_statements", &self.prepared_statements)
            .field("serde", &self.serde)
            .field("langgraph_values", &self.langgraph_values)
            .finish()
    }
}
