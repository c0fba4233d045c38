//! Where the server is, which keys the store owns, how long operations may take.

use std::fmt;
use std::time::Duration;
use waypoint_checkpoint::raw::redact_url;

use redis::aio::ConnectionLike;

pub use super::persistence::PersistenceCheck;
use super::persistence::{PersistenceError, check_persistence};

use super::convert::{BACKEND, redis_error};
use crate::{Error, Result, StoreConfig};

/// Settings of a [`RedisStore`](crate::RedisStore); `Debug` shows the URL without its
/// password.
#[derive(Clone)]
pub struct RedisStoreConfig {
    /// `redis://[user:password@]host:port[/db]` or `redis+unix:///path` (redis-rs syntax).
    pub url: String,
    /// Every key of the store starts with `{prefix}:` (default `waypoint-store`): stores with
    /// different prefixes share a server without seeing each other. No `{` or `}`.
    pub prefix: String,
    /// Longest an operation may take, reconnecting included (default 5 s); past it, or when
    /// the server is away, the operation fails with [`Error::Backend`](crate::Error::Backend).
    pub timeout: Duration,
    /// Longest one connection attempt may take (default 2 s).
    pub connect_timeout: Duration,
    /// The store's index and TTL policy.
    pub store: StoreConfig,
    /// What connecting does when the server may lose acknowledged writes on a restart
    /// (default [`PersistenceCheck::Warn`]); the same check as the Redis checkpointer's
    /// (`waypoint_checkpoint_redis::check_persistence`).
    pub persistence: PersistenceCheck,
}

impl RedisStoreConfig {
    /// Default settings for the server at `url`, with no index and no default TTL.
    pub fn new(url: impl Into<String>) -> Self {
        RedisStoreConfig {
            url: url.into(),
            prefix: String::from("waypoint-store"),
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            store: StoreConfig::default(),
            persistence: PersistenceCheck::default(),
        }
    }

    /// Keeps the store's keys under `{prefix}:`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets how long an operation may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how long one connection attempt may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the store's index and TTL policy.
    pub fn store(mut self, store: StoreConfig) -> Self {
        self.store = store;
        self
    }

    /// Sets what connecting does about the server's persistence settings.
    pub fn persistence(mut self, check: PersistenceCheck) -> Self {
        self.persistence = check;
        self
    }

    /// Reads the server's persistence settings on `conn` and warns or refuses per
    /// [`Self::persistence`], within the operation timeout.
    pub(crate) async fn check_persistence(&self, conn: &mut impl ConnectionLike) -> Result<()> {
        let server = redact_url(&self.url);
        let checking = check_persistence(conn, self.persistence, &server);
        match tokio::time::timeout(self.timeout, checking).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(PersistenceError::Refused(why))) => Err(Error::InvalidConfig(why)),
            Ok(Err(PersistenceError::Redis(e))) => Err(redis_error(e)),
            Err(_) => Err(Error::backend(
                BACKEND,
                format!("no answer from Redis at {server} within {:?}", self.timeout),
            )),
        }
    }

    /// The prefix, checked to be usable as a hash tag.
    pub(crate) fn checked_prefix(&self) -> Result<&str> {
        let prefix = self.prefix.as_str();
        if prefix.is_empty() || prefix.len() > 256 || prefix.contains(['{', '}']) {
            return Err(Error::InvalidConfig(format!(
                "key prefix `{prefix}` must be 1-256 bytes without `{{` or `}}`"
            )));
        }
        Ok(prefix)
    }
}

impl fmt::Debug for RedisStoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreConfig")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("store", &self.store)
            .field("persistence", &self.persistence)
            .finish()
    }
}
