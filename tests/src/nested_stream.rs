//! Graphs a node streams or pauses in, seen from the root: their parts in the root's stream
//! with subgraphs, and their snapshots in the root's `get_state_subgraphs`.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, JsonSchema, JsonState, RunConfig, START, StateGraph,
    StreamMode, StreamPart,
};

use crate::{TestResult, obj, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// `a -> b`, each adding one to `x`.
fn counting_child() -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut child = StateGraph::json(JsonSchema::new().last_value("x"));
    for name in ["a", "b"] {
        child.add_node(name, |state: JsonState, _c: Context| async move {
            let x = state.get("x").and_then(Value::as_i64).unwrap_or_default();
            Ok(obj(json!({"x": x + 1})))
        });
    }
    child.add_edge(START, "a").add_edge("a", "b");
    child.compile(CompileOptions::default())
}

/// One streamed part as LangGraph prints it with `subgraphs=True`, `(namespace, mode,
/// chunk)`, with the task ids of namespaces replaced by `<id>` so runs compare.
fn printed(part: &StreamPart<JsonState>) -> waypoint_runtime::Result<String> {
    let namespace = crate::streaming::masked_namespace(part);
    let data = serde_json::to_value(part)
        .map_err(|e| waypoint_runtime::Error::InvalidUpdate(e.to_string()))?["data"]
        .clone();
    Ok(format!("({namespace:?}, {}, {data})", part.mode()))
}

