//! The events stream (LangGraph's `astream_events(version="v2")`): start, stream and end
//! events of the graph, each node task and each subgraph, nested by `parent_ids`.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    CompileOptions, Context, Event, EventKind, JsonSchema, JsonState, RunConfig, START, StateGraph,
};

use crate::{TestResult, obj, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// A node writing `trail` with its name appended.
fn append(graph: &mut StateGraph<JsonState>, name: &'static str) {
    graph.add_node(name, move |s: JsonState, _ctx: Context| async move {
        let mut trail = s.values().get("trail").cloned().unwrap_or(json!([]));
        if let Some(items) = trail.as_array_mut() {
            items.push(json!(name));
        }
        Ok::<_, waypoint_runtime::BoxError>(obj(json!({ "trail": trail })))
    });
}

/// `first -> sub -> last`, `sub` a subgraph with one node `inner`: the events come in
/// LangGraph's order, every run nests in the ones around it, and nodes carry LangGraph's
/// metadata, tags and data.
pub async fn graph_nodes_and_subgraph_events_nest(saver: Saver) -> TestResult {
    let schema = || JsonSchema::new().last_value("trail");
    let mut sub = StateGraph::json(schema());
    append(&mut sub, "inner");
    sub.add_edge(START, "inner");
    let sub = sub.compile(CompileOptions::default())?;
    let mut graph = StateGraph::json(schema());
    append(&mut graph, "first");
    graph.add_subgraph("sub", sub);
    append(&mut graph, "last");
    graph
        .add_edge(START, "first")
        .add_edge("first", "sub")
        .add_edge("sub", "last");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let events: Vec<Event> = graph
        .stream_events(Some(obj(json!({"trail": ["in"]}))), &config)
        .map(|event| event.expect("no error"))
        .collect()
        .await;

    let kind = |e: &Event| match e.event {
        EventKind::ChainStart => "start",
        EventKind::ChainStream => "stream",
        EventKind::ChainEnd => "end",
        EventKind::ChatModelStart => "model-start",
        EventKind::ChatModelStream => "token",
        EventKind::ChatModelEnd => "model-end",
        EventKind::CustomEvent => "custom",
    };
    let seen: Vec<String> = events
        .iter()
        .map(|e| format!("{} {} {}", kind(e), e.name, e.parent_ids.len()))
        .collect();
    let expected = [
        "start LangGraph 0",
        "start __start__ 1",
        "stream __start__ 1",
        "end __start__ 1",
        "start first 1",
        "stream first 1",
        "end first 1",
        "stream LangGraph 0",
        "start sub 1",
        "start LangGraph 2",
        "start __start__ 3",
        "stream __start__ 3",
        "end __start__ 3",
        "start inner 3",
        "stream inner 3",
        "end inner 3",
        "stream LangGraph 2",
        "end LangGraph 2",
        "stream sub 1",
        "end sub 1",
        "stream LangGraph 0",
        "start last 1",
        "stream last 1",
        "end last 1",
        "stream LangGraph 0",
        "end LangGraph 0",
    ];
    assert_eq!(seen, expected);

    // Every parent is a run already started and not yet ended, innermost last.
    let mut open: Vec<String> = Vec::new();
    let mut names: HashMap<String, String> = HashMap::new();
    for event in &events {
        if event.event == EventKind::ChainStart {
            assert_eq!(event.parent_ids, open, "{event:?}");
            open.push(event.run_id.clone());
            names.insert(event.run_id.clone(), event.name.clone());
        } else {
            assert_eq!(open.last(), Some(&event.run_id), "{event:?}");
            assert_eq!(event.parent_ids, open[..open.len() - 1], "{event:?}");
        }
        if event.event == EventKind::ChainEnd {
            open.pop();
        }
    }
    assert!(open.is_empty());
    assert_eq!(names.len(), 8, "one run id per run");

    // Node metadata: LangGraph's keys; the subgraph's node names its own step and namespace.
    let start_of = |name: &str, depth: usize| {
        events
            .iter()
            .find(|e| {
                e.event == EventKind::ChainStart && e.name == name && e.parent_ids.len() == depth
            })
            .expect("a start event")
    };
    let thread_id = json!(config.thread_id);
    let first = start_of("first", 1);
    assert_eq!(first.tags, ["graph:step:1"]);
    assert_eq!(first.metadata["langgraph_step"], json!(1));
    assert_eq!(first.metadata["langgraph_node"], json!("first"));
    assert_eq!(
        first.metadata["langgraph_triggers"],
        json!(["branch:to:first"])
    );
    assert_eq!(
        first.metadata["langgraph_path"],
        json!(["__pregel_pull", "first"])
    );
    assert_eq!(first.metadata["thread_id"], thread_id);
    assert_eq!(first.data["input"], json!({"trail": ["in"]}));
    let sub_task = start_of("sub", 1);
    let sub_ns = sub_task.metadata["langgraph_checkpoint_ns"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(sub_ns.starts_with("sub:"), "{sub_ns}");
    let inner = start_of("inner", 3);
    assert_eq!(inner.metadata["langgraph_step"], json!(1));
    assert_eq!(inner.metadata["langgraph_node"], json!("inner"));
    let inner_ns = inner.metadata["langgraph_checkpoint_ns"]
        .as_str()
        .unwrap_or_default();
    assert!(
        inner_ns.starts_with(&format!("{sub_ns}|inner:")),
        "{inner_ns}"
    );
    assert_eq!(inner.tags, ["graph:step:1"]);
    assert_eq!(start_of("last", 1).metadata["langgraph_step"], json!(3));
    assert!(
        start_of("__start__", 1)
            .tags
            .contains(&"langsmith:hidden".to_owned())
    );

    // Data: the graph's input and final state, each node's update, the graph's `{node: update}`.
    let root = &events[0];
    assert_eq!(root.data["input"], json!({"trail": ["in"]}));
    let last = events.last().expect("events");
    let trail = json!({"trail": ["in", "first", "inner", "last"]});
    assert_eq!(last.data["output"], trail);
    let end_of = |name: &str| {
        events
            .iter()
            .find(|e| e.event == EventKind::ChainEnd && e.name == name)
            .expect("an end event")
    };
    assert_eq!(
        end_of("first").data["output"],
        json!({"trail": ["in", "first"]})
    );
    let sub_end = events
        .iter()
        .find(|e| e.event == EventKind::ChainEnd && e.parent_ids.len() == 2)
        .expect("the subgraph's end");
    assert_eq!(
        sub_end.data["output"],
        json!({"trail": ["in", "first", "inner"]})
    );
    let chunks: Vec<&Value> = events
        .iter()
        .filter(|e| e.event == EventKind::ChainStream && e.parent_ids.is_empty())
        .map(|e| &e.data["chunk"])
        .collect();
    assert_eq!(chunks[0], &json!({"first": {"trail": ["in", "first"]}}));
    assert_eq!(chunks[2], &json!({"last": trail}));

    // The JSON is LangGraph's StreamEvent.
    let json = serde_json::to_value(first)?;
    let mut keys: Vec<&String> = json
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    keys.sort();
    assert_eq!(
        keys,
        [
            "data",
            "event",
            "metadata",
            "name",
            "parent_ids",
            "run_id",
            "tags"
        ]
    );
    assert_eq!(json["event"], json!("on_chain_start"));
    Ok(())
}
