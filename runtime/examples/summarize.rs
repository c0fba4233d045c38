//! LangGraph's "summarize the conversation" pattern on Waypoint: once a thread holds more
//! than six messages, a node folds all but the last two into a running summary and deletes
//! them with `Message::remove`, so the history stays short while the summary grows.
//!
//! The model and the summarizer are deterministic stand-ins (no LLM): the model echoes the
//! user and says how many messages it was given; the summarizer lists what the user said.
//!
//! `cargo run -p waypoint-runtime --example summarize`

use serde::{Deserialize, Serialize};
use waypoint_checkpoint::InMemorySaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, Message, NodeResult, RunConfig, START, State,
    StateGraph,
};

/// How many messages the thread may hold before it is summarized (LangGraph's docs use 6).
pub(crate) const MAX_MESSAGES: usize = 6;

/// What the user says, one turn each.
pub(crate) const TURNS: [&str; 7] = [
    "hi! I'm bob",
    "what's my name?",
    "i like the celtics!",
    "i like how much they win",
    "who is their best player?",
    "and their coach?",
    "thanks, bye",
];

/// `MessagesState` plus the summary of the messages deleted so far.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct ChatState {
    /// The recent conversation.
    #[reducer(add_messages)]
    pub(crate) messages: Vec<Message>,
    /// What the deleted messages said.
    pub(crate) summary: String,
}

/// The stand-in model: it sees the summary as a system message before the conversation,
/// as LangGraph's example passes it.
async fn conversation(state: ChatState, _: Context) -> NodeResult<ChatStateUpdate> {
    let mut context = Vec::new();
    if !state.summary.is_empty() {
        context.push(Message::system(format!(
            "Summary of conversation earlier: {}",
            state.summary
        )));
    }
    context.extend(state.messages.iter().cloned());
    let said = state
        .messages
        .iter()
        .rev()
        .find(|m| m.kind() == "human")
        .map(Message::text)
        .unwrap_or_default();
    let reply = format!("({} messages in context) you said {said:?}", context.len());
    Ok(ChatStateUpdate::default().messages(vec![Message::ai(reply)]))
}

/// Summarize once the thread is longer than [`MAX_MESSAGES`].
fn should_continue(state: &ChatState) -> &'static str {
    if state.messages.len() > MAX_MESSAGES {
        "summarize_conversation"
    } else {
        END
    }
}

/// Extends the summary with what the user said in all but the last two messages, and
/// deletes those messages.
async fn summarize_conversation(state: ChatState, _: Context) -> NodeResult<ChatStateUpdate> {
    let old = &state.messages[..state.messages.len().saturating_sub(2)];
    let said: Vec<String> = old
        .iter()
        .filter(|m| m.kind() == "human")
        .map(Message::text)
        .collect();
    let summary = match state.summary.as_str() {
        "" => format!("The user said: {}", said.join(" / ")),
        earlier => format!("{earlier} / {}", said.join(" / ")),
    };
    let removals = old
        .iter()
        .map(|m| {
            m.id()
                .map(Message::remove)
                .ok_or("a message in the state has no id")
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ChatStateUpdate::default()
        .summary(summary)
        .messages(removals))
}

/// `START -> conversation -> (summarize_conversation | END)`, checkpointed in memory.
pub(crate) fn build_graph() -> waypoint_runtime::Result<CompiledGraph<ChatState>> {
    let mut graph = StateGraph::<ChatState>::new();
    graph
        .add_node("conversation", conversation)
        .add_node("summarize_conversation", summarize_conversation);
    graph
        .add_edge(START, "conversation")
        .add_conditional_edges(
            "conversation",
            should_continue,
            ["summarize_conversation", END],
        )
        .add_edge("summarize_conversation", END);
    graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))
}

/// Runs one turn of the thread: the user says `text`.
pub(crate) async fn chat(
    graph: &CompiledGraph<ChatState>,
    config: &RunConfig,
    text: &str,
) -> waypoint_runtime::Result<ChatState> {
    let input = ChatStateUpdate::default().messages(vec![Message::human(text)]);
    Ok(graph.invoke(Some(input), config).await?.into_values())
}

fn show(state: &ChatState) {
    for message in &state.messages {
        println!("    {:<5} {}", message.kind(), message.text());
    }
    println!("    summary: {:?}", state.summary);
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let graph = build_graph()?;
    let config = RunConfig::thread("bob");
    for (turn, text) in TURNS.iter().enumerate() {
        let state = chat(&graph, &config, text).await?;
        println!(
            "turn {}: user says {text:?}; the thread holds {} messages",
            turn + 1,
            state.messages.len()
        );
        show(&state);
    }
    println!("thread \"bob\" as its latest checkpoint holds it:");
    show(&graph.get_state(&config).await?.values);
    Ok(())
}
