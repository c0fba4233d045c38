//! `compile` refuses malformed graphs with clear errors.

use serde_json::{Map, Value};
use waypoint_runtime::{
    CompileOptions, Context, END, Error, JsonSchema, JsonState, NodeResult, START, StateGraph,
};

async fn noop(_: JsonState, _: Context) -> NodeResult<Map<String, Value>> {
    Ok(Map::new())
}

fn graph() -> StateGraph<JsonState> {
    StateGraph::json(JsonSchema::new().last_value("x"))
}

fn invalid(graph: StateGraph<JsonState>) -> String {
    match graph.compile(CompileOptions::default()) {
        Err(Error::InvalidGraph(message)) => message,
        other => panic!("expected InvalidGraph, got {other:?}"),
    }
}

#[test]
fn edge_to_unknown_node_is_rejected() {
    let mut g = graph();
    g.add_node("a", noop)
        .add_edge(START, "a")
        .add_edge("a", "ghost");
    assert!(invalid(g).contains("`ghost`"));
}

#[test]
fn edge_from_unknown_node_is_rejected() {
    let mut g = graph();
    g.add_node("a", noop)
        .add_edge(START, "a")
        .add_edge("ghost", "a");
    assert!(invalid(g).contains("`ghost`"));
}

#[test]
fn mapped_branch_to_unknown_node_is_rejected() {
    let mut g = graph();
    g.add_node("a", noop).add_edge(START, "a");
    g.add_conditional_edges("a", |_: &JsonState| "x", [("x", "ghost")]);
    assert!(invalid(g).contains("`ghost`"));
}

#[test]
fn a_node_without_incoming_edges_compiles() {
    // As in LangGraph: a `Command` may reach it (see compile_goto.rs).
    let mut g = graph();
    g.add_node("a", noop).add_node("island", noop);
    g.add_edge(START, "a")
        .add_edge("a", END)
        .add_edge("island", END);
    assert!(g.compile(CompileOptions::default()).is_ok());
}

#[test]
fn missing_entry_point_is_rejected() {
    let mut g = graph();
    g.add_node("a", noop).add_edge("a", END);
    assert!(invalid(g).contains("entry point"));
}

#[test]
fn duplicate_and_reserved_names_are_rejected() {
    let mut g = graph();
    g.add_node("a", noop)
        .add_node("a", noop)
        .add_edge(START, "a");
    assert!(invalid(g).contains("twice"));
    for bad in [START, END, "", "branch:to:x"] {
        let mut g = graph();
        g.add_node(bad, noop).add_edge(START, END);
        assert!(invalid(g).contains("not a valid node name"), "{bad:?}");
    }
}

#[test]
fn edges_into_start_or_out_of_end_are_rejected() {
    let mut g = graph();
    g.add_node("a", noop)
        .add_edge(START, "a")
        .add_edge("a", START);
    assert!(invalid(g).contains("START"));
    let mut g = graph();
    g.add_node("a", noop)
        .add_edge(START, "a")
        .add_edge(END, "a");
    assert!(invalid(g).contains("END"));
}

#[test]
fn unmapped_router_and_declared_destinations_compile() {
    let mut g = graph();
    g.add_node("a", noop)
        .add_node("b", noop)
        .add_edge(START, "a");
    g.add_conditional_edges("a", |_: &JsonState| END, ());
    assert!(g.compile(CompileOptions::default()).is_ok());

    let mut g = graph();
    g.add_node("a", noop)
        .add_node("b", noop)
        .add_edge(START, "a");
    g.add_destinations("a", ["b"]);
    assert!(g.compile(CompileOptions::default()).is_ok());
}

#[test]
fn interrupt_nodes_must_exist() {
    let mut g = graph();
    g.add_node("a", noop).add_edge(START, "a");
    let options = CompileOptions {
        interrupt_before: vec!["ghost".into()],
        ..CompileOptions::default()
    };
    assert!(matches!(g.compile(options), Err(Error::InvalidGraph(_))));
}
