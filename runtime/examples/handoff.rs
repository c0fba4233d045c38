//! A multi-agent handoff (LangGraph's guide "Multi-agent Systems", Handoffs): two agents
//! built as subgraphs; the triage agent answers what it can and hands the rest to the math
//! agent with `Command.PARENT`, which the parent graph applies and follows.
//!
//! `cargo run -p waypoint-runtime --example handoff`

use std::sync::Arc;

use waypoint_checkpoint::InMemorySaver;
use waypoint_runtime::{
    BoxError, Command, CompileOptions, CompiledGraph, Context, Message, MessagesState,
    MessagesStateUpdate, RunConfig, START, StateGraph,
};

/// The triage agent: hands questions with numbers to `math`, answers the others itself.
async fn triage(state: Arc<MessagesState>, _: Context) -> Result<Command<MessagesState>, BoxError> {
    let question = state.messages.last().map(Message::text).unwrap_or_default();
    if question.chars().any(|c| c.is_ascii_digit()) {
        let note = Message::ai("Transferring you to the math agent.").with_name("triage");
        let update = MessagesStateUpdate::default().messages(vec![note]);
        // Out of this subgraph, to the parent's `math` node.
        return Ok(Command::to_parent("math").with_update(update));
    }
    let reply = Message::ai("I can only help with arithmetic.").with_name("triage");
    Ok(Command::update(
        MessagesStateUpdate::default().messages(vec![reply]),
    ))
}

/// The math agent: multiplies the two numbers of the human's last question.
async fn math(state: Arc<MessagesState>, _: Context) -> Result<MessagesStateUpdate, BoxError> {
    let question = state
        .messages
        .iter()
        .rev()
        .find(|m| m.kind() == "human")
        .map(Message::text)
        .unwrap_or_default();
    let numbers: Vec<i64> = question
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    let product: i64 = numbers.iter().product();
    let reply =
        Message::ai(format!("{} = {product}", question.trim_end_matches('?'))).with_name("math");
    Ok(MessagesStateUpdate::default().messages(vec![reply]))
}

/// One agent as a compiled one-node graph.
fn agent<F, Fut, R>(name: &str, node: F) -> waypoint_runtime::Result<CompiledGraph<MessagesState>>
where
    F: Fn(Arc<MessagesState>, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, BoxError>> + Send + 'static,
    R: Into<Command<MessagesState>> + 'static,
{
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node(name, node).add_edge(START, name);
    graph.compile(CompileOptions::default())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_subgraph("triage", agent("triage", triage)?)
        .add_subgraph("math", agent("math", math)?)
        .add_destinations("triage", ["math"])
        .add_edge(START, "triage");
    let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;

    let config = RunConfig::thread("handoff");
    for question in ["What is 6 x 7?", "Tell me a joke"] {
        let input = MessagesStateUpdate::default().messages(vec![Message::human(question)]);
        let before = graph.get_state(&config).await?.values.messages.len();
        let out = graph.invoke(Some(input), &config).await?;
        for message in &out.values.messages[before..] {
            let who = message.name().unwrap_or(message.kind());
            println!("{who:>7}: {}", message.text());
        }
    }
    let texts: Vec<String> = graph
        .get_state(&config)
        .await?
        .values
        .messages
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(
        texts,
        [
            "What is 6 x 7?",
            "Transferring you to the math agent.",
            "What is 6 x 7 = 42",
            "Tell me a joke",
            "I can only help with arithmetic.",
        ]
    );
    Ok(())
}
