//! What the tests of this crate share beyond `waypoint_test_kit` (which finds the servers
//! `scripts/test.sh` starts): savers and configs on the shared Redis, and looks at its keys.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use redis::aio::ConnectionLike;
use waypoint_checkpoint::{Keyring, Result, Serde};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};

/// A fresh key prefix, so cases running at once on one server never see each other.
pub fn fresh_prefix() -> String {
    waypoint_test_kit::fresh_name("wp-test")
}

/// Default settings on a fresh prefix of the test server; `None` without a server.
pub fn config() -> Option<RedisConfig> {
    Some(RedisConfig::new(waypoint_test_kit::redis_url()?).prefix(fresh_prefix()))
}

/// A saver on a fresh prefix of the test server; `None` without a server.
pub async fn saver(serde: Serde) -> Result<Option<RedisSaver>> {
    let Some(config) = config() else {
        return Ok(None);
    };
    Ok(Some(RedisSaver::connect(config.serde(serde)).await?))
}

/// A serde sealing values with AES-256-GCM.
pub fn keyed() -> Result<Serde> {
    Ok(Serde::default().with_keyring(Keyring::new("k1", &[9u8; 32])?))
}

/// Every key of the server matching `pattern`, by SCAN over the whole keyspace.
pub async fn scan(conn: &mut impl ConnectionLike, pattern: &str) -> Vec<String> {
    let mut cursor: u64 = 0;
    let mut keys = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .expect("scan");
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    keys.sort();
    keys
}

/// How many global-index entries the saver under `prefix` holds, over every shard (the
/// keys `P:index:{tag}`, found by SCAN).
pub async fn global_entries(conn: &mut impl ConnectionLike, prefix: &str) -> i64 {
    let mut n = 0;
    for key in scan(conn, &format!("{prefix}:index:{{*")).await {
        let count: i64 = redis::cmd("ZCARD")
            .arg(&key)
            .query_async(conn)
            .await
            .expect("zcard");
        n += count;
    }
    n
}

/// The remaining time to live of `key` in ms (-1: none, -2: no such key).
pub async fn pttl(conn: &mut impl ConnectionLike, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("pttl")
}

/// Sleeps a little longer than `d`.
pub async fn past(d: Duration) {
    tokio::time::sleep(d + Duration::from_millis(150)).await;
}
