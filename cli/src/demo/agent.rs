//! The demo's agent: a trip assistant on the runtime's `MessagesState`, with a rule-based
//! stand-in for the model.
//!
//! `START -> remember -> agent -> (book -> agent | END)`: `remember` keeps facts the user
//! states in the long-term store, `agent` answers (recalling facts by semantic search, or
//! proposing a hut booking as a tool call), and `book` asks a human to approve the booking
//! with an interrupt before it runs the tool.

use std::sync::Arc;

use serde_json::{Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::messages::ToolCall;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, Message, MessagesState, MessagesStateUpdate,
    NodeResult, START, StateGraph,
};
use waypoint_store::{IndexConfig, SearchOp, Store, StoreConfig, StoreExt};

/// The run-config key naming the user whose memories the agent reads and writes.
pub(crate) const USER: &str = "user_id";
/// The run-config key naming the demo run, so each run keeps its memories apart.
pub(crate) const RUN: &str = "demo_run";

/// The only tool: books a mountain hut.
pub(crate) const BOOK_HUT: &str = "book_hut";

/// Sentence openings (lower case) that state a fact worth remembering.
const FACT_OPENERS: [&str; 5] = ["i'm ", "i am ", "my name is ", "i love ", "i like "];
/// Openings of the facts that give the user's name.
const NAME_OPENERS: [&str; 3] = ["i'm ", "i am ", "my name is "];

/// Regions the model knows: a word to look for, and the hut and town it proposes there.
const REGIONS: [(&str, &str, &str); 2] = [
    ("alps", "Refuge du Gouter", "Chamonix"),
    ("dolomites", "Rifugio Lagazuoi", "Cortina"),
];

/// The store's settings: an index over each memory's `text` with the embedder of `index`.
pub(crate) fn store_config(index: IndexConfig) -> StoreConfig {
    StoreConfig::new().index(index.fields(["text"]))
}

/// The namespace holding `user`'s memories in demo run `run`.
pub(crate) fn memories(run: &str, user: &str) -> [String; 4] {
    ["demo".into(), run.into(), user.into(), "memories".into()]
}

/// Compiles the agent on `saver` and `store`.
pub(crate) fn build(
    saver: Arc<dyn CheckpointSaver>,
    store: Arc<dyn Store>,
) -> waypoint_runtime::Result<CompiledGraph<MessagesState>> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_node("remember", remember)
        .add_node("agent", agent)
        .add_node("book", book);
    graph
        .add_edge(START, "remember")
        .add_edge("remember", "agent")
        .add_conditional_edges("agent", route, ["book", END])
        .add_edge("book", "agent");
    graph.compile(CompileOptions::default().checkpointer(saver).store(store))
}

/// After `agent`: to `book` when it asked for a tool, else the turn is over.
fn route(state: &MessagesState) -> &'static str {
    match state.messages.last() {
        Some(last) if !last.tool_calls().is_empty() => "book",
        _ => END,
    }
}

/// The namespace of the memories of the run's user.
fn namespace(ctx: &Context) -> NodeResult<[String; 4]> {
    let key = |name: &str| {
        ctx.config()
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("run the agent with `{name}` in its config"))
    };
    Ok(memories(&key(RUN)?, &key(USER)?))
}

/// The text of the latest human message.
fn latest_human(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.kind() == "human")
        .map(Message::text)
        .unwrap_or_default()
}

/// The sentences of `text` that state a fact about the speaker.
pub(crate) fn facts(text: &str) -> Vec<&str> {
    text.split(['.', '!', '?'])
        .map(str::trim)
        .filter(|s| opener(s, &FACT_OPENERS).is_some())
        .collect()
}

/// The length of the opening of `sentence` (any case) found in `openers`.
fn opener(sentence: &str, openers: &[&str]) -> Option<usize> {
    let lower = sentence.to_lowercase();
    openers
        .iter()
        .find(|o| lower.starts_with(*o))
        .map(|o| o.len())
}

/// Stores each fact of the latest human message; a fact is its own key, so stating it again
/// keeps one memory.
async fn remember(state: MessagesState, ctx: Context) -> NodeResult<MessagesStateUpdate> {
    let said = latest_human(&state.messages);
    let facts = facts(&said);
    if !facts.is_empty() {
        let namespace = namespace(&ctx)?;
        let store = ctx.require_store()?;
        for fact in facts {
            store
                .put(
                    namespace.clone(),
                    &fact.to_lowercase(),
                    json!({"text": fact}),
                )
                .await?;
        }
    }
    Ok(MessagesStateUpdate::default())
}

