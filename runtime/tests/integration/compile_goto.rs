//! Nodes reached only through `Command::goto` compile and run, as in LangGraph, whose
//! `compile` checks names, edges and the entry point but not reachability: declared
//! destinations only describe the graph. Unknown names still fail, at compile time for
//! edges and destinations and at run time for a `goto`, naming the culprit.

use serde_json::{Map, Value, json};
use waypoint_runtime::{
    Command, CompileOptions, Context, END, Error, JsonSchema, JsonState, NodeResult, RunConfig,
    START, StateGraph,
};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn graph() -> StateGraph<JsonState> {
    StateGraph::json(JsonSchema::new().append("visited"))
}

/// A node that records its name and goes nowhere by itself.
fn visit(
    name: &'static str,
) -> impl Fn(JsonState, Context) -> std::future::Ready<NodeResult<Map<String, Value>>> {
    move |_, _| std::future::ready(Ok(obj(json!({"visited": [name]}))))
}

/// A node that records `router` and hands off to `to` with a `Command`.
fn hand_off(
    to: &'static str,
) -> impl Fn(JsonState, Context) -> std::future::Ready<NodeResult<Command<JsonState>>> {
    move |_, _| {
        std::future::ready(Ok(
            Command::update(obj(json!({"visited": ["router"]}))).and_goto(to)
        ))
    }
}

fn invalid(graph: StateGraph<JsonState>) -> String {
    match graph.compile(CompileOptions::default()) {
        Err(Error::InvalidGraph(message)) => message,
        Err(other) => panic!("expected InvalidGraph, got {other}"),
        Ok(_) => panic!("expected InvalidGraph, the graph compiled"),
    }
}

async fn visited(graph: StateGraph<JsonState>) -> Result<Value, Error> {
    let compiled = graph.compile(CompileOptions::default())?;
    let out = compiled
        .invoke(Some(Map::new()), &RunConfig::default())
        .await?;
    Ok(out.get("visited").cloned().unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_node_reached_only_by_goto_compiles_and_runs() -> TestResult {
    // LangGraph's handoff: no edge and no declared destination leads to `billing`.
    let mut g = graph();
    g.add_node("router", hand_off("billing"))
        .add_node("billing", visit("billing"))
        .add_edge(START, "router")
        .add_edge("billing", END);
    assert_eq!(visited(g).await?, json!(["router", "billing"]));
    Ok(())
}

#[tokio::test]
async fn destinations_may_be_declared_before_their_node() -> TestResult {
    let mut g = graph();
    g.add_destinations("router", ["billing", END]);
    g.add_node("router", hand_off("billing"))
        .add_node("billing", visit("billing"))
        .add_edge(START, "router");
    assert_eq!(visited(g).await?, json!(["router", "billing"]));
    Ok(())
}

#[test]
fn destinations_of_or_to_unknown_nodes_are_rejected_by_name() {
    let mut g = graph();
    g.add_node("router", hand_off("billing"))
        .add_edge(START, "router");
    g.add_destinations("ghost", ["router"]);
    let message = invalid(g);
    assert!(
        message.contains("`ghost`") && message.contains("not a node"),
        "{message}"
    );

    let mut g = graph();
    g.add_node("router", hand_off("billing"))
        .add_edge(START, "router");
    g.add_destinations("router", ["billing"]);
    let message = invalid(g);
    assert!(
        message.contains("destination `billing` is not a node"),
        "{message}"
    );
}

#[tokio::test]
async fn a_node_with_no_way_in_compiles_and_never_runs() -> TestResult {
    let mut g = graph();
    g.add_node("a", visit("a"))
        .add_node("island", visit("island"))
        .add_edge(START, "a")
        .add_edge("a", END)
        .add_edge("island", END);
    assert_eq!(visited(g).await?, json!(["a"]));
    Ok(())
}

#[tokio::test]
async fn an_unknown_goto_target_fails_the_run_naming_it() -> TestResult {
    let mut g = graph();
    g.add_node("router", hand_off("ghost"))
        .add_edge(START, "router");
    match visited(g).await {
        Err(Error::InvalidUpdate(message)) => {
            assert!(
                message.contains("`router`") && message.contains("`ghost`"),
                "{message}"
            );
        }
        other => panic!("expected InvalidUpdate naming `ghost`, got {other:?}"),
    }

    // A `Send` to an unknown node too.
    let mut g = graph();
    g.add_node("router", |state: JsonState, _: Context| async move {
        Ok(Command::<JsonState>::default().and_goto(waypoint_runtime::Send::new("nowhere", state)))
    })
    .add_edge(START, "router");
    match visited(g).await {
        Err(Error::InvalidUpdate(message)) => {
            assert!(message.contains("`nowhere`"), "{message}");
        }
        other => panic!("expected InvalidUpdate naming `nowhere`, got {other:?}"),
    }
    Ok(())
}

#[test]
fn unknown_edge_targets_are_still_rejected() {
    let mut g = graph();
    g.add_node("router", hand_off("billing"))
        .add_edge(START, "router")
        .add_edge("router", "ghost");
    assert!(invalid(g).contains("`ghost`"));
}
