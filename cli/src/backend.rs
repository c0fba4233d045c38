//! Opening a checkpointer or a store from a URL, whichever backend it names.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use waypoint_checkpoint::{CheckpointSaver, InMemorySaver};
use waypoint_checkpoint_postgres::PostgresSaver;
use waypoint_checkpoint_redis::RedisSaver;
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_store::{Store, StoreConfig};

/// How long opening a server-backed URL may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The backend a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `memory:` (process-local, empty at start).
    Memory,
    /// `sqlite:PATH` or `sqlite::memory:`.
    Sqlite,
    /// `postgres://...` or `postgresql://...`.
    Postgres,
    /// `redis://...`.
    Redis,
}

impl Kind {
    /// The backend of `url`, or an error naming the accepted forms.
    pub(crate) fn of(url: &str) -> Result<Kind> {
        let scheme = url.split(':').next().unwrap_or_default();
        Ok(match scheme {
            "memory" => Kind::Memory,
            "sqlite" => Kind::Sqlite,
            "postgres" | "postgresql" => Kind::Postgres,
            "redis" | "rediss" => Kind::Redis,
            _ => bail!(
                "unknown URL `{url}`: use sqlite:PATH, postgres://..., redis://... or memory:"
            ),
        })
    }
}

/// How a URL is opened: `Existing` refuses a SQLite file that is not there yet (an inspector
/// should not create an empty database for a mistyped path); `Create` makes it and its tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Open {
    /// The database must exist already.
    Existing,
    /// Create the database and its tables if missing.
    Create,
}

/// Opens the checkpointer `url` names.
pub(crate) async fn saver(url: &str, open: Open) -> Result<Arc<dyn CheckpointSaver>> {
    let kind = Kind::of(url)?;
    check(kind, url, open).await?;
    let opening = async {
        Ok::<Arc<dyn CheckpointSaver>, waypoint_checkpoint::Error>(match kind {
            Kind::Memory => Arc::new(InMemorySaver::new()),
            Kind::Sqlite => Arc::new(SqliteSaver::from_url(url).await?),
            Kind::Postgres => {
                let saver = PostgresSaver::from_url(url).await?;
                if open == Open::Create {
                    saver.setup().await?;
                }
                Arc::new(saver)
            }
            Kind::Redis => Arc::new(RedisSaver::from_url(url).await?),
        })
    };
    tokio::time::timeout(CONNECT_TIMEOUT, opening)
        .await
        .with_context(|| format!("{} did not answer within {CONNECT_TIMEOUT:?}", redact(url)))?
        .with_context(|| format!("cannot open the checkpointer at {}", redact(url)))
}

/// Opens the store `url` names.
pub(crate) async fn store(url: &str, config: StoreConfig, open: Open) -> Result<Box<dyn Store>> {
    check(Kind::of(url)?, url, open).await?;
    tokio::time::timeout(CONNECT_TIMEOUT, waypoint_store::connect(url, config))
        .await
        .with_context(|| format!("{} did not answer within {CONNECT_TIMEOUT:?}", redact(url)))?
        .with_context(|| format!("cannot open the store at {}", redact(url)))
}

/// Fails early, with the reason, when the database cannot be there: a missing SQLite file
/// (for `Open::Existing`), or a server whose port refuses connections (a pool would otherwise
/// retry until its timeout and report only that it timed out).
async fn check(kind: Kind, url: &str, open: Open) -> Result<()> {
    match kind {
        Kind::Sqlite if open == Open::Existing => require_file(url),
        Kind::Postgres => probe(url, 5432).await,
        Kind::Redis => probe(url, 6379).await,
        _ => Ok(()),
    }
}

/// Opens (and drops) a TCP connection to the host and port of a `scheme://` URL; URLs this
/// cannot take apart (Unix sockets, several hosts) are left to the driver.
async fn probe(url: &str, default_port: u16) -> Result<()> {
    let Some((_, rest)) = url.split_once("://") else {
        return Ok(());
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.is_empty() || host_port.contains(',') {
        return Ok(());
    }
    let (host, port) = match host_port.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || host_port.ends_with(']') => {
            match port.parse::<u16>() {
                Ok(port) => (host, port),
                Err(_) => (host_port, default_port),
            }
        }
        _ => (host_port, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => bail!("cannot reach {host}:{port}: {e}"),
        Err(_) => bail!("cannot reach {host}:{port}: no answer within {CONNECT_TIMEOUT:?}"),
    }
}

/// Fails unless the file of a `sqlite:PATH` URL exists (`sqlite::memory:` always passes).
fn require_file(url: &str) -> Result<()> {
    let rest = url.strip_prefix("sqlite:").unwrap_or(url);
    if rest == ":memory:" {
        return Ok(());
    }
    let path = rest.strip_prefix("//").unwrap_or(rest);
    if !Path::new(path).is_file() {
        bail!("no SQLite database at `{path}`");
    }
    Ok(())
}

/// `url` without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_bad_urls() {
        assert_eq!(Kind::of("sqlite:a.db").unwrap(), Kind::Sqlite);
        assert_eq!(Kind::of("postgresql://h/db").unwrap(), Kind::Postgres);
        assert_eq!(Kind::of("redis://h:1/").unwrap(), Kind::Redis);
        assert_eq!(Kind::of("memory:").unwrap(), Kind::Memory);
        let err = Kind::of("mysql://x").unwrap_err().to_string();
        assert!(err.contains("unknown URL"), "{err}");
    }

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            redact("postgres://me:secret@db:5432/x"),
            "postgres://me:***@db:5432/x"
        );
        assert_eq!(redact("sqlite:a.db"), "sqlite:a.db");
    }

    #[tokio::test]
    async fn a_closed_port_is_reported_at_once() {
        let start = std::time::Instant::now();
        let err = probe("postgres://me:pw@127.0.0.1:1/db", 5432)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("cannot reach 127.0.0.1:1:"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(5));
        // Forms the probe leaves to the driver.
        assert!(
            probe("postgres:///db?host=/run/postgresql", 5432)
                .await
                .is_ok()
        );
        assert!(probe("postgres://h1:5432,h2:5433/db", 5432).await.is_ok());
    }

    #[test]
    fn a_missing_sqlite_file_is_refused() {
        let err = require_file("sqlite:/nonexistent/w.db")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no SQLite database"), "{err}");
        assert!(require_file("sqlite::memory:").is_ok());
    }
}
