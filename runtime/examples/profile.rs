//! LangGraph's "profile" memory on Waypoint: one document per user, at `(user_id, "profile")`
//! key `main`, that a node updates in place on every turn by merging in the fields it learns,
//! so the store holds a single, current profile rather than a growing list of facts.
//!
//! The extractor is a deterministic stand-in for an LLM: it reads "my name is ...",
//! "I live in ..." / "I moved to ..." and "I work as ..." from the latest message.
//!
//! `cargo run -p waypoint-runtime --example profile`

use std::sync::Arc;

use serde_json::{Map, Value};
use waypoint_checkpoint::InMemorySaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, Message, MessagesState, MessagesStateUpdate,
    NodeResult, RunConfig, START, StateGraph,
};
use waypoint_store::{InMemoryStore, SearchOp, Store, StoreExt};

/// The key of the one profile document in each user's namespace.
const PROFILE_KEY: &str = "main";

/// Phrases (lower case) and the profile field the words after them fill.
const PATTERNS: [(&str, &str); 4] = [
    ("my name is ", "name"),
    ("i live in ", "city"),
    ("i moved to ", "city"),
    ("i work as ", "job"),
];

/// `(user_id, "profile")` for the run's `user_id`.
fn profile_namespace(ctx: &Context) -> Result<[String; 2], &'static str> {
    let user = ctx
        .config()
        .configurable
        .get("user_id")
        .and_then(Value::as_str);
    let user = user.ok_or("run the graph with a `user_id` in its config")?;
    Ok([user.to_string(), "profile".to_string()])
}

/// The fields stated in `text`, e.g. `{"city": "Paris"}` for "I live in Paris.".
fn extract_fields(text: &str) -> Map<String, Value> {
    let mut fields = Map::new();
    for sentence in text.split(['.', '!', '?', ',']) {
        // ASCII lower-casing keeps byte offsets, so a match indexes the original sentence.
        let lower = sentence.to_ascii_lowercase();
        for (phrase, field) in PATTERNS {
            if let Some(at) = lower.find(phrase) {
                let value = sentence[at + phrase.len()..].trim();
                fields.insert(field.into(), Value::String(value.into()));
            }
        }
    }
    fields
}

/// Merges the fields of the latest message into the stored profile (new values win).
async fn update_profile(state: MessagesState, ctx: Context) -> NodeResult<MessagesStateUpdate> {
    let namespace = profile_namespace(&ctx)?;
    let store = ctx.require_store()?;
    let said = state.messages.last().map(Message::text).unwrap_or_default();
    let learned = extract_fields(&said);
    if !learned.is_empty() {
        let mut profile = match store.get(namespace.clone(), PROFILE_KEY).await? {
            Some(item) => Arc::unwrap_or_clone(item.value),
            None => Map::new(),
        };
        profile.extend(learned);
        store
            .put(namespace, PROFILE_KEY, Value::Object(profile))
            .await?;
    }
    Ok(MessagesStateUpdate::default())
}

/// Replies with the profile as it now stands.
async fn respond(_: MessagesState, ctx: Context) -> NodeResult<MessagesStateUpdate> {
    let namespace = profile_namespace(&ctx)?;
    let profile = ctx.require_store()?.get(namespace, PROFILE_KEY).await?;
    let reply = match profile {
        Some(item) => format!(
            "What I know about you: {}",
            Value::Object(Arc::unwrap_or_clone(item.value))
        ),
        None => String::from("I don't know anything about you yet."),
    };
    Ok(MessagesStateUpdate::default().messages(vec![Message::ai(reply)]))
}

/// `START -> update_profile -> respond -> END`, checkpointed in memory, with `store`.
fn build_graph(store: Arc<dyn Store>) -> waypoint_runtime::Result<CompiledGraph<MessagesState>> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_node("update_profile", update_profile)
        .add_node("respond", respond);
    graph
        .add_edge(START, "update_profile")
        .add_edge("update_profile", "respond")
        .add_edge("respond", END);
    graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()).store(store))
}

/// The turns `main` runs, all from user "alice": (thread, what she says).
const TURNS: [(&str, &str); 4] = [
    ("1", "Hi! My name is Alice."),
    ("1", "I live in Paris, and I work as a pilot."),
    ("2", "Good news: I moved to Lyon!"),
    ("2", "Actually, my name is Alice Martin."),
];

/// Runs every turn of [`TURNS`] for "alice"; returns the replies.
async fn run_turns(graph: &CompiledGraph<MessagesState>) -> waypoint_runtime::Result<Vec<String>> {
    let mut replies = Vec::new();
    for (thread, text) in TURNS {
        let config = RunConfig::thread(thread).with("user_id", "alice");
        let input = MessagesStateUpdate::default().messages(vec![Message::human(text)]);
        let state = graph.invoke(Some(input), &config).await?;
        replies.push(state.messages.last().map(Message::text).unwrap_or_default());
    }
    Ok(replies)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let graph = build_graph(Arc::clone(&store))?;
    for ((thread, text), reply) in TURNS.iter().zip(run_turns(&graph).await?) {
        println!("thread {thread}, alice: {text}\n  bot: {reply}");
    }
    let items = store.search(SearchOp::new(["alice", "profile"])).await?;
    println!("(\"alice\", \"profile\") holds {} item(s):", items.len());
    for hit in items {
        println!(
            "  {} = {}",
            hit.item.key,
            Value::Object(Arc::unwrap_or_clone(hit.item.value))
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn the_profile_is_one_document_merged_in_place() -> Result<(), Box<dyn std::error::Error>>
    {
        let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
        let graph = build_graph(Arc::clone(&store))?;
        let replies = run_turns(&graph).await?;
        assert_eq!(replies[0], r#"What I know about you: {"name":"Alice"}"#);

        let items = store.search(SearchOp::new(["alice", "profile"])).await?;
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].item.key, PROFILE_KEY);
        let expected = json!({"name": "Alice Martin", "city": "Lyon", "job": "a pilot"});
        assert_eq!(Value::Object((*items[0].item.value).clone()), expected);
        Ok(())
    }

    #[test]
    fn extract_fields_reads_each_phrase() {
        let fields = extract_fields("I live in Paris, and I work as a pilot.");
        assert_eq!(
            Value::Object(fields),
            json!({"city": "Paris", "job": "a pilot"})
        );
        assert!(extract_fields("What a nice day").is_empty());
    }
}
