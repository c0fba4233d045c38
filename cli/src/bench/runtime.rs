//! The graph runtime on every checkpointer: super-steps per second of the 10-node linear
//! graph of `waypoint_workloads::runtime` (each invocation on a new thread, durability
//! `Async`), and `get_state_history` of a thread of 12 checkpoints per invocation.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use indicatif::ProgressBar;
use serde_json::{Value, json};
use waypoint_checkpoint::ListOptions;
use waypoint_runtime::{Durability, RunConfig};
use waypoint_workloads::runtime::{self, NODES, STEPS_PER_INVOCATION};

use super::measure::{Table, latencies, per_second};
use super::peers::{LANGGRAPH, LANGGRAPH_MESSAGES, Peers, record};
use super::targets::{Target, Targets};
use super::{Scale, settle};

/// Checkpoints one invocation leaves: the input, the start step and one per node.
pub(crate) const CHECKPOINTS_PER_INVOCATION: usize = STEPS_PER_INVOCATION + 1;

/// LangGraph's two runs of a runtime workload: plain-dict messages (`operator.add`) and
/// LangChain message objects (`add_messages`), each with `args` and its `messages` flag.
pub(crate) fn variants(args: Value) -> [(&'static str, Value); 2] {
    let with = |messages: bool| {
        let mut args = args.clone();
        if let Some(map) = args.as_object_mut() {
            map.insert("messages".into(), Value::Bool(messages));
        }
        args
    };
    [(LANGGRAPH, with(false)), (LANGGRAPH_MESSAGES, with(true))]
}

/// Steps this group reports to its progress bar.
pub(crate) fn steps(targets: &Targets) -> u64 {
    2 * targets.list.len() as u64
}

/// Measures every checkpointer (and LangGraph's graph on its savers, alternating, when
/// `peers` runs).
pub(crate) async fn run(
    targets: &Targets,
    scale: &Scale,
    bar: &ProgressBar,
    peers: &mut Peers,
) -> Result<Table> {
    let mut table = Table::new(
        "runtime",
        "saver",
        format!(
            "A {NODES}-node linear graph, each node appending one message; durability `async`. \
             Super-steps/s of {} invocations on distinct threads ({STEPS_PER_INVOCATION} steps \
             each), median of {} samples. `get_state_history` of a {}-checkpoint thread, {} \
             samples.",
            scale.invocations,
            scale.samples,
            scale.history_invocations * CHECKPOINTS_PER_INVOCATION,
            scale.samples
        ),
    );
    for target in &targets.list {
        let done = backend(targets, target, scale, bar, &mut table, peers).await;
        settle(&mut table, target, done)?;
    }
    Ok(table)
}

/// Both workloads on one checkpointer.
async fn backend(
    targets: &Targets,
    target: &Target,
    scale: &Scale,
    bar: &ProgressBar,
    table: &mut Table,
    peers: &mut Peers,
) -> Result<()> {
    let name = target.name();
    let saver = targets.saver(target, 4).await?;
    let graph = runtime::graph(Arc::clone(&saver)).context("cannot compile the graph")?;
    let fresh =
        || RunConfig::thread(uuid::Uuid::new_v4().to_string()).durability(Durability::Async);

    bar.set_message(format!("runtime · {name} · super-steps"));
    let steps = scale.invocations * STEPS_PER_INVOCATION;
    let args = variants(json!({"invocations": scale.invocations}));
    let (rates, theirs) = peers
        .pairs(scale.samples, "runtime.steps", name, &args, async || {
            let configs: Vec<RunConfig> = (0..scale.invocations).map(|_| fresh()).collect();
            let start = Instant::now();
            for config in &configs {
                graph.invoke(Some(runtime::input()), config).await?;
            }
            Ok(vec![per_second(steps, start.elapsed())])
        })
        .await
        .context("invocations failed")?;
    record(table, "super-steps", name, rates, theirs, |t, w, c, s| {
        t.rate(w, "steps/s", c, s)
    });
    bar.inc(1);

    let checkpoints = scale.history_invocations * CHECKPOINTS_PER_INVOCATION;
    bar.set_message(format!("runtime · {name} · history of {checkpoints}"));
    let config = fresh();
    for _ in 0..scale.history_invocations {
        graph
            .invoke(Some(runtime::input()), &config)
            .await
            .context("cannot write the history thread")?;
    }
    let args = variants(json!({"invocations": scale.history_invocations}));
    let (histories, theirs) = peers
        .pairs(scale.samples, "runtime.history", name, &args, async || {
            latencies(0, 1, async |_| {
                let history = graph
                    .get_state_history(&config, &ListOptions::default())
                    .await?;
                ensure!(
                    history.len() == checkpoints,
                    "the history has {} checkpoints, not {checkpoints}",
                    history.len()
                );
                Ok(())
            })
            .await
        })
        .await
        .context("get_state_history failed")?;
    let workload = format!("get_state_history ({checkpoints} checkpoints)");
    record(table, &workload, name, histories, theirs, |t, w, c, s| {
        t.latency(w, c, 0.5, s)
    });
    bar.inc(1);
    Ok(())
}
