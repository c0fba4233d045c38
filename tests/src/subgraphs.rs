//! Subgraphs: a compiled graph as a node, a subgraph called from a node, their namespaces,
//! interrupts inside them, and time travel into them.

use std::sync::Arc;

use serde_json::{Value, json};
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, ListOptions};
use waypoint_runtime::{
    Command, CompileOptions, CompiledGraph, Context, JsonSchema, JsonState, RunConfig, START,
    StateGraph,
};

use crate::graphs::Calls;
use crate::{TestResult, obj, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// Every checkpoint of `thread_id` in subgraph namespaces: `(ns, parents[""])`.
async fn subgraph_checkpoints(
    saver: &Saver,
    thread_id: &str,
) -> waypoint_runtime::Result<Vec<(String, Option<String>)>> {
    let all = saver
        .list(
            Some(&CheckpointConfig {
                thread_id: thread_id.to_owned(),
                checkpoint_ns: None,
                checkpoint_id: None,
            }),
            &ListOptions::default(),
        )
        .await?;
    Ok(all
        .into_iter()
        .filter_map(|t| {
            let ns = t.config.checkpoint_ns.clone().unwrap_or_default();
            (!ns.is_empty()).then(|| {
                let root = t.metadata.parents.and_then(|p| p.get("").cloned());
                (ns, root)
            })
        })
        .collect())
}

/// The newest checkpoint of the thread's (one) subgraph namespace whose next node is `node`.
async fn subgraph_checkpoint_before(
    saver: &Saver,
    sub: &CompiledGraph<JsonState>,
    config: &RunConfig,
    node: &str,
) -> Result<waypoint_runtime::StateSnapshot<JsonState>, Box<dyn std::error::Error + Send + Sync>> {
    let thread_id = config.thread_id.clone().unwrap_or_default();
    let (ns, _) = subgraph_checkpoints(saver, &thread_id)
        .await?
        .into_iter()
        .next()
        .ok_or("no subgraph checkpoint")?;
    let sub_config = RunConfig {
        checkpoint_ns: ns,
        ..config.clone()
    };
    Ok(sub
        .get_state_history(&sub_config, &ListOptions::default())
        .await?
        .into_iter()
        .find(|s| s.next == [node])
        .ok_or_else(|| format!("no checkpoint before {node}"))?)
}

/// A three-node subgraph `a -> b -> c` (with `b` optionally asking a question); each node
/// counts its calls and appends its name to `trail`.
fn abc(
    saver: &Saver,
    calls: &Calls,
    ask_in_b: bool,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut sub = StateGraph::json(JsonSchema::new().append("trail").last_value("answer"));
    for name in ["a", "b", "c"] {
        let calls = calls.clone();
        sub.add_node(name, move |_s: JsonState, ctx: Context| {
            calls.hit(name);
            async move {
                if name == "b" && ask_in_b {
                    let answer = ctx.interrupt("approve?")?;
                    return Ok(obj(json!({"trail": [name], "answer": answer})));
                }
                Ok(obj(json!({"trail": [name]})))
            }
        });
    }
    sub.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c");
    sub.compile(CompileOptions::default().checkpointer(Arc::clone(saver)))
}

/// A parent whose node `run_sub` calls `sub` with the parent's trail and keeps its result.
fn caller(
    saver: &Saver,
    calls: &Calls,
    sub: CompiledGraph<JsonState>,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(JsonSchema::new().last_value("result").last_value("answer"));
    let calls = calls.clone();
    graph.add_node("run_sub", move |_s: JsonState, ctx: Context| {
        calls.hit("run_sub");
        let sub = sub.clone();
        async move {
            let out = ctx
                .call(&sub, Some(obj(json!({"trail": ["start"]}))))
                .await?;
            Ok(obj(json!({
                "result": out.get("trail").cloned().unwrap_or_default(),
                "answer": out.get("answer").cloned().unwrap_or_default(),
            })))
        }
    });
    graph.add_edge(START, "run_sub");
    graph.compile(CompileOptions::default().checkpointer(Arc::clone(saver)))
}

/// A compiled graph as a node: the shared keys go in and come back through the parent's
/// reducers; keys only one side has are left alone; its checkpoints live in its own
/// namespace with the parent's checkpoint in `parents`.
pub async fn subgraph_as_node_shares_keys(saver: Saver) -> TestResult {
    let mut sub = StateGraph::json(
        JsonSchema::new()
            .last_value("foo")
            .last_value("sub_only")
            .append("sublog"),
    );
    sub.add_node("inner", |s: JsonState, _c: Context| async move {
        let current = s
            .get("foo")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        Ok(obj(
            json!({"foo": format!("{current}!"), "sub_only": "s", "sublog": ["inner"]}),
        ))
    });
    sub.add_edge(START, "inner");
    let sub = sub.compile(CompileOptions::default())?;

    let mut graph = StateGraph::json(
        JsonSchema::new()
            .last_value("foo")
            .append("log")
            .last_value("parent_only"),
    );
    graph.add_node("pre", |_s: JsonState, _c: Context| async {
        Ok(obj(json!({"log": ["pre"], "parent_only": "p"})))
    });
    graph.add_subgraph("sub", sub);
    graph.add_node("post", |_s: JsonState, _c: Context| async {
        Ok(obj(json!({"log": ["post"]})))
    });
    graph
        .add_edge(START, "pre")
        .add_edge("pre", "sub")
        .add_edge("sub", "post");
    let graph = graph.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let thread_id = thread();
    let out = graph
        .invoke(
            Some(obj(json!({"foo": "x"}))),
            &RunConfig::thread(thread_id.clone()),
        )
        .await?;
    assert_eq!(
        out.to_value(),
        json!({"foo": "x!", "log": ["pre", "post"], "parent_only": "p"})
    );

    let nested = subgraph_checkpoints(&saver, &thread_id).await?;
    assert_eq!(
        nested.len(),
        3,
        "input, start and `inner` checkpoints of the subgraph"
    );
    let root_ids: Vec<String> = graph
        .get_state_history(
            &RunConfig::thread(thread_id.clone()),
            &ListOptions::default(),
        )
        .await?
        .into_iter()
        .filter_map(|s| s.config.checkpoint_id)
        .collect();
    for (ns, parent) in &nested {
        assert!(ns.starts_with("sub:"), "{ns}");
        assert!(
            parent.as_ref().is_some_and(|p| root_ids.contains(p)),
            "{parent:?}"
        );
    }
    Ok(())
}

/// A node calls a subgraph with its own schema, translating in and out.
pub async fn node_calls_subgraph_with_own_schema(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = abc(&saver, &calls, false)?;
    let graph = caller(&saver, &calls, sub)?;
    let out = graph
        .invoke(Some(obj(json!({}))), &RunConfig::thread(thread()))
        .await?;
    assert_eq!(out.get("result"), Some(&json!(["start", "a", "b", "c"])));
    Ok(())
}

/// LangGraph's documented example: an interrupt inside a subgraph called from a node. On
/// resume the parent node runs again from its start, the subgraph's finished node does not,
/// the interrupted one does: parent 2, node_in_subgraph 1, human_node 2.
pub async fn subgraph_interrupt_documented_counts(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = crate::nested::asking_subgraph(&calls, Some(&saver))?;

    let mut graph = StateGraph::json(
        JsonSchema::new()
            .last_value("state_counter")
            .last_value("name"),
    );
    graph.add_node("parent_node", {
        let calls = calls.clone();
        move |state: JsonState, ctx: Context| {
            calls.hit("parent_node");
            let sub = sub.clone();
            async move {
                let out = ctx.call(&sub, Some(state.values().clone())).await?;
                Ok(out.values().clone())
            }
        }
    });
    graph.add_edge(START, "parent_node");
    let graph = graph.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let config = RunConfig::thread(thread());

    let out = graph
        .invoke(Some(obj(json!({"state_counter": 1}))), &config)
        .await?;
    assert!(out.interrupted);
    assert_eq!(out.interrupts[0].value, json!("what is your name?"));
    assert_eq!(
        (
            calls.get("parent_node"),
            calls.get("node_in_subgraph"),
            calls.get("human_node")
        ),
        (1, 1, 1)
    );
    let out = graph.invoke(Command::resume("35"), &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("name"), Some(&json!("35")));
    assert_eq!(
        (
            calls.get("parent_node"),
            calls.get("node_in_subgraph"),
            calls.get("human_node")
        ),
        (2, 1, 2)
    );
    Ok(())
}

/// Time travel to a checkpoint inside a subgraph resumes there: the subgraph's earlier
/// nodes do not run again (LangGraph issue 8458).
pub async fn time_travel_into_subgraph_resumes_there(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = abc(&saver, &calls, false)?;
    let graph = caller(&saver, &calls, sub.clone())?;
    let thread_id = thread();
    let config = RunConfig::thread(thread_id.clone());
    graph.invoke(Some(obj(json!({}))), &config).await?;
    let before_b = subgraph_checkpoint_before(&saver, &sub, &config, "b").await?;

    let out = graph.invoke(None, &before_b.config).await?;
    assert_eq!(out.get("result"), Some(&json!(["start", "a", "b", "c"])));
    assert_eq!(
        (
            calls.get("run_sub"),
            calls.get("a"),
            calls.get("b"),
            calls.get("c")
        ),
        (2, 1, 2, 2)
    );
    Ok(())
}

/// A resume that names the head checkpoint is a resume, not a replay: the subgraph goes on
/// at its interrupted node (LangGraph issues 7361 and 7561).
pub async fn resume_with_checkpoint_id_is_a_resume(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = abc(&saver, &calls, true)?;
    let graph = caller(&saver, &calls, sub)?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert!(out.interrupted);
    let head = graph.get_state(&config).await?.config;
    assert!(head.checkpoint_id.is_some());
    let out = graph.invoke(Command::resume("yes"), &head).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("answer"), Some(&json!("yes")));
    assert_eq!(out.get("result"), Some(&json!(["start", "a", "b", "c"])));
    assert_eq!((calls.get("a"), calls.get("b"), calls.get("c")), (1, 2, 1));
    Ok(())
}

