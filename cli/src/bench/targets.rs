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
