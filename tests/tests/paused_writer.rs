//! One writer per thread holds even against a paused process: a run stopped (SIGSTOP) past
//! its lease while another run goes wakes up to `Conflict` and writes nothing, on every
//! saver that several processes share.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, ListOptions};
use waypoint_runtime::RunConfig;
use waypoint_tests::{TestResult, obj, paused, savers, thread};

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pid}: {status}");
}

async fn paused_writer_writes_nothing(kind: &str) -> TestResult {
    let Some(spec) = savers::fresh_spec(kind).await? else {
        return Ok(());
    };
    let t = thread();
    let mut child = Command::new(env!("CARGO_BIN_EXE_paused_writer"))
        .args([&spec, &t])
        .stdout(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    // The child holds the thread once its node runs; stop it there, past its lease.
    let first = tokio::task::spawn_blocking(move || {
        let line = lines.next();
        (line, lines)
    });
    let (line, mut lines) = tokio::time::timeout(Duration::from_secs(30), first).await??;
    assert_eq!(line.transpose()?.as_deref(), Some(paused::IN_NODE));
    signal(pid, "-STOP");
    let stopped = Instant::now();
    tokio::time::sleep(paused::CHILD_LEASE_TTL * 3).await;

    // Meanwhile another run takes the thread and finishes.
    let saver = savers::open_spec(&spec).await?;
    let graph = paused::graph(saver.clone(), "parent", Duration::ZERO, false)?;
    let config = RunConfig::thread(&t).wait_for_thread(Duration::from_secs(10));
    let out = graph.invoke(Some(obj(json!({"who": ""}))), &config).await?;
    assert_eq!(out.values.get("who"), Some(&json!("parent")));

    // The child wakes up: its next write must be refused.
    signal(pid, "-CONT");
    let outcome = tokio::task::spawn_blocking(move || lines.next()).await?;
    let outcome = outcome.transpose()?.unwrap_or_default();
    assert!(child.wait()?.success());
    assert_eq!(
        outcome, "CONFLICT",
        "the paused child's run ended: {outcome}"
    );
    eprintln!(
        "{kind}: child stopped {:.1} s past a {:?} lease, then refused with Conflict",
        stopped.elapsed().as_secs_f64(),
        paused::CHILD_LEASE_TTL
    );

    // No fork: every checkpoint has at most one child, and nothing of the child is stored.
    let all = saver
        .list(Some(&CheckpointConfig::new(&t)), &ListOptions::default())
        .await?;
    let mut children: BTreeMap<String, usize> = BTreeMap::new();
    for tuple in &all {
        if let Some(parent) = tuple
            .parent_config
            .as_ref()
            .and_then(|p| p.checkpoint_id.clone())
        {
            *children.entry(parent).or_default() += 1;
        }
    }
    assert!(
        children.values().all(|&n| n == 1),
        "history forked: {children:?}"
    );
    let state = graph.get_state(&RunConfig::thread(&t)).await?;
    assert_eq!(state.values.get("log"), Some(&json!(["parent"])));
    // The thread is free again for the next run.
    graph
        .invoke(Some(obj(json!({"who": ""}))), &RunConfig::thread(&t))
        .await?;
    Ok(())
}

#[tokio::test]
async fn paused_writer_writes_nothing_sqlite() -> TestResult {
    paused_writer_writes_nothing("sqlite").await
}

#[tokio::test]
async fn paused_writer_writes_nothing_postgres() -> TestResult {
    paused_writer_writes_nothing("postgres").await
}

#[tokio::test]
async fn paused_writer_writes_nothing_redis() -> TestResult {
    paused_writer_writes_nothing("redis").await
}
