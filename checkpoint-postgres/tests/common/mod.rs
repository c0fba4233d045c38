//! This crate's test helpers, on the test kit's servers: savers and stores on fresh schemas,
//! fresh databases for the Python interop fixtures, and running those fixtures.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use waypoint_checkpoint::{Keyring, Result, Serde};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};

/// A fresh schema name, so cases running at once on one database never see each other.
pub fn fresh_schema() -> String {
    waypoint_test_kit::fresh_name("wp_test")
}

/// A saver on a fresh schema of the test server, set up; `None` without a server.
pub async fn saver(serde: Serde) -> Result<Option<PostgresSaver>> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(None);
    };
    let config = PostgresConfig::new(url)
        .schema(fresh_schema())
        .max_connections(4)
        .serde(serde);
    Ok(Some(PostgresSaver::connect(config).await?))
}

/// Whether the server has a schema named `schema`.
pub async fn schema_exists(pool: &sqlx::PgPool, schema: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(pool)
        .await
        .expect("the catalog")
}

/// A serde sealing values with AES-256-GCM.
pub fn keyed() -> Result<Serde> {
    Ok(Serde::default().with_keyring(Keyring::new("k1", &[9u8; 32])?))
}

/// A fresh database on the test server (Python's LangGraph uses its default schema), named
/// after `prefix`, and the LangGraph venv's interpreter; `None` without a server or Python.
pub async fn fresh_database(prefix: &str) -> Option<(String, PathBuf)> {
    let url = waypoint_test_kit::postgres_url()?;
    let python = waypoint_test_kit::python()?;
    let name = waypoint_test_kit::fresh_name(prefix);
    let admin = PostgresSaver::connect(PostgresConfig::new(&url).auto_setup(false))
        .await
        .expect("server");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(admin.pool())
        .await
        .expect("create database");
    Some((waypoint_test_kit::database_url(&url, &name), python))
}

/// Runs the Python fixture `script` (in `tests/interop`) with `args` and a path to write its
/// JSON answer to (its last argument), and returns that answer.
pub fn run_python(python: &Path, script: &str, args: &[&str]) -> Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    let out = std::env::temp_dir().join(format!("{}.json", waypoint_test_kit::fresh_name(script)));
    let output = Command::new(python)
        .arg(dir.join(script))
        .args(args)
        .arg(&out)
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let answer = serde_json::from_slice(&std::fs::read(&out).expect("output")).expect("JSON");
    let _ = std::fs::remove_file(out);
    answer
}
