//! A hung server (every PostgreSQL process stopped with SIGSTOP, sockets open) for longer than
//! the operation deadline, mid-run: nothing acknowledged is lost, no session is left inside a
//! transaction, and a thread whose run held a lease is usable as soon as the server is back.
//!
//! The cases share the fault server, so they take turns.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, Lease, Result, Save, Serde,
};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
use waypoint_test_kit::FaultServer;

/// The operation deadline of the savers under test.
const DEADLINE: Duration = Duration::from_secs(1);
/// How long the server hangs: well past the deadline.
const STALL: Duration = Duration::from_millis(2500);
/// Concurrent writers: several connections are in flight when the server hangs.
const WRITERS: usize = 4;

/// One case at a time on the fault server.
static FAULT_SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Hangs the server for `STALL`, from a blocking thread; returns when it answers again.
async fn stall_server(faults: &FaultServer) {
    let faults = faults.clone();
    tokio::task::spawn_blocking(move || {
        faults.ctl("pause");
        std::thread::sleep(STALL);
        faults.ctl("resume");
    })
    .await
    .expect("stall");
}

/// A saver on `schema` of the fault server with the short deadline, and idle connections
/// for calls made while the server hangs to start on (and be cut off on).
async fn saver(url: &str, schema: &str) -> Result<PostgresSaver> {
    let mut config = PostgresConfig::new(url)
        .schema(schema)
        .max_connections(16)
        .timeout(DEADLINE);
    config.min_connections = 12;
    PostgresSaver::connect(config).await
}

/// A one-channel checkpoint holding `value`, first of its namespace.
fn save(thread: &str, ns: &str, value: &Value) -> Result<(Save, CheckpointConfig)> {
    let mut cp = Checkpoint::new(0);
    let version = ChannelVersion::next(None)?;
    cp.channel_values
        .insert("x".into(), Serde::default().dumps(value)?);
    cp.channel_versions.insert("x".into(), version.clone());
    let stored = CheckpointConfig::of(thread, ns, &cp.id);
    let save = Save::Put {
        config: CheckpointConfig::new(thread).with_ns(ns),
        checkpoint: cp,
        metadata: CheckpointMetadata::new(CheckpointSource::Loop, 0),
        new_versions: BTreeMap::from([("x".to_owned(), version)]),
    };
    Ok((save, stored))
}

/// A pending write of `value` to the checkpoint `config`.
fn write(config: &CheckpointConfig, value: &Value) -> Result<Save> {
    Ok(Save::Writes {
        config: config.clone(),
        writes: vec![("x".into(), Serde::default().dumps(value)?)],
        task_id: "task".into(),
        task_path: String::new(),
    })
}

/// What a call acknowledged: the checkpoint, its value, and the pending write it carried.
struct Acked {
    config: CheckpointConfig,
    value: Value,
    write: Option<Value>,
}

/// How many acknowledged checkpoints a fresh saver does not find as acknowledged.
async fn lost(fresh: &PostgresSaver, acked: &[Acked]) -> Result<usize> {
    let serde = Serde::default();
    let mut lost = 0;
    for a in acked {
        let Some(tuple) = fresh.get_tuple(&a.config).await? else {
            lost += 1;
            continue;
        };
        let value: Value = serde.loads(&tuple.checkpoint.channel_values["x"])?;
        let writes: Vec<Value> = tuple
            .pending_writes
            .iter()
            .map(|w| serde.loads(&w.value))
            .collect::<Result<_>>()?;
        if value != a.value || writes != a.write.iter().cloned().collect::<Vec<_>>() {
            lost += 1;
        }
    }
    Ok(lost)
}

/// Sessions of the fault server idle inside a transaction.
async fn idle_in_transaction(saver: &PostgresSaver) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'",
    )
    .fetch_one(saver.pool())
    .await
    .expect("count")
}

