//! Graphs the cases share, with call counters to prove what ran.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::json;
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, JsonSchema, JsonState, NodeResult, START, State,
    StateGraph,
};

use crate::obj;

/// How many times each node ran.
#[derive(Clone, Debug, Default)]
pub struct Calls(Arc<Mutex<BTreeMap<String, usize>>>);

impl Calls {
    /// Counts one call of `node`.
    pub fn hit(&self, node: &str) {
        *self.0.lock().entry(node.to_owned()).or_default() += 1;
    }

    /// Calls of `node` so far.
    pub fn get(&self, node: &str) -> usize {
        self.0.lock().get(node).copied().unwrap_or(0)
    }
}

/// The documented example's schema: `foo` last value, `bar` appended.
pub fn foo_bar_schema() -> JsonSchema {
    JsonSchema::new().last_value("foo").append("bar")
}

/// LangGraph's documented persistence example on a JSON state: `node_a` then `node_b`.
pub fn documented_json(
    saver: Arc<dyn CheckpointSaver>,
    calls: &Calls,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(foo_bar_schema());
    for name in ["node_a", "node_b"] {
        let calls = calls.clone();
        let letter = &name[5..];
        let update = obj(json!({"foo": letter, "bar": [letter]}));
        graph.add_node(name, move |_state: JsonState, ctx: Context| {
            calls.hit(ctx.node());
            let update = update.clone();
            async move { Ok(update) }
        });
    }
    graph
        .add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    graph.compile(CompileOptions::default().checkpointer(saver))
}

/// The documented example's state as a typed struct.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FooBar {
    /// Last value.
    pub foo: String,
    /// Appended.
    #[reducer(append)]
    pub bar: Vec<String>,
}

async fn typed_a(_: FooBar, _: Context) -> NodeResult<FooBarUpdate> {
    Ok(FooBarUpdate::default().foo("a").bar(vec!["a".to_owned()]))
}

async fn typed_b(_: FooBar, _: Context) -> NodeResult<FooBarUpdate> {
    Ok(FooBarUpdate::default().foo("b").bar(vec!["b".to_owned()]))
}

/// The documented example on the typed state.
pub fn documented_typed(
    saver: Arc<dyn CheckpointSaver>,
) -> waypoint_runtime::Result<CompiledGraph<FooBar>> {
    let mut graph = StateGraph::<FooBar>::new();
    graph
        .add_node("node_a", typed_a)
        .add_node("node_b", typed_b)
        .add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    graph.compile(CompileOptions::default().checkpointer(saver))
}

/// A linear JSON graph `n0 -> n1 -> ... ` where each node appends its name to `log`.
pub fn linear(
    saver: Arc<dyn CheckpointSaver>,
    nodes: usize,
    calls: &Calls,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(JsonSchema::new().append("log").last_value("last"));
    let names: Vec<String> = (0..nodes).map(|i| format!("n{i}")).collect();
    for name in &names {
        graph.add_node(name.clone(), logging_node(calls));
    }
    graph.add_edge(START, names[0].clone());
    for pair in names.windows(2) {
        graph.add_edge(pair[0].clone(), pair[1].clone());
    }
    graph.add_edge(names[nodes - 1].clone(), END);
    graph.compile(CompileOptions::default().checkpointer(saver))
}

/// A JSON graph of one node, `slow`, that waits `pause` and appends the run's `who` key to
/// `log`: a run that holds its thread for a while.
pub fn slow_logger(
    saver: Arc<dyn CheckpointSaver>,
    pause: std::time::Duration,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node("slow", move |_s: JsonState, ctx: Context| async move {
        tokio::time::sleep(pause).await;
        let who = ctx.config().get("who").cloned().unwrap_or_default();
        Ok(obj(json!({"log": [who]})))
    });
    graph.add_edge(START, "slow");
    graph.compile(CompileOptions::default().checkpointer(saver))
}

/// A node appending its own name to `log` and setting `last`, counting its calls.
pub fn logging_node(
    calls: &Calls,
) -> impl Fn(
    JsonState,
    Context,
) -> std::future::Ready<NodeResult<serde_json::Map<String, serde_json::Value>>>
+ Send
+ Sync
+ 'static {
    let calls = calls.clone();
    move |_state, ctx| {
        calls.hit(ctx.node());
        std::future::ready(Ok(obj(json!({"log": [ctx.node()], "last": ctx.node()}))))
    }
}

/// A counter shared by nodes that must fail a given number of times.
#[derive(Clone, Debug, Default)]
pub struct Failures(Arc<AtomicUsize>);

impl Failures {
    /// Failures left, set to `n`.
    pub fn new(n: usize) -> Self {
        Failures(Arc::new(AtomicUsize::new(n)))
    }

    /// Whether this call must fail (and counts it).
    pub fn take(&self) -> bool {
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}
