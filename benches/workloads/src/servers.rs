//! The servers a benchmark may measure and fresh, isolated handles on them: each saver or
//! store gets its own PostgreSQL schema or Redis key prefix, so runs never see each other.

use std::sync::Mutex;

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

/// A PostgreSQL schema or Redis key prefix a fresh handle was opened on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// A schema of the PostgreSQL server at `url`.
    Schema {
        /// The server.
        url: String,
        /// The schema.
        name: String,
    },
    /// A key prefix of the Redis server at `url` (its keys start with `<name>:`).
    Prefix {
        /// The server.
        url: String,
        /// The prefix.
        name: String,
    },
}

/// What this process's fresh handles were opened on, until [`take_created`] hands it out.
static CREATED: Mutex<Vec<Created>> = Mutex::new(Vec::new());

/// The schemas and key prefixes fresh handles were opened on since the last call, for a
/// run to drop at its end.
pub fn take_created() -> Vec<Created> {
    std::mem::take(&mut *CREATED.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A fresh schema name on the PostgreSQL server at `url`, remembered for [`take_created`].
fn fresh_schema(url: &str) -> String {
    let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
    remember(Created::Schema {
        url: url.to_owned(),
        name: name.clone(),
    });
    name
}

/// A fresh key prefix on the Redis server at `url`, remembered for [`take_created`].
fn fresh_prefix(url: &str) -> String {
    let name = format!("bench-{}", uuid::Uuid::new_v4().simple());
    remember(Created::Prefix {
        url: url.to_owned(),
        name: name.clone(),
    });
    name
}

fn remember(created: Created) {
    CREATED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(created);
}

/// A checkpointer on a fresh schema of the PostgreSQL server at `url`, set up.
pub async fn postgres_saver(
    url: &str,
    max_connections: u32,
) -> waypoint_checkpoint::Result<PostgresSaver> {
    let config = PostgresConfig::new(url)
        .schema(fresh_schema(url))
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
        .schema(fresh_schema(url))
        .max_connections(max_connections)
        .langgraph_values(false);
    PostgresSaver::connect(config).await
}

/// A checkpointer on a fresh key prefix of the Redis server at `url`.
pub async fn redis_saver(url: &str) -> waypoint_checkpoint::Result<RedisSaver> {
    RedisSaver::connect(RedisConfig::new(url).prefix(fresh_prefix(url))).await
}

/// A store on a fresh schema of the PostgreSQL server at `url`, set up.
pub async fn postgres_store(
    url: &str,
    config: StoreConfig,
) -> waypoint_store::Result<PostgresStore> {
    let postgres = PostgresConfig::new(url).schema(fresh_schema(url));
    PostgresStore::connect(postgres, config).await
}

/// A store on a fresh key prefix of the Redis server at `url`.
pub async fn redis_store(url: &str, config: StoreConfig) -> waypoint_store::Result<RedisStore> {
    RedisStore::connect(RedisConfig::new(url).prefix(fresh_prefix(url)), config).await
}