/// Writers putting and batch-saving (a checkpoint and a pending write in one transaction) on
/// fresh threads while the server hangs past the deadline: every call fails within the
/// deadline or is acknowledged, the loop goes on once the server is back, and a fresh saver
/// finds every acknowledged checkpoint with its value and write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_past_the_deadline_loses_no_acknowledged_write() -> Result<()> {
    let Some(faults) = waypoint_test_kit::postgres_faults() else {
        return Ok(());
    };
    let url = faults.url();
    let _turn = FAULT_SERVER.lock().await;
    let schema = common::fresh_schema();
    let saver = saver(url, &schema).await?;
    saver.setup().await?;
    let timeout: String = sqlx::query_scalar("SHOW idle_in_transaction_session_timeout")
        .fetch_one(saver.pool())
        .await
        .expect("setting");
    assert_eq!(timeout, "3s", "three times the deadline by default");

    let stop = Arc::new(AtomicBool::new(false));
    let resumed = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (saver, stop, resumed) = (saver.clone(), stop.clone(), resumed.clone());
        writers.push(tokio::spawn(async move {
            let (mut acked, mut failed, mut after) = (Vec::new(), 0, 0);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let thread = format!("w{w}-{i}");
                let value = json!({"writer": w, "i": i});
                let (put, config) = save(&thread, "", &value)?;
                // Once the server is back, single-statement puts: on a session left inside a
                // transaction they would be acknowledged and never committed.
                let batched = i % 2 == 0 && !resumed.load(Ordering::Relaxed);
                let started = Instant::now();
                let done = if batched {
                    let pending = json!(format!("write {w}-{i}"));
                    let saves = vec![put, write(&config, &pending)?];
                    saver.save_batch(saves).await.map(|()| Some(pending))
                } else {
                    match put {
                        Save::Put {
                            config,
                            checkpoint,
                            metadata,
                            new_versions,
                        } => saver
                            .put(&config, checkpoint, metadata, new_versions)
                            .await
                            .map(|_| None),
                        Save::Writes { .. } => unreachable!("a put"),
                    }
                };
                match done {
                    Ok(write) => {
                        after += usize::from(resumed.load(Ordering::Relaxed));
                        acked.push(Acked {
                            config,
                            value,
                            write,
                        });
                    }
                    Err(e) => {
                        assert!(matches!(e, Error::Backend { .. }), "{e:?}");
                        let took = started.elapsed();
                        assert!(took < DEADLINE * 2, "a failed call took {took:?}");
                        failed += 1;
                    }
                }
            }
            Ok::<_, Error>((acked, failed, after))
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    stall_server(&faults).await;
    resumed.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut acked, mut failed, mut after) = (Vec::new(), 0, 0);
    for writer in writers {
        let (a, f, r) = writer.await.expect("writer")?;
        acked.extend(a);
        failed += f;
        after += r;
    }
    let idle = idle_in_transaction(&saver).await;
    // Acknowledged means committed: another saver sees it now, and after this one is gone.
    let fresh = self::saver(url, &schema).await?;
    let lost_now = lost(&fresh, &acked).await?;
    saver.pool().close().await;
    let lost = lost_now.max(lost(&fresh, &acked).await?);
    eprintln!(
        "stall past the deadline: {} writes acknowledged and checked, {lost} lost, {failed} failed during the stall, {after} after it",
        acked.len()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert_eq!(idle, 0, "sessions left idle in a transaction");
    assert!(failed > 0, "no call failed while the server hung");
    assert!(after > 0, "no write succeeded once the server was back");
    Ok(())
}

/// A run holding a thread's lease, writing fenced saves and renewing, when the server hangs
/// past the deadline: once it is back the lease is released and the thread taken and written
/// at once, by a new run, and every save the old run had acknowledged is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_mid_run_leaves_the_thread_usable_at_once() -> Result<()> {
    let Some(faults) = waypoint_test_kit::postgres_faults() else {
        return Ok(());
    };
    let url = faults.url();
    let _turn = FAULT_SERVER.lock().await;
    let schema = common::fresh_schema();
    let saver = saver(url, &schema).await?;
    saver.setup().await?;
    let thread = "leased";
    let lease = saver.acquire_lease(thread, Duration::from_secs(60)).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let mut runs = Vec::new();
    for w in 0..WRITERS {
        let (saver, stop, lease) = (saver.clone(), stop.clone(), lease.clone());
        runs.push(tokio::spawn(async move {
            let (mut acked, mut i) = (Vec::new(), 0);
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                // Each step its own namespace: a put whose reply was lost is never a parent.
                let value = json!({"run": w, "i": i});
                let (put, config) = save(thread, &format!("w{w}-{i}"), &value)?;
                let pending = json!(i);
                let saves = vec![put, write(&config, &pending)?];
                if saver.save_fenced(&lease, saves).await.is_ok() {
                    acked.push(Acked {
                        config,
                        value,
                        write: Some(pending),
                    });
                }
                let _ = saver.renew_lease(&lease, Duration::from_secs(60)).await;
            }
            Ok::<_, Error>(acked)
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    stall_server(&faults).await;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    for run in runs {
        acked.extend(run.await.expect("run")?);
    }

    // The failed run gives the thread up; the next run takes it and writes, at once.
    let back = Instant::now();
    saver.release_lease(&lease).await?;
    let next: Lease = saver.acquire_lease(thread, Duration::from_secs(60)).await?;
    let (put, config) = save(thread, "next", &json!("next run"))?;
    saver.save_fenced(&next, vec![put]).await?;
    let refused = saver
        .save_fenced(&lease, vec![save(thread, "old", &json!("old"))?.0])
        .await;
    assert!(matches!(refused, Err(Error::Conflict(_))), "{refused:?}");
    let took = back.elapsed();
    assert!(took < DEADLINE, "the thread took {took:?} to become usable");
    assert!(saver.get_tuple(&config).await?.is_some());
    assert_eq!(
        idle_in_transaction(&saver).await,
        0,
        "a session idles in a transaction"
    );

    let fresh = self::saver(url, &schema).await?;
    let lost_now = lost(&fresh, &acked).await?;
    saver.pool().close().await;
    let lost = lost_now.max(lost(&fresh, &acked).await?);
    eprintln!(
        "stall mid-run with a lease: {} fenced saves acknowledged and checked, {lost} lost; thread usable {took:?} after the server came back",
        acked.len()
    );
    assert!(!acked.is_empty(), "the run wrote nothing before the stall");
    assert_eq!(lost, 0, "acknowledged fenced saves lost");
    Ok(())
}
