//! LangGraph's graph API on every saver (issue 21 items 6, 10 and 13): a node reached only
//! through `Command::goto` pauses and resumes, its interrupt showing LangGraph 0.x's fields;
//! `add_messages` (with `format="langchain-openai"`) folds a JSON state's messages by id
//! across runs of a thread.

use std::sync::Arc;

use serde_json::{Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    Command, CompileOptions, CompiledGraph, Context, JsonSchema, JsonState, MessagesFormat,
    RunConfig, START, StateGraph,
};

use crate::{TestResult, obj, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// `router` hands off to `billing` with a `Command` (no edge, no declared destination
/// leads there); `billing` asks a human.
fn handoff_graph(saver: Saver) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut g = StateGraph::json(JsonSchema::new().append("log").last_value("answer"));
    g.add_node("router", |_: JsonState, _: Context| async {
        Ok(Command::update(obj(json!({"log": ["router"]}))).and_goto("billing"))
    })
    .add_node("billing", |_: JsonState, ctx: Context| async move {
        let answer = ctx.interrupt("refund?")?;
        Ok(Command::update(obj(
            json!({"log": ["billing"], "answer": answer}),
        )))
    })
    .add_edge(START, "router");
    g.compile(CompileOptions::default().checkpointer(saver))
}

/// A node reached only by `goto` runs, pauses and resumes from the saver; its interrupt is
/// `during` and resumable, with no `ns` (LangGraph >= 0.6 keeps only its hash, the id).
pub async fn goto_only_node_pauses_and_resumes(saver: Saver) -> TestResult {
    let graph = handoff_graph(saver)?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert!(out.interrupted);
    let snapshot = graph.get_state(&config).await?;
    assert_eq!(snapshot.next, vec!["billing"]);
    for interrupt in out.interrupts.iter().chain(&snapshot.interrupts) {
        assert_eq!(interrupt.value, json!("refund?"));
        assert_eq!(interrupt.when(), "during");
        assert!(interrupt.resumable());
        assert_eq!(interrupt.ns(), None);
    }
    assert_eq!(snapshot.interrupts, out.interrupts);
    let out = graph.invoke(Command::resume("yes"), &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("log"), Some(&json!(["router", "billing"])));
    assert_eq!(out.get("answer"), Some(&json!("yes")));
    Ok(())
}

/// A JSON-state graph whose `chatbot` appends the input `reply` as an AI message with id
/// `reply_id`.
fn chat_graph(saver: Saver) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let schema = JsonSchema::new()
        .messages_as("messages", MessagesFormat::LangChainOpenAi)
        .last_value("reply");
    let mut g = StateGraph::json(schema);
    g.add_node("chatbot", |state: JsonState, _: Context| async move {
        let reply = state.get("reply").cloned().unwrap_or(Value::Null);
        Ok(obj(
            json!({"messages": [{"role": "assistant", "content": reply, "id": "bot"}]}),
        ))
    })
    .add_edge(START, "chatbot");
    g.compile(CompileOptions::default().checkpointer(saver))
}

/// Seed 003's replace-by-id across runs of a thread, with the OpenAI format: the user's
/// image turns into an `image_url` block, the bot's reply keeps its id and is replaced in
/// place by the next run, and a remove by id deletes; a fresh graph reads it all back.
pub async fn json_messages_fold_by_id_across_runs(saver: Saver) -> TestResult {
    let config = RunConfig::thread(thread());
    let graph = chat_graph(Arc::clone(&saver))?;
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}});
    graph
        .invoke(
            Some(obj(json!({
                "messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, image], "id": "u1"}],
                "reply": "A cat.",
            }))),
            &config,
        )
        .await?;
    let out = graph
        .invoke(
            Some(obj(
                json!({"messages": [["user", "Sure?"]], "reply": "A small cat."}),
            )),
            &config,
        )
        .await?;
    let messages = out.get("messages").ok_or("no messages")?;
    let list = messages.as_array().ok_or("a list")?;
    assert_eq!(list.len(), 3, "{messages}");
    assert_eq!(list[0]["id"], json!("u1"));
    assert_eq!(
        list[0]["content"],
        json!([{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}])
    );
    assert_eq!(
        (&list[1]["type"], &list[1]["content"]),
        (&json!("ai"), &json!("A small cat."))
    );
    assert_eq!(list[1]["id"], json!("bot"), "replaced in place, by id");
    assert_eq!(
        (&list[2]["type"], &list[2]["content"]),
        (&json!("human"), &json!("Sure?"))
    );

    let out = graph
        .invoke(
            Some(obj(
                json!({"messages": [{"type": "remove", "id": "u1"}], "reply": "Yes."}),
            )),
            &config,
        )
        .await?;
    let ids: Vec<&Value> = out
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("a list")?
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], &json!("bot"));

    let reread = chat_graph(saver)?.get_state(&config).await?;
    assert_eq!(reread.values.get("messages"), out.get("messages"));
    Ok(())
}
