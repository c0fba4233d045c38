//! LangGraph's persistence walkthrough on Waypoint: run a two-node graph on a thread, read
//! its history, update the state, fork from a past checkpoint and replay from it.
//!
//! `cargo run --release -p waypoint-runtime --example time_travel`

use serde::{Deserialize, Serialize};
use waypoint_checkpoint::InMemorySaver;
use waypoint_runtime::{
    CompileOptions, Context, END, ListOptions, NodeResult, RunConfig, START, State, StateGraph,
    StateSnapshot,
};

/// `foo` keeps the last value; `bar` appends.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Demo {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

async fn node_a(_: Demo, _: Context) -> NodeResult<DemoUpdate> {
    Ok(DemoUpdate::default().foo("a").bar(vec!["a".into()]))
}

async fn node_b(_: Demo, _: Context) -> NodeResult<DemoUpdate> {
    Ok(DemoUpdate::default().foo("b").bar(vec!["b".into()]))
}

fn show(snapshot: &StateSnapshot<Demo>) {
    println!(
        "  step {:>2} {:<6} next {:<12} foo={:?} bar={:?}",
        snapshot.metadata.step.unwrap_or_default(),
        snapshot
            .metadata
            .source
            .map(|s| format!("{s:?}").to_lowercase())
            .unwrap_or_default(),
        format!("{:?}", snapshot.next),
        snapshot.values.foo,
        snapshot.values.bar,
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut graph = StateGraph::<Demo>::new();
    graph.add_node("node_a", node_a).add_node("node_b", node_b);
    graph
        .add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;

    let config = RunConfig::thread("1");
    graph
        .invoke(Some(DemoUpdate::default().foo("")), &config)
        .await?;
    println!("history of thread 1, newest first:");
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    history.iter().for_each(show);

    println!("update_state({{foo: \"x\", bar: [\"x\"]}}) as node_a: node_b runs next");
    graph
        .update_state(
            &config,
            Some(DemoUpdate::default().foo("x").bar(vec!["x".into()])),
            Some("node_a"),
        )
        .await?;
    show(&graph.get_state(&config).await?);

    let after_a = history
        .iter()
        .find(|s| s.next == ["node_b"])
        .ok_or("no checkpoint before node_b")?;
    println!("replay from the checkpoint after node_a (node_a does not run again):");
    let replayed = graph.invoke(None, &after_a.config).await?;
    println!("  foo={:?} bar={:?}", replayed.foo, replayed.bar);
    println!(
        "thread 1 now holds {} checkpoints across its branches",
        graph
            .get_state_history(&config, &ListOptions::default())
            .await?
            .len()
    );
    Ok(())
}
