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

use super::measure::{Table, latencies, rates};
use super::targets::{Target, Targets};
use super::{Scale, settle};

/// Concurrent writers in the concurrent put workload.
const WRITERS: usize = 16;

/// Steps this group reports to its progress bar.
pub(crate) fn steps(targets: &Targets) -> u64 {
    4 * targets.list.len() as u64
}

/// Measures every backend.
pub(crate) async fn run(targets: &Targets, scale: &Scale, bar: &ProgressBar) -> Result<Table> {
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
        let done = backend(targets, target, scale, &value, bar, &mut table).await;
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
) -> Result<()> {
    let name = target.name();
    let saver = targets.saver(target, WRITERS as u32).await?;

    bar.set_message(format!("checkpoint · {name} · put"));
    let puts = rates(1, scale.samples, scale.puts, async || {
        let items = checkpoints::history(scale.puts, value);
        let thread = fresh_thread();
        let start = Instant::now();
        checkpoints::put_all(&*saver, &thread, items).await?;
        Ok(start.elapsed())
    })
    .await
    .context("sequential puts failed")?;
    table.rate("put (sequential)", "puts/s", name, puts);
    bar.inc(1);

    bar.set_message(format!("checkpoint · {name} · put, {WRITERS} writers"));
    let per_writer = scale.puts.div_ceil(WRITERS);
    let concurrent = rates(1, scale.samples, per_writer * WRITERS, async || {
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
        Ok(start.elapsed())
    })
    .await
    .context("concurrent puts failed")?;
    table.rate(
        &format!("put ({WRITERS} writers)"),
        "puts/s",
        name,
        concurrent,
    );
    bar.inc(1);

    bar.set_message(format!("checkpoint · {name} · get_tuple latest"));
    let thread = fresh_thread();
    checkpoints::put_all(&*saver, &thread, checkpoints::history(scale.history, value))
        .await
        .context("cannot write the history thread")?;
    let latest = CheckpointConfig::new(thread.as_str()).with_ns("");
    let gets = latencies(
        scale.latency_samples / 10,
        scale.latency_samples,
        async |_| {
            let found = saver.get_tuple(&latest).await?;
            ensure!(found.is_some(), "the latest checkpoint is missing");
            Ok(())
        },
    )
    .await
    .context("get_tuple failed")?;
    table.latency("get_tuple latest p50", name, 0.5, gets.clone());
    table.latency("get_tuple latest p99", name, 0.99, gets);
    bar.inc(1);

    bar.set_message(format!("checkpoint · {name} · list"));
    let config = CheckpointConfig::new(thread.as_str());
    let lists = latencies(1, scale.samples, async |_| {
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
    .context("list failed")?;
    table.latency(
        &format!("list {} checkpoints", scale.history),
        name,
        0.5,
        lists,
    );
    bar.inc(1);
    Ok(())
}

/// A thread id no other run uses.
fn fresh_thread() -> String {
    format!("bench-{}", uuid::Uuid::new_v4())
}
