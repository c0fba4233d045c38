//! `update_state` forks on every checkpointer: a thread of the runtime workload's graph
//! (`waypoint_workloads::runtime`, 300 checkpoints at full size) forked from its middle and
//! from near its head (right after `n4` ran, in the middle and in the last invocation); on
//! PostgreSQL both in the LangGraph-compatible default encoding and in Waypoint's own.

use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use indicatif::ProgressBar;
use serde_json::json;
use waypoint_checkpoint::{CheckpointSaver, ListOptions};
use waypoint_runtime::RunConfig;
use waypoint_workloads::runtime::{self, FORK_AS_NODE};
use waypoint_workloads::servers;

use super::measure::{Table, latencies};
use super::peers::{Peers, record};
use super::runtime::{CHECKPOINTS_PER_INVOCATION, variants};
use super::targets::{Target, Targets};
use super::{Scale, settle};

/// The column of PostgreSQL in Waypoint's own encoding.
const POSTGRES_NATIVE: &str = "postgres (native)";

/// Where the forks start: `(workload row, the peer's name for it, which "n5" checkpoint)`.
const POINTS: [(&str, &str); 2] = [("from the middle", "middle"), ("near the head", "head")];

/// Steps this group reports to its progress bar.
pub(crate) fn steps(targets: &Targets) -> u64 {
    let native = targets
        .list
        .iter()
        .any(|t| matches!(t, Target::Postgres(_))) as u64;
    2 * (targets.list.len() as u64 + native)
}

/// Measures every checkpointer (and LangGraph's, alternating, when `peers` runs).
pub(crate) async fn run(
    targets: &Targets,
    scale: &Scale,
    bar: &ProgressBar,
    peers: &mut Peers,
) -> Result<Table> {
    let checkpoints = scale.fork_invocations * CHECKPOINTS_PER_INVOCATION;
    let mut table = Table::new(
        "fork",
        "saver",
        format!(
            "`update_state(config, one message, as_node=\"{FORK_AS_NODE}\")` on a \
             {checkpoints}-checkpoint thread of the runtime graph ({} invocations), from the \
             checkpoint right after `n4` of the middle invocation and of the last one. {} \
             forks per sample, median of {} samples. `postgres (native)`: Waypoint's own \
             encoding (appending channels stored as deltas) instead of the LangGraph-compatible \
             default.",
            scale.fork_invocations, scale.forks, scale.samples
        ),
    );
    for target in &targets.list {
        let saver = async { targets.saver(target, 4).await };
        let done = backend(target.name(), saver, scale, bar, &mut table, peers).await;
        settle(&mut table, target, done)?;
        if let Target::Postgres(url) = target {
            let saver = async {
                let saver = servers::postgres_native_saver(url, 4)
                    .await
                    .context("cannot open a native postgres checkpointer")?;
                Ok(Arc::new(saver) as Arc<dyn CheckpointSaver>)
            };
            let done = backend(POSTGRES_NATIVE, saver, scale, bar, &mut table, peers).await;
            settle(&mut table, target, done)?;
        }
    }
    Ok(table)
}

/// Both fork points on the checkpointer `saver` opens, in `column`.
async fn backend(
    column: &str,
    saver: impl Future<Output = Result<Arc<dyn CheckpointSaver>>>,
    scale: &Scale,
    bar: &ProgressBar,
    table: &mut Table,
    peers: &mut Peers,
) -> Result<()> {
    let graph = runtime::graph(saver.await?).context("cannot compile the graph")?;
    let config = RunConfig::thread(uuid::Uuid::new_v4().to_string());
    for _ in 0..scale.fork_invocations {
        graph
            .invoke(Some(runtime::input()), &config)
            .await
            .context("cannot write the thread")?;
    }
    // Newest first; each invocation has one checkpoint whose next node is n5.
    let after_n4: Vec<RunConfig> = graph
        .get_state_history(&config, &ListOptions::default())
        .await?
        .into_iter()
        .filter(|s| s.next == ["n5"])
        .map(|s| s.config)
        .collect();
    ensure!(
        after_n4.len() == scale.fork_invocations,
        "{} checkpoints before n5, not {}",
        after_n4.len(),
        scale.fork_invocations
    );
    // LangGraph's PostgreSQL saver has one encoding: the native column is compared with it.
    let peer_backend = if column == POSTGRES_NATIVE {
        "postgres"
    } else {
        column
    };
    for (workload, at) in POINTS {
        bar.set_message(format!("fork · {column} · {workload}"));
        let from = match at {
            "middle" => &after_n4[scale.fork_invocations / 2],
            _ => &after_n4[0],
        };
        let args = variants(json!({
            "invocations": scale.fork_invocations,
            "at": at,
            "calls": scale.forks,
        }));
        let mut last = None;
        let (forks, theirs) = peers
            .pairs(scale.samples, "fork", peer_backend, &args, async || {
                latencies(0, scale.forks, async |_| {
                    let forked = graph
                        .update_state(from, Some(runtime::fork_update()), Some(FORK_AS_NODE))
                        .await?;
                    last = Some(forked);
                    Ok(())
                })
                .await
            })
            .await
            .with_context(|| format!("the fork {workload} failed"))?;
        // The last fork is a child of the fork point holding its messages and the update.
        let base = graph.get_state(from).await?;
        let forked = graph
            .get_state(&last.context("no fork ran")?)
            .await
            .context("cannot read the fork")?;
        let parent = forked.parent_config.and_then(|c| c.checkpoint_id);
        ensure!(
            parent == from.checkpoint_id,
            "the fork's parent is {parent:?}"
        );
        let mut want = base.values.messages;
        want.extend(runtime::fork_update().messages.unwrap_or_default());
        ensure!(
            forked.values.messages == want,
            "the fork holds other messages"
        );
        ensure!(
            forked.next == ["n5"],
            "the fork resumes at {:?}",
            forked.next
        );
        record(table, workload, column, forks, theirs, |t, w, c, s| {
            t.latency(w, c, 0.5, s)
        });
        bar.inc(1);
    }
    Ok(())
}
