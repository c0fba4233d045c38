//! The servers a benchmark may measure and fresh, isolated handles on them: each saver or
//! store gets its own PostgreSQL schema or Redis key prefix, so runs never see each other.

use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver, PostgresStore};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver, RedisStore};
use waypoint_store::StoreConfig;

/// The URL `WAYPOINT_BENCH_<NAME>_URL`, or else `WAYPOINT_TEST_<NAME>_URL`, names
/// (`name` is `POSTGRES` or `REDIS`); unset and empty mean none.
pub fn url(name: &str) -> Option<String> {
    ["BENCH", "TEST"].iter().find_map(|kind| {
        std::env::var(format!("WAYPOINT_{kind}_{name}_URL"))
            .ok()
            .filter(|u| !u.is_empty())
    })
}

fn fresh(prefix: &str, separator: char) -> String {
    format!("{prefix}{separator}{}", uuid::Uuid::new_v4().simple())
}

/// A checkpointer on a fresh schema of the PostgreSQL server at `url`, set up.
pub async fn postgres_saver(
    url: &str,
    max_connections: u32,
) -> waypoint_checkpoint::Result<PostgresSaver> {
    let config = PostgresConfig::new(url)
        .schema(fresh("bench", '_'))
        .max_connections(max_connections);
    PostgresSaver::connect(config).await
}

/// A checkpointer on a fresh schema in Waypoint's own value encoding (positional values,
/// appending channels as deltas: `langgraph_values(false)`), set up.
pub async fn postgres_native_saver(
    url: &str,
    max_connections: u32,
) -> waypoint_checkpoint::Result<PostgresSaver> {
    let config = PostgresConfig::new(url)
        .schema(fresh("bench", '_'))
        .max_connections(max_connections)
        .langgraph_values(false);
    PostgresSaver::connect(config).await
}

/// A checkpointer on a fresh key prefix of the Redis server at `url`.
pub async fn redis_saver(url: &str) -> waypoint_checkpoint::Result<RedisSaver> {
    RedisSaver::connect(RedisConfig::new(url).prefix(fresh("bench", '-'))).await
}

/// A store on a fresh schema of the PostgreSQL server at `url`, set up.
pub async fn postgres_store(
    url: &str,
    config: StoreConfig,
) -> waypoint_store::Result<PostgresStore> {
    let postgres = PostgresConfig::new(url).schema(fresh("bench", '_'));
    PostgresStore::connect(postgres, config).await
}

/// A store on a fresh key prefix of the Redis server at `url`.
pub async fn redis_store(url: &str, config: StoreConfig) -> waypoint_store::Result<RedisStore> {
    RedisStore::connect(RedisConfig::new(url).prefix(fresh("bench", '-')), config).await
}
