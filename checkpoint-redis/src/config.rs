//! Where the server is, which keys are ours, and how long operations and threads may last.

use std::fmt;
use std::time::Duration;
use waypoint_checkpoint::raw::redact_url;

use waypoint_checkpoint::{Error, Result, Serde};

use crate::PersistenceCheck;

/// The longest thread ttl (ten years): the server refuses expiry times past its clock range.
const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// Redis' own limit on one value (`proto-max-bulk-len`, 512 MB by default).
pub const REDIS_MAX_VALUE_BYTES: usize = 512 * 1024 * 1024;

/// Settings of a [`crate::RedisSaver`]; `Debug` shows the URL without its password.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]` (or `unix://...`).
    pub url: String,
    /// The start of every key name (default `waypoint`): savers with different prefixes
    /// share a server without seeing each other.
    pub prefix: String,
    /// How long one operation may take, reconnecting included, before it fails with
    /// [`Error::Backend`] (default 5 s).
    pub timeout: Duration,
    /// How long a thread nobody reads or writes is kept (default: forever). Every key of the
    /// thread gets it; reads and writes renew it; pinned threads never expire.
    pub ttl: Option<Duration>,
    /// Seals stored values when it has a keyring.
    pub serde: Serde,
    /// What connecting does when the server may lose acknowledged writes on a restart
    /// (default [`PersistenceCheck::Warn`]; see [`crate::check_persistence`]).
    pub persistence: PersistenceCheck,
    /// The largest value sent to the server, in bytes as stored (a channel value or pending
    /// write with its small header, a checkpoint's or its metadata's JSON; default
    /// [`REDIS_MAX_VALUE_BYTES`]). A larger one is refused before anything is sent, with
    /// [`Error::Serialization`] naming its size: the server would drop the connection.
    /// Set it to the server's `proto-max-bulk-len` if that was changed.
    pub max_value_bytes: usize,
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("ttl", &self.ttl)
            .field("serde", &self.serde)
            .field("persistence", &self.persistence)
            .field("max_value_bytes", &self.max_value_bytes)
            .finish()
    }
}

impl RedisConfig {
    /// Default settings for the server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: "waypoint".into(),
            timeout: Duration::from_secs(5),
            ttl: None,
            serde: Serde::default(),
            persistence: PersistenceCheck::default(),
            max_value_bytes: REDIS_MAX_VALUE_BYTES,
        }
    }

    /// Sets the key prefix (no `{` or `}`: they would break the threads' hash tags).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the per-operation timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Expires threads left alone for `ttl` (at least 1 ms).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets the serde values are sealed and opened with.
    pub fn serde(mut self, serde: Serde) -> Self {
        self.serde = serde;
        self
    }

    /// Sets what connecting does about the server's persistence settings.
    pub fn persistence(mut self, check: PersistenceCheck) -> Self {
        self.persistence = check;
        self
    }

    /// Sets the largest value sent to the server, in bytes (at least 1).
    pub fn max_value_bytes(mut self, bytes: usize) -> Self {
        self.max_value_bytes = bytes;
        self
    }

    /// Checks the settings a server cannot check.
    pub(crate) fn check(&self) -> Result<()> {
        if self.prefix.is_empty() || self.prefix.contains(['{', '}']) {
            return Err(Error::InvalidConfig(format!(
                "the Redis key prefix `{}` must be non-empty and contain no `{{` or `}}`",
                self.prefix
            )));
        }
        if self.timeout.is_zero() {
            return Err(Error::InvalidConfig(
                "the Redis timeout must be positive".into(),
            ));
        }
        if self.max_value_bytes == 0 {
            return Err(Error::InvalidConfig(
                "the largest Redis value must be at least 1 byte".into(),
            ));
        }
        if let Some(ttl) = self.ttl
            && (ttl < Duration::from_millis(1) || ttl > MAX_TTL)
        {
            return Err(Error::InvalidConfig(format!(
                "a thread ttl of {ttl:?} is out of range (1 ms to {MAX_TTL:?})"
            )));
        }
        Ok(())
    }

    /// The ttl in milliseconds, 0 without one.
    pub(crate) fn ttl_ms(&self) -> u64 {
        self.ttl
            .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
    }
}
