//! The live server the tests use, named by `scripts/test.sh`.

#![allow(dead_code, unreachable_pub)]

use waypoint_checkpoint::{Keyring, Result, Serde};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};

/// The URL in `var`; `None` (the tests pass without running) unless
/// `WAYPOINT_REQUIRE_BACKENDS=1`, which makes a missing server a failure.
pub fn url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("WAYPOINT_REQUIRE_BACKENDS").as_deref() == Ok("1") => {
            panic!("{var} is not set but WAYPOINT_REQUIRE_BACKENDS=1: run scripts/test.sh")
        }
        _ => {
            eprintln!("skipped: {var} is not set (scripts/test.sh starts a server)");
            None
        }
    }
}

/// A fresh schema name, so cases running at once on one database never see each other.
pub fn fresh_schema() -> String {
    format!("wp_test_{}", uuid::Uuid::new_v4().simple())
}

/// A saver on a fresh schema of the test server, set up; `None` without a server.
pub async fn saver(serde: Serde) -> Result<Option<PostgresSaver>> {
    let Some(url) = url("WAYPOINT_TEST_POSTGRES_URL") else {
        return Ok(None);
    };
    let config = PostgresConfig::new(url)
        .schema(fresh_schema())
        .max_connections(4)
        .serde(serde);
    let saver = PostgresSaver::connect(config).await?;
    saver.setup().await?;
    Ok(Some(saver))
}

/// A serde sealing values with AES-256-GCM.
pub fn keyed() -> Result<Serde> {
    Ok(Serde::default().with_keyring(Keyring::new("k1", &[9u8; 32])?))
}
