//! The events stream's edge cases: a failing node, a pause, chat-model tokens, the root
//! run id and the JSON of an event.

use futures::StreamExt;
use serde_json::{Map, Value, json};
use waypoint_runtime::messages::AiMessageChunk;
use waypoint_runtime::{
    CompileOptions, Context, Error, Event, EventKind, InMemorySaver, JsonSchema, JsonState,
    NodeResult, RunConfig, START, StateGraph,
};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// `ok -> then` on a thread, `then` being `node`.
fn graph(
    then: impl Fn(
        JsonState,
        Context,
    ) -> futures::future::BoxFuture<'static, NodeResult<Map<String, Value>>>
    + Send
    + Sync
    + 'static,
) -> waypoint_runtime::Result<waypoint_runtime::CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(JsonSchema::new().last_value("a"));
    graph
        .add_node("ok", |_s: JsonState, _c: Context| async {
            Ok(obj(json!({"a": "ok"})))
        })
        .add_node("then", then)
        .add_edge(START, "ok")
        .add_edge("ok", "then");
    graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))
}

/// `(event, name)` of each event, and the error the stream ended with.
async fn run(
    graph: &waypoint_runtime::CompiledGraph<JsonState>,
    config: &RunConfig,
) -> (Vec<Event>, Option<Error>) {
    let mut events = Vec::new();
    let mut stream = Box::pin(graph.stream_events(Some(obj(json!({"a": "in"}))), config));
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(err) => return (events, Some(err)),
        }
    }
    (events, None)
}

fn names(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                serde_json::to_value(e.event).unwrap_or_default(),
                e.name
            )
        })
        .map(|s| s.replace('"', ""))
        .collect()
}

/// As LangGraph's `astream_events` raises a node's exception: the stream ends with the
/// error, and neither the failed node nor the graph gets an end event.
#[tokio::test]
async fn failing_node_ends_the_stream_with_its_error() -> TestResult {
    let graph = graph(|_s, _c| Box::pin(async { Err("boom".into()) }))?;
    let (events, err) = run(&graph, &RunConfig::thread("t")).await;
    let err = err.ok_or("the stream ends with the error")?;
    assert!(
        matches!(&err, Error::Node { node, .. } if node == "then"),
        "{err}"
    );
    let names = names(&events);
    assert_eq!(
        names.last().map(String::as_str),
        Some("on_chain_start then")
    );
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("on_chain_end LangGraph"))
    );
    Ok(())
}

/// A pause: the graph streams `{"__interrupt__": [...]}` and ends; the paused node does not.
#[tokio::test]
async fn interrupt_is_a_graph_chunk_and_the_graph_ends() -> TestResult {
    let graph = graph(|_s, ctx| {
        Box::pin(async move {
            ctx.interrupt("go on?")?;
            Ok(Map::new())
        })
    })?;
    let (events, err) = run(&graph, &RunConfig::thread("t")).await;
    assert!(err.is_none(), "{err:?}");
    let tail: Vec<String> = names(&events).split_off(events.len() - 3);
    assert_eq!(
        tail,
        [
            "on_chain_start then",
            "on_chain_stream LangGraph",
            "on_chain_end LangGraph"
        ]
    );
    let chunk = &events[events.len() - 2].data["chunk"];
    assert_eq!(chunk["__interrupt__"][0]["value"], json!("go on?"));
    assert_eq!(events[events.len() - 1].data["output"], json!({"a": "ok"}));
    Ok(())
}

/// Tokens a node streams are `on_chat_model_stream` events of one run per message,
/// nested in the node's task.
#[tokio::test]
async fn streamed_tokens_are_chat_model_events_in_their_node() -> TestResult {
    let graph = graph(|_s, ctx| {
        Box::pin(async move {
            for token in ["Hel", "lo"] {
                ctx.stream_message(AiMessageChunk::new(token).with_id("m1"));
            }
            Ok(obj(json!({"a": "Hello"})))
        })
    })?;
    let (events, err) = run(&graph, &RunConfig::thread("t")).await;
    assert!(err.is_none(), "{err:?}");
    let node = events
        .iter()
        .find(|e| e.event == EventKind::ChainStart && e.name == "then")
        .ok_or("the node's start")?;
    let tokens: Vec<&Event> = events
        .iter()
        .filter(|e| e.event == EventKind::ChatModelStream)
        .collect();
    assert_eq!(tokens.len(), 2);
    for token in &tokens {
        assert_eq!(
            token.parent_ids,
            [events[0].run_id.clone(), node.run_id.clone()]
        );
        assert_eq!(token.run_id, tokens[0].run_id);
        assert_eq!(token.metadata["langgraph_node"], json!("then"));
    }
    assert_eq!(tokens[0].data["chunk"]["content"], json!("Hel"));
    Ok(())
}

/// The root run's id is the config's `run_id`; an event's JSON is LangGraph's.
#[tokio::test]
async fn root_run_id_comes_from_the_config() -> TestResult {
    let graph = graph(|_s, _c| Box::pin(async { Ok(Map::new()) }))?;
    let config = RunConfig {
        run_id: Some("run-1".into()),
        ..RunConfig::thread("t")
    };
    let (events, err) = run(&graph, &config).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        serde_json::to_value(&events[0])?,
        json!({"event": "on_chain_start", "name": "LangGraph", "run_id": "run-1",
               "parent_ids": [], "tags": [], "metadata": {"thread_id": "t"},
               "data": {"input": {"a": "in"}}})
    );
    let end = events.last().ok_or("events")?;
    assert_eq!(
        (end.event, end.run_id.as_str()),
        (EventKind::ChainEnd, "run-1")
    );
    Ok(())
}

/// A `Send`'s task starts with its own argument as input and LangGraph's push trigger.
#[tokio::test]
async fn sent_tasks_start_with_their_argument() -> TestResult {
    let mut graph = StateGraph::json(JsonSchema::new().last_value("a"));
    graph
        .add_node("fan", |_s: JsonState, _c: Context| async { Ok(Map::new()) })
        .add_node("work", |_s: JsonState, _c: Context| async {
            Ok(Map::new())
        })
        .add_edge(START, "fan")
        .add_conditional_edges(
            "fan",
            |s: &JsonState| {
                ["x", "y"]
                    .map(|a| {
                        waypoint_runtime::Send::new(
                            "work",
                            s.with_values(obj(json!({"a": a}))).expect("a"),
                        )
                    })
                    .to_vec()
            },
            ["work"],
        );
    let graph = graph.compile(CompileOptions::default())?;
    let (events, err) = run(&graph, &RunConfig::default()).await;
    assert!(err.is_none(), "{err:?}");
    let starts: Vec<&Event> = events
        .iter()
        .filter(|e| e.event == EventKind::ChainStart && e.name == "work")
        .collect();
    assert_eq!(starts.len(), 2);
    for (start, a) in starts.iter().zip(["x", "y"]) {
        assert_eq!(start.data["input"], json!({ "a": a }));
        assert_eq!(
            start.metadata["langgraph_triggers"],
            json!(["__pregel_push"])
        );
        assert_eq!(start.metadata["langgraph_path"], json!(["__pregel_push"]));
        assert_eq!(start.metadata["langgraph_step"], json!(2));
        assert!(!start.metadata.contains_key("thread_id"));
    }
    Ok(())
}
