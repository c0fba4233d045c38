//! Checkpointer operations on every backend: sequential puts, puts from 16 concurrent
//! writers on distinct threads, `get_tuple` of the latest checkpoint, and `list` of a whole
//! thread; the checkpoints are `waypoint_workloads::checkpoints` (five channels, one changing
//! per step).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use indicatif::ProgressBar;
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, ListOptions, SerializedValue};
use waypoint_workloads::checkpoints::{self, CHANNELS};

use serde_json::json;

use super::measure::{Table, latencies, per_second};
use super::peers::{Peers, record};
use super::targets::{Target, Targets};
use super::{Scale, settle};

/// Concurrent writers in the concurrent put workload.
pub(crate) const WRITERS: usize = 16;

/// The sequential put's workload (its limit's row has the same name).
pub(crate) const SEQUENTIAL: &str = "put (sequential)";

/// Steps this group reports to its progress bar.
pub(crate) fn steps(targets: &Targets) -> u64 {
    4 * targets.list.len() as u64
}

/// Measures every backend (and LangGraph's savers, alternating, when `peers` runs).
pub(crate) async fn run(
    targets: &Targets,
    scale: &Scale,
    bar: &ProgressBar,
    peers: &mut Peers,
) -> Result<Table> {
    let mut table = Table::new(
        "checkpoint",
        "backend",
        format!(
            "Checkpoints of {} channels (~{} KB each, one changes per step). Puts: {} per sample \
             (one thread, or {WRITERS} writers on distinct threads), median of {} samples. \
             `get_tuple` latest: {} calls on a {}-checkpoint thread. `list`: that whole thread, \
             {} samples.",
            CHANNELS.len(),
            checkpoints::channel_value().bytes.len() / 1000,
            scale.puts,
            scale.samples,
            scale.latency_samples,
            scale.history,
            scale.samples
        ),
    );
    let value = checkpoints::channel_value();
    for target in &targets.list {
        let done = backend(targets, target, scale, &value, bar, &mut table, peers).await;
        settle(&mut table, target, done)?;
    }
    Ok(table)
}

/// All workloads on one backend.
async fn backend(
    targets: &Targets,
    target: &Target,
    scale: &Scale,
    value: &SerializedValue,
    bar: &ProgressBar,
    table: &mut Table,
    peers: &mut Peers,
) -> Result<()> {
    let name = target.name();
    let saver = targets.saver(target, WRITERS as u32).await?;

    bar.set_message(format!("checkpoint · {name} · put"));
    let args = json!({"puts": scale.puts});
    let (puts, theirs) = peers
        .pair(scale.samples, "checkpoint.put", name, args, async || {
            let rate = sequential_puts(&*saver, &fresh_thread(), scale.puts, value).await?;
            Ok(vec![rate])
        })
        .await
        .context("sequential puts failed")?;
    record(table, SEQUENTIAL, name, puts, theirs, |t, w, c, s| {
        t.rate(w, "puts/s", c, s)
    });
    bar.inc(1);

    bar.set_message(format!("checkpoint · {name} · put, {WRITERS} writers"));
    let per_writer = scale.puts.div_ceil(WRITERS);
    let args = json!({"writers": WRITERS, "per_writer": per_writer});
    let (concurrent, theirs) = peers
        .pair(scale.samples, "checkpoint.put16", name, args, async || {
            let work: Vec<_> = (0..WRITERS)
                .map(|_| (fresh_thread(), checkpoints::history(per_writer, value)))
                .collect();
            let start = Instant::now();
            let writers: Vec<_> = work
                .into_iter()
                .map(|(thread, items)| {
                    let saver = Arc::clone(&saver);
                    tokio::spawn(async move { checkpoints::put_all(&*saver, &thread, items).await })
                })
                .collect();
            for writer in writers {
                writer.await.context("a writer task stopped")??;
            }
            Ok(vec![per_second(per_writer * WRITERS, start.elapsed())])
        })
        .await
        .context("concurrent puts failed")?;
    let workload = format!("put ({WRITERS} writers)");
    record(table, &workload, name, concurrent, theirs, |t, w, c, s| {
        t.rate(w, "puts/s", c, s)
    });
    bar.inc(1);

    bar.set_message(format!("checkpoint · {name} · get_tuple latest"));
    let thread = fresh_thread();
    checkpoints::put_all(&*saver, &thread, checkpoints::history(scale.history, value))
        .await
        .context("cannot write the history thread")?;
    let latest = CheckpointConfig::new(thread.as_str()).with_ns("");
    let calls = scale.latency_samples.div_ceil(scale.samples);
    let args = json!({"history": scale.history, "calls": calls});
    let (gets, theirs) = peers
        .pair(
            scale.samples,
            "checkpoint.get_tuple",
            name,
            args,
            async || {
                latencies(0, calls, async |_| {
                    let found = saver.get_tuple(&latest).await?;
                    ensure!(found.is_some(), "the latest checkpoint is missing");
                    Ok(())
                })
                .await
            },
        )
        .await
        .context("get_tuple failed")?;
    for (workload, p) in [
        ("get_tuple latest p50", 0.5),
        ("get_tuple latest p99", 0.99),
    ] {
        record(
            table,
            workload,
            name,
            gets.clone(),
            theirs.clone(),
            |t, w, c, s| t.latency(w, c, p, s),
        );
    }
    bar.inc(1);

    bar.set_message(format!("checkpoint · {name} · list"));
    let config = CheckpointConfig::new(thread.as_str());
    let args = json!({"history": scale.history});
    let (lists, theirs) = peers
        .pair(scale.samples, "checkpoint.list", name, args, async || {
            latencies(0, 1, async |_| {
                let all = saver.list(Some(&config), &ListOptions::default()).await?;
                ensure!(
                    all.len() == scale.history,
                    "list returned {} checkpoints, not {}",
                    all.len(),
                    scale.history
                );
                Ok(())
            })
            .await
        })
        .await
        .context("list failed")?;
    let workload = format!("list {} checkpoints", scale.history);
    record(table, &workload, name, lists, theirs, |t, w, c, s| {
        t.latency(w, c, 0.5, s)
    });
    bar.inc(1);
    Ok(())
}

/// Puts/s of `puts` sequential puts of the workload's checkpoints into the new thread
/// `thread` of `saver`.
pub(crate) async fn sequential_puts(
    saver: &dyn CheckpointSaver,
    thread: &str,
    puts: usize,
    value: &SerializedValue,
) -> Result<f64> {
    let items = checkpoints::history(puts, value);
    let start = Instant::now();
    checkpoints::put_all(saver, thread, items).await?;
    Ok(per_second(puts, start.elapsed()))
}

/// A thread id no other run uses.
pub(crate) fn fresh_thread() -> String {
    format!("bench-{}", uuid::Uuid::new_v4())
}
