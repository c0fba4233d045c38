//! The runtime workload (as `benches/peers/langgraph_runtime.py`): a 10-node linear graph
//! whose nodes each append one small message to `messages`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, NodeResult, START, State, StateGraph,
};

/// Nodes in the linear graph.
pub const NODES: usize = 10;
/// Invocations per measurement.
pub const INVOCATIONS: usize = 200;
/// Super-steps per invocation: the start step plus one per node.
pub const STEPS_PER_INVOCATION: usize = NODES + 1;
/// Invocations on the thread read by the history benchmark (12 checkpoints each: 600).
pub const HISTORY_INVOCATIONS: usize = 50;

/// Invocations on the thread the fork benchmark forks (12 checkpoints each: 300).
pub const FORK_INVOCATIONS: usize = 25;
/// The node a fork's update is applied as: the fork resumes at the next node, `n5`.
pub const FORK_AS_NODE: &str = "n4";

/// One chat message, as the Python peer's plain dicts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Msg {
    /// `user` or `ai`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// The benchmark's state: one appended list of messages.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Chat {
    /// The conversation.
    #[reducer(append)]
    pub messages: Vec<Msg>,
}

/// The input of one invocation: one user message.
pub fn input() -> ChatUpdate {
    ChatUpdate::default().messages(vec![Msg {
        role: "user".into(),
        content: "hi".into(),
    }])
}

/// The update of a fork: one user message.
pub fn fork_update() -> ChatUpdate {
    ChatUpdate::default().messages(vec![Msg {
        role: "user".into(),
        content: "fork".into(),
    }])
}

/// The 10-node graph on `saver`.
pub fn graph(saver: Arc<dyn CheckpointSaver>) -> waypoint_runtime::Result<CompiledGraph<Chat>> {
    let mut graph = StateGraph::<Chat>::new();
    let names: Vec<String> = (0..NODES).map(|i| format!("n{i}")).collect();
    for name in &names {
        let content = name.clone();
        // Nodes share the state (`Arc`) rather than copy the growing message list.
        graph.add_node(name.clone(), move |_state: Arc<Chat>, _ctx: Context| {
            let message = Msg {
                role: "ai".into(),
                content: content.clone(),
            };
            std::future::ready(NodeResult::Ok(
                ChatUpdate::default().messages(vec![message]),
            ))
        });
    }
    graph.add_edge(START, names[0].clone());
    for pair in names.windows(2) {
        graph.add_edge(pair[0].clone(), pair[1].clone());
    }
    graph.add_edge(names[NODES - 1].clone(), END);
    graph.compile(CompileOptions::default().checkpointer(saver))
}
