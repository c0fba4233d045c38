//! A run that fails because the server went away mid-run does not lock its own client out:
//! the lease it could not release is released as soon as the server is back, so the next run
//! on the thread starts at once instead of meeting `Conflict` until the lease lapses.
//!
//! Uses the fault servers `scripts/test.sh` starts (stopped and restarted here).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use waypoint_checkpoint::CheckpointSaver;
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};
use waypoint_runtime::RunConfig;
use waypoint_test_kit::{FaultServer, fresh_name, postgres_faults, redis_faults};
use waypoint_tests::{TestResult, obj, paused, thread};

/// Runs a thread whose node outlives the server, restarts the server, and runs the thread
/// again at once.
async fn failed_run_frees_its_thread(
    saver: Arc<dyn CheckpointSaver>,
    server: &FaultServer,
) -> TestResult {
    let t = thread();
    let graph = paused::graph(saver.clone(), "first", Duration::from_millis(1500), false)?;
    let config = RunConfig::thread(&t);
    let run = tokio::spawn({
        let config = config.clone();
        async move { graph.invoke(Some(obj(json!({"who": ""}))), &config).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.ctl("stop");
    let failed = run.await?;
    server.ctl("start");
    assert!(failed.is_err(), "the run outlived its server: {failed:?}");

    // The same client runs the thread again right away: no Conflict from its own old lease.
    let again = paused::graph(saver, "second", Duration::ZERO, false)?;
    // The first call after the restart succeeds: dead connections are replaced, not met.
    let start = Instant::now();
    let out = again.invoke(Some(obj(json!({"who": ""}))), &config).await?;
    assert_eq!(out.values.get("who"), Some(&json!("second")));
    eprintln!("thread usable {:?} after the restart", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(10));
    Ok(())
}

#[tokio::test]
async fn failed_run_frees_its_thread_redis() -> TestResult {
    let Some(server) = redis_faults() else {
        return Ok(());
    };
    let config = RedisConfig::new(server.url())
        .prefix(fresh_name("wp_lease"))
        .timeout(Duration::from_secs(2));
    let saver = Arc::new(RedisSaver::connect(config).await?);
    failed_run_frees_its_thread(saver, &server).await
}

#[tokio::test]
async fn failed_run_frees_its_thread_postgres() -> TestResult {
    let Some(server) = postgres_faults() else {
        return Ok(());
    };
    let config = PostgresConfig::new(server.url())
        .schema(fresh_name("wp_lease"))
        .max_connections(4)
        .timeout(Duration::from_secs(2));
    let saver = PostgresSaver::connect(config).await?;
    saver.setup().await?;
    failed_run_frees_its_thread(Arc::new(saver), &server).await
}
