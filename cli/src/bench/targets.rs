//! The backends a run measures: memory and a temporary SQLite always, PostgreSQL and Redis
//! when their URL is given and the server answers. Every saver or store handed out is fresh
//! (its own SQLite file, schema or key prefix), so workloads never see each other's data.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use waypoint_checkpoint::{CheckpointSaver, InMemorySaver};
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_checkpoint_sqlite::SqliteStore;
use waypoint_store::{InMemoryStore, Store, StoreConfig};
use waypoint_workloads::servers;

use crate::backend::{self, Kind, Open};
use crate::secrets::redact;

/// How long opening a fresh saver or store on a reachable server may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// One backend under test.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// The in-process saver and store.
    Memory,
    /// A SQLite file in the run's temporary directory.
    Sqlite,
    /// The PostgreSQL server at this URL.
    Postgres(String),
    /// The Redis server at this URL.
    Redis(String),
}

impl Target {
    /// The column name of this backend.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Target::Memory => "memory",
            Target::Sqlite => "sqlite",
            Target::Postgres(_) => "postgres",
            Target::Redis(_) => "redis",
        }
    }

    /// Whether this backend is a server, whose failures skip it rather than end the run.
    pub(crate) fn is_server(&self) -> bool {
        matches!(self, Target::Postgres(_) | Target::Redis(_))
    }
}

/// The reachable backends, the skipped ones with why, and the temporary directory.
pub(crate) struct Targets {
    /// Backends to measure, in column order.
    pub(crate) list: Vec<Target>,
    /// One line per skipped backend.
    pub(crate) skipped: Vec<String>,
    dir: tempfile::TempDir,
}

impl Targets {
    /// Memory, SQLite, and each server whose URL is given and answers.
    pub(crate) async fn probe(postgres: Option<String>, redis: Option<String>) -> Result<Targets> {
        let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
        let mut targets = Targets {
            list: vec![Target::Memory, Target::Sqlite],
            skipped: Vec::new(),
            dir,
        };
        // Both servers are tried at once: an unreachable one may take the whole timeout.
        let (postgres_up, redis_up) = tokio::join!(
            reachable(Kind::Postgres, postgres.as_deref()),
            reachable(Kind::Redis, redis.as_deref())
        );
        let servers = [
            ("postgres", postgres_up, postgres.map(Target::Postgres)),
            ("redis", redis_up, redis.map(Target::Redis)),
        ];
        for (name, up, target) in servers {
            match (target, up) {
                (Some(target), Ok(())) => targets.list.push(target),
                (None, _) => targets.skipped.push(format!(
                    "{name}: skipped, no URL (pass --{name} URL or set WAYPOINT_BENCH_{}_URL)",
                    name.to_uppercase()
                )),
                (Some(_), Err(e)) => targets
                    .skipped
                    .push(format!("{name}: skipped, {}", crate::one_line(&e))),
            }
        }
        Ok(targets)
    }

    /// A fresh checkpointer on `target`; PostgreSQL gets a pool of `connections`.
    pub(crate) async fn saver(
        &self,
        target: &Target,
        connections: u32,
    ) -> Result<Arc<dyn CheckpointSaver>> {
        let opening = async {
            Ok::<Arc<dyn CheckpointSaver>, waypoint_checkpoint::Error>(match target {
                Target::Memory => Arc::new(InMemorySaver::new()),
                Target::Sqlite => Arc::new(SqliteSaver::from_path(self.fresh_file()).await?),
                Target::Postgres(url) => Arc::new(servers::postgres_saver(url, connections).await?),
                Target::Redis(url) => Arc::new(servers::redis_saver(url).await?),
            })
        };
        tokio::time::timeout(OPEN_TIMEOUT, opening)
            .await
            .with_context(|| format!("{} did not answer in time", target.name()))?
            .with_context(|| format!("cannot open a {} checkpointer", target.name()))
    }

    /// A fresh store with `config` on `target`.
    pub(crate) async fn store(
        &self,
        target: &Target,
        config: StoreConfig,
    ) -> Result<Arc<dyn Store>> {
        let opening = async {
            Ok::<Arc<dyn Store>, waypoint_store::Error>(match target {
                Target::Memory => Arc::new(InMemoryStore::with_config(config)?),
                Target::Sqlite => {
                    Arc::new(SqliteStore::from_path(self.fresh_file(), config).await?)
                }
                Target::Postgres(url) => Arc::new(servers::postgres_store(url, config).await?),
                Target::Redis(url) => Arc::new(servers::redis_store(url, config).await?),
            })
        };
        tokio::time::timeout(OPEN_TIMEOUT, opening)
            .await
            .with_context(|| format!("{} did not answer in time", target.name()))?
            .with_context(|| format!("cannot open a {} store", target.name()))
    }

    /// The run's temporary directory (removed when the run ends).
    pub(crate) fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A path for a new SQLite database in the temporary directory.
    fn fresh_file(&self) -> std::path::PathBuf {
        self.dir
            .path()
            .join(format!("{}.db", uuid::Uuid::new_v4().simple()))
    }
}

/// Whether `url` names a `kind` server that answers (within the CLI's connect timeout);
/// no URL passes, as there is nothing to try.
async fn reachable(kind: Kind, url: Option<&str>) -> Result<()> {
    let Some(url) = url else {
        return Ok(());
    };
    if Kind::of(url)? != kind {
        anyhow::bail!("`{}` is not a {kind:?} URL", redact(url));
    }
    backend::saver(url, Open::Existing).await.map(drop)
}

/// How long dropping what one server's fresh handles made may take.
const DROP_TIMEOUT: Duration = Duration::from_secs(120);

/// Drops every schema and key prefix the run's fresh handles made on the servers, so a run
/// leaves them as it found them; one line per server it could not clean.
pub(crate) async fn drop_created() -> Vec<String> {
    let mut failed = Vec::new();
    for created in servers::take_created() {
        let outcome = tokio::time::timeout(DROP_TIMEOUT, drop_one(&created))
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("timed out")));
        if let Err(e) = outcome {
            let (url, what) = match &created {
                servers::Created::Schema { url, name } => (url, format!("schema `{name}`")),
                servers::Created::Prefix { url, name } => (url, format!("key prefix `{name}`")),
            };
            failed.push(format!(
                "cannot drop the {what} on {}: {}",
                redact(url),
                crate::one_line(&e)
            ));
        }
    }
    failed
}

/// Drops one schema or key prefix.
async fn drop_one(created: &servers::Created) -> Result<()> {
    match created {
        servers::Created::Schema { url, name } => drop_schema(url, name).await,
        servers::Created::Prefix { url, name } => drop_prefix(url, name).await,
    }
}

/// `DROP SCHEMA name CASCADE` on the PostgreSQL server at `url`.
async fn drop_schema(url: &str, name: &str) -> Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    sqlx::raw_sql(&format!("DROP SCHEMA IF EXISTS {quoted} CASCADE"))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(())
}

/// Unlinks every key under `prefix` (`<prefix>:*`) on the Redis server at `url`.
async fn drop_prefix(url: &str, prefix: &str) -> Result<()> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let pattern = format!("{prefix}:*");
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        if !keys.is_empty() {
            redis::cmd("UNLINK")
                .arg(&keys)
                .query_async::<()>(&mut conn)
                .await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}