/// Calls the model with the user's memory closest to what they just said.
async fn agent(state: MessagesState, ctx: Context) -> NodeResult<MessagesStateUpdate> {
    let query = latest_human(&state.messages);
    let hits = ctx
        .require_store()?
        .search(SearchOp::new(namespace(&ctx)?).query(query).limit(1))
        .await?;
    let memory = hits
        .first()
        .and_then(|hit| hit.item.value.get("text"))
        .and_then(Value::as_str);
    Ok(MessagesStateUpdate::default().messages(vec![model(&state.messages, memory)]))
}

/// The stand-in for the model: a few rules over the conversation and one recalled memory.
pub(crate) fn model(messages: &[Message], memory: Option<&str>) -> Message {
    if let Some(Message::Tool(result)) = messages.last() {
        return Message::ai(format!("Done: {}", result.content.text()));
    }
    let said = latest_human(messages);
    if said.to_lowercase().contains("book") {
        return propose_booking(messages);
    }
    let facts = facts(&said);
    if !facts.is_empty() {
        let name = facts
            .iter()
            .find_map(|f| opener(f, &NAME_OPENERS).map(|at| f[at..].trim()));
        return Message::ai(match name {
            Some(name) => format!("Nice to meet you, {name}! I will remember that."),
            None => String::from("Noted, I will remember that."),
        });
    }
    Message::ai(match memory {
        Some(memory) => format!("You told me: \"{memory}\"."),
        None => String::from("I don't know anything about you yet."),
    })
}

/// A booking in the region the conversation mentioned last, as a tool call.
fn propose_booking(messages: &[Message]) -> Message {
    let region = messages.iter().rev().find_map(|m| {
        let text = m.text().to_lowercase();
        REGIONS.iter().find(|(word, _, _)| text.contains(word))
    });
    let Some((_, hut, town)) = region else {
        return Message::ai("Where would you like to go?");
    };
    let mut message = Message::ai(format!("I can book a night at {hut} above {town}."));
    if let Message::Ai(ai) = &mut message {
        let args = json!({"hut": hut, "town": town, "nights": 1});
        ai.tool_calls.push(ToolCall::new("call-1", BOOK_HUT, args));
    }
    message
}

/// Asks the human to approve (or edit) the booking the agent asked for, then books it.
async fn book(state: MessagesState, ctx: Context) -> NodeResult<MessagesStateUpdate> {
    let Some(call) = state
        .messages
        .last()
        .and_then(|m| m.tool_calls().first())
        .cloned()
    else {
        return Ok(MessagesStateUpdate::default());
    };
    let decision = ctx.interrupt(json!({
        "action": call.name,
        "args": call.args,
        "description": "Approve this booking?",
    }))?;
    let result = match decision["action"].as_str() {
        Some("approve") => book_hut(&call.args),
        Some("edit") => {
            let mut args = call.args.clone();
            if let (Some(args), Some(edits)) = (args.as_object_mut(), decision["args"].as_object())
            {
                args.extend(edits.clone());
            }
            book_hut(&args)
        }
        _ => String::from("the booking was cancelled by the user."),
    };
    let id = call.id.unwrap_or_default();
    Ok(MessagesStateUpdate::default().messages(vec![Message::tool(id, result)]))
}

/// The tool itself: "books" the hut and says what was booked.
fn book_hut(args: &Value) -> String {
    let nights = args["nights"].as_u64().unwrap_or(1);
    format!(
        "booked {nights} night{} at {} ({}).",
        if nights == 1 { "" } else { "s" },
        args["hut"].as_str().unwrap_or("a hut"),
        args["town"].as_str().unwrap_or("somewhere"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_the_sentences_about_the_speaker() {
        let said = "Hi! I'm Alice. I love hiking in the Alps. What about you?";
        assert_eq!(facts(said), ["I'm Alice", "I love hiking in the Alps"]);
        assert!(facts("Where do I love to go hiking?").is_empty());
    }

    #[test]
    fn the_model_greets_recalls_and_books() {
        let hello = [Message::human("Hi! I'm Alice. I love hiking in the Alps.")];
        assert_eq!(
            model(&hello, None).text(),
            "Nice to meet you, Alice! I will remember that."
        );
        let ask = [Message::human("Where do I love to go hiking?")];
        assert_eq!(
            model(&ask, Some("I love hiking in the Alps")).text(),
            "You told me: \"I love hiking in the Alps\"."
        );
        assert_eq!(
            model(&ask, None).text(),
            "I don't know anything about you yet."
        );
        let trip = [
            Message::ai("You told me: \"I love hiking in the Dolomites\"."),
            Message::human("Book me a hut there."),
        ];
        let proposal = model(&trip, None);
        assert_eq!(proposal.tool_calls()[0].args["hut"], "Rifugio Lagazuoi");
    }

    #[test]
    fn the_tool_reports_what_it_booked() {
        let args = json!({"hut": "Refuge du Gouter", "town": "Chamonix", "nights": 2});
        assert_eq!(
            book_hut(&args),
            "booked 2 nights at Refuge du Gouter (Chamonix)."
        );
    }
}
