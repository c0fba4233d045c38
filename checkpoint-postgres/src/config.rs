//! Where the server is and how the pool behaves.

use std::time::Duration;

use waypoint_checkpoint::{Error, Result, Serde};

/// Settings of a [`crate::PostgresSaver`].
#[derive(Clone, Debug)]
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
    /// Server-side prepared statements (default on). Turn off behind PgBouncer in
    /// transaction mode, where a statement prepared on one server connection is unknown on
    /// the next.
    pub prepared_statements: bool,
    /// Seals stored values when it has a keyring.
    pub serde: Serde,
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
            prepared_statements: true,
            serde: Serde::default(),
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

    /// Turns server-side prepared statements on or off.
    pub fn prepared_statements(mut self, on: bool) -> Self {
        self.prepared_statements = on;
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
