//! LangGraph's procedural memory on Waypoint: an agent whose instructions (its system prompt)
//! live in the store at `("agent", "instructions")`, read by the reply node on every turn and
//! rewritten by a feedback node when the user asks for another tone. The change outlives the
//! thread it was asked in: the next thread starts with the new instructions.
//!
//! The model and the prompt rewriter are deterministic stand-ins (no LLM): the model answers
//! in the tone its system prompt names; the rewriter turns "please be more X" into
//! "Answer in a X tone.".
//!
//! `cargo run -p waypoint-runtime --example instructions`

use std::sync::Arc;

use serde_json::json;
use waypoint_checkpoint::InMemorySaver;
use waypoint_runtime::{
    BoxError, CompileOptions, CompiledGraph, Context, END, Message, MessagesState,
    MessagesStateUpdate, NodeResult, RunConfig, StateGraph,
};
use waypoint_store::{InMemoryStore, Store, StoreExt};

/// Where the instructions live, and under which key.
const NAMESPACE: [&str; 2] = ["agent", "instructions"];
const KEY: &str = "agent_a";

/// How feedback starts; the word after it is the tone asked for.
const FEEDBACK: &str = "please be more ";

/// A store holding the first instructions.
async fn seeded_store() -> waypoint_store::Result<Arc<dyn Store>> {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let first = json!({"instructions": "Answer in a casual tone."});
    store.put(NAMESPACE, KEY, first).await?;
    Ok(store)
}

/// The stored instructions.
async fn instructions(store: &Arc<dyn Store>) -> NodeResult<String> {
    let item = store.get(NAMESPACE, KEY).await?;
    let item = item.ok_or("no instructions in the store: seed them first")?;
    let text = item.value["instructions"]
        .as_str()
        .ok_or("instructions are not text")?;
    Ok(text.to_string())
}

/// The tone the latest message asks for, if it is feedback.
fn requested_tone(state: &MessagesState) -> Option<String> {
    let said = state.messages.last()?.text().to_lowercase();
    let rest = said.strip_prefix(FEEDBACK)?;
    let tone = rest.split(|c: char| !c.is_alphanumeric()).next()?;
    (!tone.is_empty()).then(|| tone.to_string())
}

/// The stand-in model: answers the last message in the tone the system prompt names.
fn model(messages: &[Message]) -> String {
    let system = messages.first().map(Message::text).unwrap_or_default();
    let question = messages.last().map(Message::text).unwrap_or_default();
    if system.contains("formal") {
        format!("Good day. Regarding \"{question}\": I would be glad to assist you.")
    } else {
        format!("hey! \"{question}\"? sure, happy to help")
    }
}

/// Replies with the stored instructions as the system prompt.
async fn call_model(state: MessagesState, ctx: Context) -> NodeResult<MessagesStateUpdate> {
    let system = Message::system(instructions(ctx.require_store()?).await?);
    let prompt: Vec<Message> = std::iter::once(system).chain(state.messages).collect();
    let reply = Message::ai(model(&prompt));
    Ok(MessagesStateUpdate::default().messages(vec![reply]))
}

/// Rewrites the stored instructions from the user's feedback.
async fn update_instructions(
    state: MessagesState,
    ctx: Context,
) -> NodeResult<MessagesStateUpdate> {
    let tone = requested_tone(&state).ok_or("the latest message is not feedback")?;
    let rewritten = format!("Answer in a {tone} tone.");
    let store = ctx.require_store()?;
    store
        .put(NAMESPACE, KEY, json!({"instructions": rewritten}))
        .await?;
    let ack = format!("Understood. My instructions are now: {rewritten}");
    Ok(MessagesStateUpdate::default().messages(vec![Message::ai(ack)]))
}

/// Feedback goes to `update_instructions`, anything else to `call_model`; both then end.
fn route(state: &MessagesState) -> &'static str {
    match requested_tone(state) {
        Some(_) => "update_instructions",
        None => "call_model",
    }
}

/// The graph, checkpointed in memory, with `store`.
fn build_graph(store: Arc<dyn Store>) -> waypoint_runtime::Result<CompiledGraph<MessagesState>> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_node("call_model", call_model)
        .add_node("update_instructions", update_instructions);
    graph
        .set_conditional_entry_point(route, ["call_model", "update_instructions"])
        .add_edge("call_model", END)
        .add_edge("update_instructions", END);
    graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()).store(store))
}

/// One turn on `thread`; returns the agent's reply.
async fn chat(
    graph: &CompiledGraph<MessagesState>,
    thread: &str,
    text: &str,
) -> waypoint_runtime::Result<String> {
    let input = MessagesStateUpdate::default().messages(vec![Message::human(text)]);
    let state = graph
        .invoke(Some(input), &RunConfig::thread(thread))
        .await?;
    Ok(state.messages.last().map(Message::text).unwrap_or_default())
}

/// The conversation `main` runs: (thread, what the user says).
const SCRIPT: [(&str, &str); 3] = [
    ("1", "Can you check my order?"),
    ("1", "Please be more formal."),
    ("2", "Can you check my order?"),
];

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let store = seeded_store().await?;
    let graph = build_graph(Arc::clone(&store))?;
    println!("instructions: {:?}", instructions(&store).await?);
    for (thread, text) in SCRIPT {
        let reply = chat(&graph, thread, text).await?;
        println!("thread {thread}, user: {text}\n  agent: {reply}");
    }
    println!("instructions: {:?}", instructions(&store).await?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn feedback_rewrites_the_instructions_the_next_thread_follows() -> Result<(), BoxError> {
        let store = seeded_store().await?;
        let graph = build_graph(Arc::clone(&store))?;
        let before = chat(&graph, "1", "Can you check my order?").await?;
        assert_eq!(
            before,
            "hey! \"Can you check my order?\"? sure, happy to help"
        );

        chat(&graph, "1", "Please be more formal.").await?;
        assert_eq!(instructions(&store).await?, "Answer in a formal tone.");

        // A new thread has no messages of the old one: only the store carries the change.
        let after = chat(&graph, "2", "Can you check my order?").await?;
        assert_eq!(
            after,
            "Good day. Regarding \"Can you check my order?\": I would be glad to assist you."
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_graph_without_a_store_fails_with_an_error() -> Result<(), BoxError> {
        let mut graph = StateGraph::<MessagesState>::new();
        graph.add_node("call_model", call_model);
        graph
            .set_entry_point("call_model")
            .add_edge("call_model", END);
        let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;
        let Err(waypoint_runtime::Error::Node { node, source }) = chat(&graph, "1", "hi").await
        else {
            return Err("a graph without a store answered".into());
        };
        assert_eq!(node, "call_model");
        assert!(matches!(
            source.downcast_ref(),
            Some(waypoint_runtime::Error::InvalidConfig(_))
        ));
        Ok(())
    }
}
