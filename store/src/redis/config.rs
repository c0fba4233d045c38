//! Where the server is, which keys the store owns, how long operations may take.

use std::fmt;
use std::time::Duration;

use crate::{Error, Result, StoreConfig};

/// Settings of a [`RedisStore`](crate::RedisStore).
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
        // The URL may carry a password.
        let url = match self.url.split_once('@') {
            Some((_, host)) => format!("redis://***@{host}"),
            None => self.url.clone(),
        };
        f.debug_struct("RedisStoreConfig")
            .field("url", &url)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("store", &self.store)
            .finish()
    }
}
