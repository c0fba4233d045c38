//! A run that fails because the server went away mid-run does not lock its own client out:
//! the lease it could not release is released as soon as the server is back, so the next run
//! on the thread starts at once instead of meeting `Conflict` until the lease lapses.
//!
//! Uses the fault servers `scripts/test.sh` starts (stopped and restarted here).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use waypoint_checkpoint::CheckpointSaver;
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};
use waypoint_runtime::RunConfig;
use waypoint_tests::{TestResult, obj, paused, thread};

fn fault_server(var: &str) -> Option<(String, String)> {
    let url = std::env::var(format!("{var}_URL"))
        .ok()
        .filter(|u| !u.is_empty());
    let ctl = std::env::var(format!("{var}_CTL"))
        .ok()
        .filter(|c| !c.is_empty());
    match (url, ctl) {
        (Some(url), Some(ctl)) => Some((url, ctl)),
        _ if std::env::var("WAYPOINT_REQUIRE_BACKENDS").as_deref() == Ok("1") => {
            panic!("{var}_URL and _CTL are not set but WAYPOINT_REQUIRE_BACKENDS=1")
        }
        _ => {
            eprintln!("skipped: {var}_URL is not set (scripts/test.sh starts a fault server)");
            None
        }
    }
}

fn ctl(script: &str, action: &str) {
    let status = Command::new(script)
        .arg(action)
        .status()
        .expect("run the control script");
    assert!(status.success(), "{script} {action}: {status}");
}

/// Runs a thread whose node outlives the server, restarts the server, and runs the thread
/// again at once.
async fn failed_run_frees_its_thread(
    saver: Arc<dyn CheckpointSaver>,
    ctl_script: &str,
) -> TestResult {
    let t = thread();
    let graph = paused::graph(saver.clone(), "first", Duration::from_millis(1500), false)?;
    let config = RunConfig::thread(&t);
    let run = tokio::spawn({
        let config = config.clone();
        async move { graph.invoke(Some(obj(json!({"who": ""}))), &config).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    ctl(ctl_script, "stop");
    let failed = run.await?;
    ctl(ctl_script, "start");
    assert!(failed.is_err(), "the run outlived its server: {failed:?}");

    // The same client runs the thread again right away: no Conflict from its own old lease.
    let again = paused::graph(saver, "second", Duration::ZERO, false)?;
    let start = Instant::now();
    let mut outcome = again.invoke(Some(obj(json!({"who": ""}))), &config).await;
    // The first call after a restart may still meet a connection the restart broke.
    while outcome
        .as_ref()
        .is_err_and(|e| !e.to_string().contains("conflict"))
        && start.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
        outcome = again.invoke(Some(obj(json!({"who": ""}))), &config).await;
    }
    let out = outcome?;
    assert_eq!(out.values.get("who"), Some(&json!("second")));
    eprintln!("thread usable {:?} after the restart", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(10));
    Ok(())
}

#[tokio::test]
async fn failed_run_frees_its_thread_redis() -> TestResult {
    let Some((url, script)) = fault_server("WAYPOINT_TEST_REDIS_FAULTS") else {
        return Ok(());
    };
    let prefix = format!("wp-lease-{}", uuid::Uuid::new_v4().simple());
    let config = RedisConfig::new(url)
        .prefix(prefix)
        .timeout(Duration::from_secs(2));
    let saver = Arc::new(RedisSaver::connect(config).await?);
    failed_run_frees_its_thread(saver, &script).await
}

#[tokio::test]
async fn failed_run_frees_its_thread_postgres() -> TestResult {
    let Some((url, script)) = fault_server("WAYPOINT_TEST_POSTGRES_FAULTS") else {
        return Ok(());
    };
    let schema = format!("wp_lease_{}", uuid::Uuid::new_v4().simple());
    let config = PostgresConfig::new(url)
        .schema(schema)
        .max_connections(4)
        .timeout(Duration::from_secs(2));
    let saver = PostgresSaver::connect(config).await?;
    saver.setup().await?;
    failed_run_frees_its_thread(Arc::new(saver), &script).await
}
