//! Input, output and private schemas (LangGraph's guide "Glossary", Multiple schemas).

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, JsonSchema, JsonState, RunConfig, START,
    StateGraph, StreamMode, StreamPart,
};

use crate::{TestResult, obj, thread};

/// The text of `key` in `state`.
fn text(state: &JsonState, key: &str) -> String {
    state
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The guide's graph: `OverallState` with an input schema, an output schema and a node
/// writing the private key `bar`.
fn guide_graph(
    saver: Arc<dyn CheckpointSaver>,
) -> Result<CompiledGraph<JsonState>, waypoint_runtime::Error> {
    let overall = JsonSchema::new()
        .last_value("foo")
        .last_value("user_input")
        .last_value("graph_output");
    let schema = overall
        .merge(JsonSchema::new().last_value("bar"))?
        .input(JsonSchema::new().last_value("user_input"))?
        .output(JsonSchema::new().last_value("graph_output"))?;
    let mut g = StateGraph::json(schema);
    g.add_node("node_1", |s: JsonState, _: Context| async move {
        Ok(obj(json!({"foo": text(&s, "user_input") + " name"})))
    })
    .add_node("node_2", |s: JsonState, _: Context| async move {
        Ok(obj(json!({"bar": text(&s, "foo") + " is"})))
    })
    .add_node("node_3", |s: JsonState, _: Context| async move {
        Ok(obj(json!({"graph_output": text(&s, "bar") + " Lance"})))
    })
    .add_edge(START, "node_1")
    .add_edge("node_1", "node_2")
    .add_edge("node_2", "node_3")
    .add_edge("node_3", END);
    g.compile(CompileOptions::default().checkpointer(saver))
}

/// `invoke({"user_input": "My"})` prints `{'graph_output': 'My name is Lance'}`, as in the
/// guide; the checkpoint still holds every key, the private `bar` included, and streamed
/// values show only the output key.
pub async fn guide_example_returns_only_output(saver: Arc<dyn CheckpointSaver>) -> TestResult {
    let graph = guide_graph(saver)?;
    let config = RunConfig::thread(thread());
    let out = graph
        .invoke(Some(obj(json!({"user_input": "My"}))), &config)
        .await?;
    assert_eq!(
        out.values.to_value(),
        json!({"graph_output": "My name is Lance"})
    );

    let saved = graph.get_state(&config).await?;
    assert_eq!(
        saved.values.to_value(),
        json!({"user_input": "My", "foo": "My name", "bar": "My name is",
               "graph_output": "My name is Lance"})
    );

    let config = RunConfig::thread(thread());
    let parts: Vec<_> = graph
        .stream(
            Some(obj(json!({"user_input": "My"}))),
            &config,
            &[StreamMode::Values],
        )
        .collect()
        .await;
    let mut values = Vec::new();
    for part in parts {
        if let StreamPart::Values(state) = part? {
            values.push(state.to_value());
        }
    }
    // As in LangGraph, only a step writing an output key shows, with the output keys only.
    assert_eq!(values, [json!({"graph_output": "My name is Lance"})]);
    Ok(())
}
