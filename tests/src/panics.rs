//! A panicking node never takes the process down (issue 21): a panic in a node's function
//! (before or after an await), in a router, in a reducer or in a subgraph's node fails the
//! run with [`Error::Panicked`] naming the node, releases the thread, and leaves it resumable
//! exactly as a node returning an error does.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, Durability, END, Error, JsonSchema, JsonState,
    NodeResult, RunConfig, START, StateGraph, StreamMode,
};

use crate::graphs::{Calls, Failures};
use crate::{TestResult, obj, thread};

type Saver = Arc<dyn CheckpointSaver>;
/// What a JSON-state node returns, boxed.
type NodeFuture = BoxFuture<'static, NodeResult<Map<String, Value>>>;

/// The node and message of a run's panic error.
fn panicked<T: std::fmt::Debug>(
    result: waypoint_runtime::Result<T>,
) -> Result<(String, String), String> {
    match result {
        Err(Error::Panicked { node, message }) => Ok((node, message)),
        other => Err(format!("expected a caught panic, got {other:?}")),
    }
}

/// A node that logs its name and panics with `message` while `failures` last, before its
/// future is made (`after_await` false) or after an await in it.
fn panicking_node(
    name: &'static str,
    calls: &Calls,
    failures: Failures,
    after_await: bool,
) -> impl Fn(JsonState, Context) -> NodeFuture + Send + Sync + 'static {
    let calls = calls.clone();
    move |_s: JsonState, _c: Context| {
        calls.hit(name);
        let fail = failures.take();
        if fail && !after_await {
            panic!("{name} is down");
        }
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            if fail {
                panic!("{name} gave up after an await");
            }
            Ok(obj(json!({"log": [name]})))
        })
    }
}

/// The sorted strings of a JSON array key.
fn sorted(state: &JsonState, key: &str) -> Result<Vec<String>, serde_json::Error> {
    let mut log: Vec<String> = serde_json::from_value(state.get(key).cloned().unwrap_or_default())?;
    log.sort();
    Ok(log)
}

/// Two nodes in one step, one panics before its future exists: the run fails with the
/// panic naming the node, the other's writes are kept, the panic is recorded on the failed
/// task, and resuming (at once: the thread was released) re-runs only the panicked node.
pub async fn panicking_node_resumes_alone(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node(
        "steady",
        panicking_node("steady", &calls, Failures::new(0), false),
    );
    graph.add_node(
        "flaky",
        panicking_node("flaky", &calls, Failures::new(1), false),
    );
    graph.add_edge(START, "steady").add_edge(START, "flaky");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());

    let (node, message) = panicked(
        graph
            .invoke(Some(obj(json!({"log": ["in"]}))), &config)
            .await,
    )?;
    assert_eq!(
        (node.as_str(), message.as_str()),
        ("flaky", "flaky is down")
    );
    let snap = graph.get_state(&config).await?;
    let flaky = snap
        .tasks
        .iter()
        .find(|t| t.name == "flaky")
        .ok_or("no flaky task")?;
    assert_eq!(
        flaky.error.as_deref(),
        Some("node `flaky` panicked: flaky is down")
    );
    assert!(
        snap.tasks
            .iter()
            .any(|t| t.name == "steady" && t.error.is_none())
    );

    let out = graph.invoke(None, &config).await?;
    assert_eq!(sorted(&out, "log")?, ["flaky", "in", "steady"]);
    assert_eq!((calls.get("steady"), calls.get("flaky")), (1, 2));
    Ok(())
}

/// A node that panics after an await, in a streamed run: the stream ends with the panic's
/// error (the spawned run does not die silently), and the thread resumes.
pub async fn panic_after_await_ends_the_stream(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node(
        "slow",
        panicking_node("slow", &calls, Failures::new(1), true),
    );
    graph.add_edge(START, "slow").add_edge("slow", END);
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());

    let parts: Vec<_> = graph
        .stream(
            Some(obj(json!({"log": ["in"]}))),
            &config,
            &[StreamMode::Values],
        )
        .collect()
        .await;
    let last = parts.into_iter().last().ok_or("an empty stream")?;
    let (node, message) = panicked(last)?;
    assert_eq!(
        (node.as_str(), message.as_str()),
        ("slow", "slow gave up after an await")
    );

    let out = graph.invoke(None, &config).await?;
    assert_eq!(sorted(&out, "log")?, ["in", "slow"]);
    assert_eq!(calls.get("slow"), 2);
    Ok(())
}

