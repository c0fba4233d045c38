//! Opening each checkpointer for one case.

use std::path::PathBuf;
use std::sync::Arc;

use waypoint_checkpoint::{CheckpointSaver, InMemorySaver};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_test_kit::{fresh_name, kept_temp_dir, postgres_url, redis_url};

use crate::MaybeSaver;

/// A fresh in-memory saver.
pub async fn memory() -> MaybeSaver {
    Ok(Some(Arc::new(InMemorySaver::new())))
}

/// A SQLite saver on a new file in a temp dir that outlives the process.
pub async fn sqlite() -> MaybeSaver {
    let saver = SqliteSaver::from_path(&sqlite_path()?).await?;
    Ok(Some(Arc::new(saver) as Arc<dyn CheckpointSaver>))
}

/// A PostgreSQL saver on a fresh schema of the server in `WAYPOINT_TEST_POSTGRES_URL`;
/// `None` without one, unless `WAYPOINT_REQUIRE_BACKENDS=1` makes that a failure.
pub async fn postgres() -> MaybeSaver {
    match postgres_url() {
        Some(url) => postgres_at(url).await,
        None => Ok(None),
    }
}

/// A PostgreSQL saver on a fresh schema of the server at `url` (with
/// `?transaction_pooler=true` through a pooler in transaction mode).
pub async fn postgres_at(url: String) -> MaybeSaver {
    let schema = fresh_name("wp_rt");
    let saver =
        PostgresSaver::connect(PostgresConfig::new(url).schema(schema).max_connections(4)).await?;
    saver.setup().await?;
    Ok(Some(Arc::new(saver)))
}

/// A Redis saver on a fresh key prefix of the server in `WAYPOINT_TEST_REDIS_URL`; `None`
/// without one, unless `WAYPOINT_REQUIRE_BACKENDS=1` makes that a failure.
pub async fn redis() -> MaybeSaver {
    let Some(url) = redis_url() else {
        return Ok(None);
    };
    let prefix = fresh_name("wp_rt");
    let saver = RedisSaver::connect(RedisConfig::new(url).prefix(prefix)).await?;
    Ok(Some(Arc::new(saver)))
}

/// A Redis saver on a fresh key prefix of the Redis Cluster in
/// `WAYPOINT_TEST_REDIS_CLUSTER_URL`; `None` without one, unless
/// `WAYPOINT_REQUIRE_BACKENDS=1` makes that a failure.
pub async fn redis_cluster() -> MaybeSaver {
    let Some(url) = waypoint_test_kit::redis_cluster_url() else {
        return Ok(None);
    };
    let prefix = fresh_name("wp_rt");
    let saver = RedisSaver::connect(RedisConfig::new(url).prefix(prefix)).await?;
    if !saver.connection().is_cluster() {
        return Err(waypoint_checkpoint::Error::InvalidConfig(
            "WAYPOINT_TEST_REDIS_CLUSTER_URL names a server that is not a Redis Cluster".into(),
        ));
    }
    Ok(Some(Arc::new(saver)))
}

/// Opens the saver a spec names, so a second process can open the same one: `sqlite:PATH`,
/// `postgres:URL#SCHEMA` or `redis:URL#PREFIX` (the schema must be set up already).
pub async fn open_spec(spec: &str) -> waypoint_checkpoint::Result<Arc<dyn CheckpointSaver>> {
    let bad = || waypoint_checkpoint::Error::InvalidConfig(format!("bad saver spec `{spec}`"));
    let (kind, rest) = spec.split_once(':').ok_or_else(bad)?;
    Ok(match kind {
        "sqlite" => Arc::new(SqliteSaver::from_path(rest).await?),
        "postgres" => {
            let (url, schema) = rest.rsplit_once('#').ok_or_else(bad)?;
            let config = PostgresConfig::new(url).schema(schema).max_connections(4);
            Arc::new(PostgresSaver::connect(config).await?)
        }
        "redis" => {
            let (url, prefix) = rest.rsplit_once('#').ok_or_else(bad)?;
            Arc::new(RedisSaver::connect(RedisConfig::new(url).prefix(prefix)).await?)
        }
        _ => return Err(bad()),
    })
}

/// A spec for [`open_spec`] naming a fresh database of `kind` (`sqlite`, `postgres`,
/// `redis`), set up; `None` when the test server for it is absent.
pub async fn fresh_spec(kind: &str) -> waypoint_checkpoint::Result<Option<String>> {
    Ok(match kind {
        "sqlite" => Some(format!("sqlite:{}", sqlite_path()?.display())),
        "postgres" => match postgres_url() {
            Some(url) => {
                let schema = fresh_name("wp_rt");
                let config = PostgresConfig::new(url.clone()).schema(schema.clone());
                PostgresSaver::connect(config).await?.setup().await?;
                Some(format!("postgres:{url}#{schema}"))
            }
            None => None,
        },
        "redis" => redis_url().map(|url| format!("redis:{url}#{}", fresh_name("wp_rt"))),
        _ => None,
    })
}

/// A new database file's path, in a temp dir left in place so a second process can open it.
fn sqlite_path() -> waypoint_checkpoint::Result<PathBuf> {
    let dir = kept_temp_dir().map_err(|e| waypoint_checkpoint::Error::backend("sqlite", e))?;
    Ok(dir.join("checkpoints.db"))
}
