//! A writer paused past its lease: the graph both processes of the test run on one thread.
//!
//! The child process (`paused_writer`) starts a run whose node announces itself and then
//! waits; the test stops the child (SIGSTOP) until its lease lapses, runs the thread itself,
//! and lets the child go on: the child's next write must fail with `Conflict` and write
//! nothing, so the thread's history never forks.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, JsonSchema, JsonState, START, StateGraph,
};

use crate::obj;

/// What the child prints once its node runs (it holds the lease then).
pub const IN_NODE: &str = "IN_NODE";
/// The child's lease ttl: short, so the test waits little for it to lapse.
pub const CHILD_LEASE_TTL: Duration = Duration::from_millis(600);

/// One node `work` that appends `writer` to `log` after waiting `wait` (announcing itself
/// on stdout first when `announce`).
pub fn graph(
    saver: Arc<dyn CheckpointSaver>,
    writer: &str,
    wait: Duration,
    announce: bool,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(JsonSchema::new().last_value("who").append("log"));
    let update = obj(json!({"who": writer, "log": [writer]}));
    graph.add_node("work", move |_state: JsonState, _ctx: Context| {
        let update = update.clone();
        async move {
            if announce {
                println!("{IN_NODE}");
            }
            tokio::time::sleep(wait).await;
            Ok(update)
        }
    });
    graph.add_edge(START, "work").add_edge("work", END);
    graph.compile(CompileOptions::default().checkpointer(saver))
}