/// A router that panics fails its node's task, which runs again on resume.
pub async fn panicking_router_is_a_node_error(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let failures = Failures::new(1);
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node("a", panicking_node("a", &calls, Failures::new(0), false));
    graph.add_node("b", panicking_node("b", &calls, Failures::new(0), false));
    graph.add_edge(START, "a");
    graph.add_conditional_edges(
        "a",
        move |_s: &JsonState| {
            if failures.take() {
                panic!("no way out");
            }
            "b"
        },
        ["b"],
    );
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());

    let (node, message) = panicked(graph.invoke(Some(obj(json!({}))), &config).await)?;
    assert_eq!(
        (node.as_str(), message.as_str()),
        ("a", "no way out (in a router of its conditional edges)")
    );
    let out = graph.invoke(None, &config).await?;
    assert_eq!(sorted(&out, "log")?, ["a", "b"]);
    assert_eq!((calls.get("a"), calls.get("b")), (2, 1));
    Ok(())
}

/// A reducer that panics at the end of a parallel step (the second of the run) names the
/// task whose update it was folding; both tasks' writes were saved, so resuming folds them
/// without running either node again, whatever the durability.
pub async fn panicking_reducer_keeps_the_step_writes(saver: Saver) -> TestResult {
    for durability in [Durability::Sync, Durability::Async, Durability::Exit] {
        let calls = Calls::default();
        let failures = Failures::new(1);
        let schema = JsonSchema::new().append("log").reducer(
            "total",
            json!(0),
            move |total: &mut Value, add: Value| {
                if failures.take() {
                    panic!("cannot add {add}");
                }
                *total = json!(total.as_i64().unwrap_or(0) + add.as_i64().unwrap_or(0));
                Ok(())
            },
        );
        let mut graph = StateGraph::json(schema);
        graph.add_node(
            "first",
            panicking_node("first", &calls, Failures::new(0), false),
        );
        graph.add_edge(START, "first");
        for name in ["one", "two"] {
            let calls = calls.clone();
            graph.add_node(name, move |_s: JsonState, _c: Context| {
                calls.hit(name);
                async move { Ok(obj(json!({"log": [name], "total": 1}))) }
            });
            graph.add_edge("first", name);
        }
        let graph = graph.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
        let config = RunConfig::thread(thread()).durability(durability);

        let (node, message) = panicked(graph.invoke(Some(obj(json!({}))), &config).await)?;
        assert_eq!(
            (node.as_str(), message.as_str()),
            ("one", "cannot add 1 (in a reducer folding its update)"),
            "{durability:?}"
        );
        let snap = graph.get_state(&config).await?;
        assert_eq!(snap.values.get("total"), Some(&json!(0)), "{durability:?}");
        assert_eq!(snap.next, ["one", "two"], "{durability:?}");
        let out = graph.invoke(None, &config).await?;
        assert_eq!(out.get("total"), Some(&json!(2)), "{durability:?}");
        assert_eq!(
            sorted(&out, "log")?,
            ["first", "one", "two"],
            "{durability:?}"
        );
        let runs = (calls.get("first"), calls.get("one"), calls.get("two"));
        assert_eq!(runs, (1, 1, 1), "{durability:?}");
    }
    Ok(())
}

/// A subgraph with one node that panics once, as node `sub` of a parent graph.
fn parent_of_panicking(
    saver: Saver,
    calls: &Calls,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut sub = StateGraph::json(JsonSchema::new().append("log"));
    sub.add_node(
        "inner",
        panicking_node("inner", calls, Failures::new(1), true),
    );
    sub.add_edge(START, "inner");
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_subgraph("sub", sub.compile(CompileOptions::default())?);
    graph.add_edge(START, "sub");
    graph.compile(CompileOptions::default().checkpointer(saver))
}

/// A panic in a subgraph's node fails the parent's run with an error naming both nodes and
/// the panic; the thread resumes into the subgraph and finishes.
pub async fn panic_inside_subgraph_resumes(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = parent_of_panicking(saver, &calls)?;
    let config = RunConfig::thread(thread());

    let err = graph
        .invoke(Some(obj(json!({}))), &config)
        .await
        .err()
        .ok_or("the run did not fail")?;
    assert_eq!(
        err.to_string(),
        "node `sub` failed: node `inner` panicked: inner gave up after an await"
    );
    let out = graph.invoke(None, &config).await?;
    assert_eq!(sorted(&out, "log")?, ["inner"]);
    assert_eq!(calls.get("inner"), 2);
    Ok(())
}
