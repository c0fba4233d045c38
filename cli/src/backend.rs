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

use crate::secrets::{self, redact};

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
    /// The backend of `url`, or an error naming the accepted forms (and showing `url`
    /// without its secrets).
    pub(crate) fn of(url: &str) -> Result<Kind> {
        match Kind::of_scheme(url) {
            Some(kind) => Ok(kind),
            None => bail!(
                "unknown URL `{}`: use sqlite:PATH, postgres://..., redis://... or memory:",
                redact(url)
            ),
        }
    }

    /// The backend `url`'s scheme names, if any.
    pub(crate) fn of_scheme(url: &str) -> Option<Kind> {
        let scheme = url.split(':').next().unwrap_or_default();
        Some(match scheme {
            "memory" => Kind::Memory,
            "sqlite" => Kind::Sqlite,
            "postgres" | "postgresql" => Kind::Postgres,
            "redis" | "rediss" => Kind::Redis,
            _ => return None,
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
    secrets::remember(url);
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
    secrets::remember(url);
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

/// Opens (and drops) a TCP connection to the host and port of a `scheme://` URL. A URL that
/// does not parse is refused here, with why (the drivers could not parse it either); one
/// without a host (a Unix socket in the query) is left to the driver.
async fn probe(url: &str, default_port: u16) -> Result<()> {
    let parsed = match url::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(e) => bail!("cannot parse the URL `{}`: {e}", redact(url)),
    };
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
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => bail!("cannot reach {shown}: {e}"),
        Err(_) => bail!("cannot reach {shown}: no answer within {CONNECT_TIMEOUT:?}"),
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
    fn unknown_urls_are_shown_without_secrets() {
        let err = Kind::of("mysql://me:hunter2@db/x").unwrap_err().to_string();
        assert!(err.contains("unknown URL `mysql://me:***@db/x`"), "{err}");
        let err = Kind::of("me:hunter2@db").unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
        // Nowhere for a secret to hide: shown as typed.
        let err = Kind::of("waypoint.db").unwrap_err().to_string();
        assert!(err.contains("unknown URL `waypoint.db`"), "{err}");
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
        let err = probe("postgres://u@[::1]:1/db?password=hunter2", 5432)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("cannot reach [::1]:1:"), "{err}");
        // A Unix socket is left to the driver.
        assert!(
            probe("postgres:///db?host=/run/postgresql", 5432)
                .await
                .is_ok()
        );
        // What no driver can parse is refused, without echoing the URL.
        let err = probe("postgres://u:hun/ter2@h/db", 5432)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cannot parse the URL `postgres:<unparsable URL>`"),
            "{err}"
        );
        assert!(!err.contains("ter2"), "{err}");
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
