//! LangGraph's long-term memory pattern on Waypoint: a chatbot that remembers facts about a
//! user across threads. Facts live in the store under `(user_id, "memories")`, not in a
//! thread's state, so a new thread of the same user finds them and another user does not.
//!
//! The model is a deterministic stand-in (no LLM): `call_model` searches the user's memories
//! semantically with the latest message as the query and quotes the best match;
//! `write_memory` stores every sentence that starts with "my name is" or "I like".
//!
//! `cargo run -p waypoint-runtime --example memory_chatbot`

use std::sync::Arc;

use serde_json::json;
use waypoint_checkpoint::InMemorySaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, Message, MessagesState, MessagesStateUpdate,
    NodeResult, RunConfig, START, StateGraph,
};
use waypoint_store::{InMemoryStore, IndexConfig, SearchOp, Store, StoreConfig, StoreExt};

/// Sentences starting with one of these (any case) are facts worth remembering.
const FACT_OPENERS: [&str; 2] = ["my name is", "i like"];

/// The `user_id` key of the run's config.
fn user_id(ctx: &Context) -> Result<String, &'static str> {
    ctx.config()
        .configurable
        .get("user_id")
        .and_then(|id| id.as_str())
        .map(String::from)
        .ok_or("run the graph with a `user_id` in its config")
}

/// The text of the latest human message.
fn latest_human(state: &MessagesState) -> String {
    state
        .messages
        .iter()
        .rev()
        .find(|m| m.kind() == "human")
        .map(Message::text)
        .unwrap_or_default()
}

/// Replies with the memory closest in meaning to what the user just said.
async fn call_model(state: MessagesState, ctx: Context) -> NodeResult<MessagesStateUpdate> {
    let namespace = [user_id(&ctx)?, "memories".into()];
    let query = latest_human(&state);
    let found = ctx
        .require_store()?
        .search(SearchOp::new(namespace).query(query).limit(1))
        .await?;
    let reply = match found.first() {
        Some(hit) => format!(
            "I remember that you said: \"{}\".",
            hit.item.value["text"].as_str().unwrap_or_default()
        ),
        None => String::from("I don't remember anything about you yet."),
    };
    Ok(MessagesStateUpdate::default().messages(vec![Message::ai(reply)]))
}

/// Stores each fact of the latest message; the fact is its own key, so telling it twice
/// keeps one memory.
async fn write_memory(state: MessagesState, ctx: Context) -> NodeResult<MessagesStateUpdate> {
    let namespace = [user_id(&ctx)?, "memories".into()];
    let store = ctx.require_store()?;
    let said = latest_human(&state);
    let facts = said.split(['.', '!', '?']).map(str::trim).filter(|s| {
        let lower = s.to_lowercase();
        FACT_OPENERS.iter().any(|opener| lower.starts_with(opener))
    });
    for fact in facts {
        store
            .put(
                namespace.clone(),
                &fact.to_lowercase(),
                json!({"text": fact}),
            )
            .await?;
    }
    Ok(MessagesStateUpdate::default())
}

/// A store whose semantic index embeds each memory's `text` with the offline hashing embedder.
fn memory_store() -> waypoint_store::Result<Arc<dyn Store>> {
    let index = IndexConfig::hashing(256).fields(["text"]);
    Ok(Arc::new(InMemoryStore::with_config(
        StoreConfig::new().index(index),
    )?))
}

/// `START -> call_model -> write_memory -> END`, checkpointed in memory, with `store`.
fn build_graph(store: Arc<dyn Store>) -> waypoint_runtime::Result<CompiledGraph<MessagesState>> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_node("call_model", call_model)
        .add_node("write_memory", write_memory);
    graph
        .add_edge(START, "call_model")
        .add_edge("call_model", "write_memory")
        .add_edge("write_memory", END);
    graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()).store(store))
}

/// One turn: `user` says `text` on `thread`; returns the bot's reply.
async fn chat(
    graph: &CompiledGraph<MessagesState>,
    thread: &str,
    user: &str,
    text: &str,
) -> waypoint_runtime::Result<String> {
    let config = RunConfig::thread(thread).with("user_id", user);
    let input = MessagesStateUpdate::default().messages(vec![Message::human(text)]);
    let state = graph.invoke(Some(input), &config).await?;
    Ok(state.messages.last().map(Message::text).unwrap_or_default())
}

/// The conversation `main` runs: (thread, user, what the user says).
const SCRIPT: [(&str, &str, &str); 4] = [
    ("1", "alice", "Hi! My name is Alice. I like green tea."),
    ("2", "alice", "What is my name?"),
    ("2", "alice", "What do I like?"),
    ("3", "bob", "What is my name?"),
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = memory_store()?;
    let graph = build_graph(Arc::clone(&store))?;
    for (thread, user, text) in SCRIPT {
        let reply = chat(&graph, thread, user, text).await?;
        println!("thread {thread}, {user}: {text}\n  bot: {reply}");
    }
    for user in ["alice", "bob"] {
        let memories = store.search(SearchOp::new([user, "memories"])).await?;
        let texts: Vec<_> = memories
            .iter()
            .filter_map(|m| m.item.value["text"].as_str())
            .collect();
        println!("store ({user}, \"memories\"): {texts:?}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_new_thread_recalls_the_users_facts_and_other_users_see_none()
    -> Result<(), Box<dyn std::error::Error>> {
        let store = memory_store()?;
        let graph = build_graph(Arc::clone(&store))?;
        let first = chat(&graph, "1", "alice", SCRIPT[0].2).await?;
        assert_eq!(first, "I don't remember anything about you yet.");

        // A new thread starts with no messages; the facts come from the store.
        let name = chat(&graph, "2", "alice", "What is my name?").await?;
        assert_eq!(name, "I remember that you said: \"My name is Alice\".");
        let likes = chat(&graph, "2", "alice", "What do I like?").await?;
        assert_eq!(likes, "I remember that you said: \"I like green tea\".");

        let bob = chat(&graph, "3", "bob", "What is my name?").await?;
        assert_eq!(bob, "I don't remember anything about you yet.");
        assert!(!bob.contains("Alice"));

        assert_eq!(
            store
                .search(SearchOp::new(["alice", "memories"]))
                .await?
                .len(),
            2
        );
        assert!(
            store
                .search(SearchOp::new(["bob", "memories"]))
                .await?
                .is_empty()
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_run_without_user_id_fails_with_an_error() -> Result<(), Box<dyn std::error::Error>> {
        let graph = build_graph(memory_store()?)?;
        let input = MessagesStateUpdate::default().messages(vec![Message::human("hi")]);
        let Err(err) = graph.invoke(Some(input), &RunConfig::thread("1")).await else {
            return Err("a run without `user_id` succeeded".into());
        };
        assert!(matches!(&err, waypoint_runtime::Error::Node { node, .. } if node == "call_model"));
        Ok(())
    }
}
