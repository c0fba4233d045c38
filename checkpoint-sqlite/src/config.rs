//! Where the database lives and how its connections are set up: one config for the saver and
//! the store.

use std::path::{Path, PathBuf};
use std::time::Duration;

use waypoint_checkpoint::{Result, Serde};

use crate::error::{DbError, Failure};

/// The database a [`crate::SqliteSaver`] (or a `SqliteStore`) opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A database file (created if missing), in WAL mode.
    File(PathBuf),
    /// A private in-memory database, gone when the saver (or store) and every store it handed
    /// out are dropped.
    Memory,
}

/// Settings of a database's connections, shared by [`crate::SqliteSaver`] and `SqliteStore`
/// (the store's own behaviour is `waypoint_store::StoreConfig`, given beside this).
#[derive(Clone, Debug)]
pub struct SqliteConfig {
    /// The database.
    pub target: Target,
    /// How long a statement waits for another process's lock before failing (default 5 s).
    pub busy_timeout: Duration,
    /// Reader connections (default: one per core beyond the first, at most 4; in-memory
    /// databases read on the writer's connection).
    pub readers: usize,
    /// Whether opening a saver or a store runs its `setup()` (default true).
    pub auto_setup: bool,
    /// Bytes of the saver's stored values kept in process for reads (default 64 MiB; 0
    /// disables). The store keeps no such cache.
    pub cache_bytes: usize,
    /// Whether every commit waits for the WAL to reach the disk (`synchronous=FULL`).
    /// Off by default (`NORMAL`): a killed process loses no acknowledged write either way,
    /// but an OS crash or power loss may drop the last commits unless this is on.
    pub fsync_commits: bool,
    /// Seals the saver's stored values when it has a keyring (the store's items are JSON).
    pub serde: Serde,
}

impl SqliteConfig {
    /// A file database at `path`.
    pub fn file(path: impl AsRef<Path>) -> Self {
        Self::with_target(Target::File(path.as_ref().to_owned()))
    }

    /// A private in-memory database.
    pub fn memory() -> Self {
        Self::with_target(Target::Memory)
    }

    fn with_target(target: Target) -> Self {
        SqliteConfig {
            target,
            busy_timeout: Duration::from_secs(5),
            readers: std::thread::available_parallelism()
                .map_or(1, |n| n.get().saturating_sub(1))
                .clamp(1, 4),
            auto_setup: true,
            cache_bytes: 64 << 20,
            fsync_commits: false,
            serde: Serde::default(),
        }
    }

    /// Parses `sqlite::memory:`, `sqlite:relative.db`, `sqlite://relative.db` or
    /// `sqlite:///absolute/path.db`.
    pub fn from_url(url: &str) -> Result<Self> {
        Self::parse_url(url).map_err(DbError::from_failure)
    }

    /// The database file, `None` for an in-memory database.
    pub(crate) fn database_file(&self) -> Option<&Path> {
        match &self.target {
            Target::File(path) => Some(path),
            Target::Memory => None,
        }
    }

    /// [`Self::from_url`], failing with the crate's own classification.
    pub(crate) fn parse_url(url: &str) -> Result<Self, Failure> {
        let rest = url
            .strip_prefix("sqlite:")
            .ok_or_else(|| Failure::Refused(format!("`{url}` is not a sqlite: URL")))?;
        if rest == ":memory:" || rest == "//:memory:" {
            return Ok(Self::memory());
        }
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() || path.contains('?') {
            return Err(Failure::Refused(format!(
                "`{url}`: expected sqlite:PATH, sqlite://PATH or sqlite::memory: (no query parameters)"
            )));
        }
        Ok(Self::file(path))
    }

    /// The same config with `busy_timeout`: how long a statement waits for another
    /// connection's lock before failing.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// The same config with `readers` reader connections (at least one is opened; in-memory
    /// databases read on the writer's connection).
    pub fn readers(mut self, readers: usize) -> Self {
        self.readers = readers;
        self
    }

    /// The same config with `cache_bytes` of the saver's stored values kept in process (0
    /// disables the cache).
    pub fn cache_bytes(mut self, bytes: usize) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// The same config with `serde` (e.g. one with a keyring).
    pub fn serde(mut self, serde: Serde) -> Self {
        self.serde = serde;
        self
    }

    /// The same config with `fsync_commits` set: acknowledged writes survive an OS crash or
    /// power loss too, at the cost of an fsync per commit.
    pub fn fsync_commits(mut self, on: bool) -> Self {
        self.fsync_commits = on;
        self
    }

    /// The same config with `auto_setup` set: whether opening a saver or a store creates or
    /// migrates its tables.
    pub fn auto_setup(mut self, auto_setup: bool) -> Self {
        self.auto_setup = auto_setup;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waypoint_checkpoint::Error;

    #[test]
    fn urls() {
        assert_eq!(
            SqliteConfig::from_url("sqlite::memory:").unwrap().target,
            Target::Memory
        );
        assert_eq!(
            SqliteConfig::from_url("sqlite:a.db").unwrap().target,
            Target::File("a.db".into())
        );
        assert_eq!(
            SqliteConfig::from_url("sqlite://a.db").unwrap().target,
            Target::File("a.db".into())
        );
        assert_eq!(
            SqliteConfig::from_url("sqlite:///tmp/a.db").unwrap().target,
            Target::File("/tmp/a.db".into())
        );
        for bad in [
            "postgres://x",
            "sqlite:",
            "sqlite://",
            "sqlite:a.db?mode=ro",
        ] {
            assert!(
                matches!(SqliteConfig::from_url(bad), Err(Error::InvalidConfig(_))),
                "{bad}"
            );
        }
    }
}