/// A node that streams a graph (`stream`, not `invoke`) runs it as its subgraph: the root,
/// streaming `updates` and `values` with subgraphs, yields every part of it under the
/// node's task namespace, in order, before the node's own update (as LangGraph's
/// `subgraphs=True`); the node still gets its own parts, in the mode it asked for.
pub async fn node_streams_child_to_the_root(saver: Saver) -> TestResult {
    let child = counting_child()?;
    let mut parent = StateGraph::json(JsonSchema::new().last_value("x").last_value("own"));
    parent.add_node("call", move |state: JsonState, ctx: Context| {
        let child = child.clone();
        async move {
            let input = obj(json!({"x": state.get("x").cloned().unwrap_or_default()}));
            let mut parts = child.stream(Some(input), ctx.config(), &[StreamMode::Values]);
            let mut own = Vec::new();
            while let Some(part) = parts.next().await {
                own.push(serde_json::to_value(&part?)?);
            }
            let x = own
                .last()
                .map(|p| p["data"]["x"].clone())
                .unwrap_or_default();
            Ok(obj(json!({"x": x, "own": own})))
        }
    });
    parent.add_edge(START, "call");
    let parent = parent.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let config = RunConfig::thread(thread());
    let modes = [StreamMode::Updates, StreamMode::Values];
    let parts: Vec<_> = parent
        .stream_subgraphs(Some(obj(json!({"x": 0}))), &config, &modes)
        .collect()
        .await;
    let parts = parts.into_iter().collect::<Result<Vec<_>, _>>()?;
    let lines = parts.iter().map(printed).collect::<Result<Vec<_>, _>>()?;
    let own = r#"[{"data":{"x":0},"event":"values"},{"data":{"x":1},"event":"values"},{"data":{"x":2},"event":"values"}]"#;
    let expected = [
        r#"([], values, {"x":0})"#.to_owned(),
        r#"(["call:<id>"], values, {"x":0})"#.to_owned(),
        r#"(["call:<id>"], updates, {"a":{"x":1}})"#.to_owned(),
        r#"(["call:<id>"], values, {"x":1})"#.to_owned(),
        r#"(["call:<id>"], updates, {"b":{"x":2}})"#.to_owned(),
        r#"(["call:<id>"], values, {"x":2})"#.to_owned(),
        format!(r#"([], updates, {{"call":{{"own":{own},"x":2}}}})"#),
        format!(r#"([], values, {{"own":{own},"x":2}})"#),
    ];
    assert_eq!(lines, expected);
    // The namespace is the `call` task's, as for a subgraph the node invokes.
    let history = parent
        .get_state_history(&config, &waypoint_checkpoint::ListOptions::default())
        .await?;
    let task = parts[1].namespace()[0].clone();
    assert!(
        history
            .iter()
            .any(|s| s.tasks.iter().any(|t| format!("call:{}", t.id) == task)),
        "{task} names the parent's call task"
    );

    // Streamed without subgraphs, the root yields only its own parts.
    let config = RunConfig::thread(thread());
    let parts: Vec<_> = parent
        .stream(Some(obj(json!({"x": 0}))), &config, &modes)
        .collect()
        .await;
    let parts = parts.into_iter().collect::<Result<Vec<_>, _>>()?;
    assert_eq!(parts.len(), 3, "{parts:?}");
    assert!(parts.iter().all(|p| p.namespace().is_empty()));
    Ok(())
}

/// LangGraph's `get_state(config, subgraphs=True)` on a parent paused in a subgraph its node
/// invoked: the task carries the subgraph's snapshot, read from the checkpoint alone, whose
/// values, next nodes, tasks and interrupts are those the subgraph's own `get_state` gives
/// (as JSON); the LangGraph API's `ThreadTask.state` is that snapshot.
pub async fn get_state_subgraphs_has_the_child_snapshot(saver: Saver) -> TestResult {
    let calls = crate::graphs::Calls::default();
    let sub = crate::nested::asking_subgraph(&calls, Some(&saver))?;
    let mut parent = StateGraph::json(JsonSchema::new().last_value("name"));
    parent.add_node("parent_node", {
        let sub = sub.clone();
        move |_state: JsonState, ctx: Context| {
            let sub = sub.clone();
            async move {
                let input = obj(json!({"state_counter": 1}));
                let out = ctx.call(&sub, Some(input)).await?;
                Ok(obj(
                    json!({"name": out.get("name").cloned().unwrap_or_default()}),
                ))
            }
        }
    });
    parent.add_edge(START, "parent_node");
    let parent = parent.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let config = RunConfig::thread(thread());
    parent.invoke(Some(obj(json!({}))), &config).await?;

    // Without subgraphs, no snapshot.
    assert_eq!(parent.get_state(&config).await?.tasks[0].subgraph, None);

    let snapshot = parent.get_state_subgraphs(&config).await?;
    let task = &snapshot.tasks[0];
    let (Some(at), Some(child)) = (&task.state, &task.subgraph) else {
        return Err("the paused task carries no subgraph snapshot".into());
    };
    let own = sub.get_state(at).await?;
    assert_eq!(
        serde_json::to_value(&child.values)?,
        serde_json::to_value(&own.values)?
    );
    assert_eq!(child.values, obj(json!({"state_counter": 1})));
    assert_eq!(child.next, own.next);
    assert_eq!(child.next, ["human_node"]);
    assert_eq!(child.interrupts, own.interrupts);
    assert_eq!(child.interrupts.len(), 1);
    assert_eq!(child.interrupts, task.interrupts);
    assert_eq!(child.config, own.config);
    assert_eq!(child.parent_config, own.parent_config);
    assert_eq!(child.metadata, own.metadata);
    assert_eq!(child.created_at, own.created_at);
    let ids = |tasks: &[waypoint_runtime::TaskInfo]| -> Vec<(String, String)> {
        tasks
            .iter()
            .map(|t| (t.id.clone(), t.name.clone()))
            .collect()
    };
    assert_eq!(ids(&child.tasks), ids(&own.tasks));
    assert_eq!(child.tasks[0].subgraph, None);
    // The API's ThreadTask: `checkpoint` points at the child, `state` is its snapshot.
    let json = serde_json::to_value(&snapshot)?;
    assert_eq!(json["tasks"][0]["state"], serde_json::to_value(&own)?);
    assert_eq!(
        json["tasks"][0]["checkpoint"]["checkpoint_ns"],
        json!(at.checkpoint_ns)
    );

    // Resumed, nothing is paused and no task is left.
    parent
        .invoke(waypoint_runtime::Command::resume("35"), &config)
        .await?;
    let done = parent.get_state_subgraphs(&config).await?;
    assert!(done.tasks.is_empty());
    assert_eq!(done.values.get("name"), Some(&json!("35")));
    Ok(())
}