/// Replaying the parent from before the node that calls a subgraph runs the subgraph anew.
pub async fn replaying_parent_reruns_subgraph(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = abc(&saver, &calls, false)?;
    let graph = caller(&saver, &calls, sub)?;
    let config = RunConfig::thread(thread());
    graph.invoke(Some(obj(json!({}))), &config).await?;
    let before = graph
        .get_state_history(&config, &ListOptions::default())
        .await?
        .into_iter()
        .find(|s| s.next == ["run_sub"])
        .ok_or("no checkpoint before run_sub")?;
    let out = graph.invoke(None, &before.config).await?;
    assert_eq!(out.get("result"), Some(&json!(["start", "a", "b", "c"])));
    assert_eq!((calls.get("a"), calls.get("b"), calls.get("c")), (2, 2, 2));
    Ok(())
}

/// Time travel into a subgraph to before its interrupt: it asks again, and a plain resume
/// (thread id only) continues the time-travelled branch.
pub async fn time_travel_to_interrupt_then_resume(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = abc(&saver, &calls, true)?;
    let graph = caller(&saver, &calls, sub.clone())?;
    let thread_id = thread();
    let config = RunConfig::thread(thread_id.clone());
    graph.invoke(Some(obj(json!({}))), &config).await?;
    let out = graph.invoke(Command::resume("first"), &config).await?;
    assert_eq!(out.get("answer"), Some(&json!("first")));

    let before_b = subgraph_checkpoint_before(&saver, &sub, &config, "b").await?;
    let out = graph.invoke(None, &before_b.config).await?;
    assert!(out.interrupted, "b asks again");
    let out = graph.invoke(Command::resume("second"), &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("answer"), Some(&json!("second")));
    assert_eq!((calls.get("a"), calls.get("c")), (1, 2));
    Ok(())
}
