//! Conversations in graph state: `add_messages` through checkpoints, delta history and forks.

use std::sync::Arc;

use waypoint_checkpoint::{CheckpointSaver, ListOptions};
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, DeltaPolicy, Message, MessagesState,
    MessagesStateUpdate, RunConfig, START, StateGraph,
};

use crate::{TestResult, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// A chatbot that answers each turn, and every third turn also edits its previous answer by
/// id and removes the oldest message: the fold is not a plain append.
fn chatbot(
    saver: &Saver,
    delta: DeltaPolicy,
) -> waypoint_runtime::Result<CompiledGraph<MessagesState>> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node(
        "chat",
        |state: Arc<MessagesState>, _ctx: Context| async move {
            let turn = state.messages.len();
            let mut update = vec![Message::ai(format!("answer at {turn}"))];
            if turn.is_multiple_of(3) && turn >= 3 {
                let last_ai = state.messages.iter().rev().find(|m| m.kind() == "ai");
                if let Some(id) = last_ai.and_then(Message::id) {
                    update.push(Message::ai("an edited answer").with_id(id));
                }
                if let Some(id) = state.messages.first().and_then(Message::id) {
                    update.push(Message::remove(id));
                }
            }
            Ok::<_, waypoint_runtime::BoxError>(MessagesStateUpdate::default().messages(update))
        },
    );
    graph.add_edge(START, "chat");
    let options = CompileOptions {
        delta,
        ..CompileOptions::default()
    };
    graph.compile(options.checkpointer(Arc::clone(saver)))
}

/// With deltas (snapshots now and then) and without, every checkpoint of the thread holds
/// the same conversation, ids included; a fork from the middle continues alike.
pub async fn add_messages_history_matches_full_values(saver: Saver) -> TestResult {
    let frequent = DeltaPolicy {
        min_snapshot_bytes: 400,
        ..DeltaPolicy::default()
    };
    let (delta, full) = (
        chatbot(&saver, frequent)?,
        chatbot(&saver, DeltaPolicy::off())?,
    );
    let (on, off) = (RunConfig::thread(thread()), RunConfig::thread(thread()));
    for turn in 0..10 {
        let input =
            MessagesStateUpdate::default().messages(vec![Message::human(format!("turn {turn}"))]);
        delta.invoke(Some(input.clone()), &on).await?;
        full.invoke(Some(input), &off).await?;
    }
    let history_on = delta
        .get_state_history(&on, &ListOptions::default())
        .await?;
    let history_off = full
        .get_state_history(&off, &ListOptions::default())
        .await?;
    let values = |h: &[waypoint_runtime::StateSnapshot<MessagesState>]| {
        h.iter()
            .map(|s| s.values.messages.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(values(&history_on), values(&history_off));
    let latest = &history_on[0].values.messages;
    assert!(latest.iter().any(|m| m.text() == "an edited answer"));
    assert!(latest.iter().all(|m| m.id().is_some()));
    assert!(
        !latest.iter().any(|m| m.text() == "turn 0"),
        "the oldest was removed"
    );
    for snapshot in history_on.iter().step_by(5) {
        let alone = delta.get_state(&snapshot.config).await?;
        assert_eq!(alone.values.messages, snapshot.values.messages);
    }
    let fork = |graph: &CompiledGraph<MessagesState>, at: &RunConfig| {
        let graph = graph.clone();
        let at = at.clone();
        async move {
            let update = MessagesStateUpdate::default().messages(vec![Message::human("forked")]);
            let config = graph.update_state(&at, Some(update), Some(START)).await?;
            graph
                .invoke(None, &config)
                .await
                .map(|o| o.values.messages.clone())
        }
    };
    let a = fork(&delta, &history_on[history_on.len() / 2].config).await?;
    let b = fork(&full, &history_off[history_off.len() / 2].config).await?;
    assert_eq!(a, b);
    Ok(())
}

/// Two nodes in one step stream their replies token by token, interleaved; a consumer that
/// adds up chunks by message id rebuilds exactly the two replies the state holds, each
/// tagged with its node, step and namespace.
pub async fn streamed_replies_rebuild_by_id(saver: Saver) -> TestResult {
    use futures::StreamExt;
    use std::collections::BTreeMap;
    use waypoint_runtime::messages::AiMessageChunk;
    use waypoint_runtime::{StreamMode, StreamPart};

    let mut graph = StateGraph::<MessagesState>::new();
    for (name, words) in [
        ("poet", ["roses ", "are ", "red"]),
        ("critic", ["too ", "short ", "!"]),
    ] {
        graph.add_node(
            name,
            move |_s: Arc<MessagesState>, ctx: Context| async move {
                let id = format!("reply-{name}");
                for word in words {
                    ctx.stream_message(AiMessageChunk::new(word).with_id(id.clone()));
                    // Let the other node's tokens interleave with these.
                    tokio::task::yield_now().await;
                }
                let reply = Message::ai(words.concat()).with_id(id).with_name(name);
                Ok::<_, waypoint_runtime::BoxError>(
                    MessagesStateUpdate::default().messages(vec![reply]),
                )
            },
        );
        graph.add_edge(START, name);
    }
    let graph = graph.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let config = RunConfig::thread(thread());
    let input = MessagesStateUpdate::default().messages(vec![Message::human("a poem?")]);
    let mut stream = Box::pin(graph.stream(Some(input), &config, &[StreamMode::Messages]));
    let mut by_id: BTreeMap<String, AiMessageChunk> = BTreeMap::new();
    let mut nodes: BTreeMap<String, String> = BTreeMap::new();
    while let Some(part) = stream.next().await {
        let StreamPart::Messages { chunk, metadata } = part? else {
            panic!("only the messages mode was asked for");
        };
        assert_eq!((metadata.step, metadata.namespace.as_str()), (1, ""));
        let id = metadata.id.clone().ok_or("every chunk has an id")?;
        nodes.insert(id.clone(), metadata.node.clone());
        let merged = by_id.remove(&id).map_or(chunk.clone(), |sum| sum + chunk);
        by_id.insert(id, merged);
    }
    assert_eq!(by_id.len(), 2, "two replies, not one merged blob");
    assert_eq!(nodes["reply-poet"], "poet");
    assert_eq!(nodes["reply-critic"], "critic");
    let state = graph.get_state(&config).await?;
    for (id, chunk) in by_id {
        let rebuilt = chunk.into_message()?;
        let stored = state
            .values
            .messages
            .iter()
            .find(|m| m.id() == Some(id.as_str()))
            .ok_or("the reply is in the state")?;
        assert_eq!(rebuilt.text(), stored.text());
    }
    Ok(())
}

/// LangGraph's review-a-tool-call pattern: the graph pauses before the tool runs, a human
/// edits the pending tool call by putting a message with the same id through
/// `update_state`, and the tool then runs with the edited arguments; the conversation keeps
/// one AI message, edited in place.
pub async fn human_review_edits_the_last_message_by_id(saver: Saver) -> TestResult {
    use serde_json::json;
    use waypoint_runtime::messages::{AiMessage, ToolCall};

    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node(
        "agent",
        |_s: Arc<MessagesState>, _ctx: Context| async move {
            let call = ToolCall::new("call-1", "book_flight", json!({"to": "SFO"}));
            let ask = Message::Ai(AiMessage {
                content: "booking".into(),
                tool_calls: vec![call],
                ..AiMessage::default()
            })
            .with_id("ai-1");
            Ok::<_, waypoint_runtime::BoxError>(MessagesStateUpdate::default().messages(vec![ask]))
        },
    );
    graph.add_node(
        "tools",
        |state: Arc<MessagesState>, _ctx: Context| async move {
            let last = state.messages.last().ok_or("a message to answer")?;
            let call = last.tool_calls().first().ok_or("a tool call to run")?;
            let done = Message::tool(
                call.id.clone().unwrap_or_default(),
                format!("booked to {}", call.args["to"]),
            );
            Ok::<_, waypoint_runtime::BoxError>(MessagesStateUpdate::default().messages(vec![done]))
        },
    );
    graph.add_edge(START, "agent").add_edge("agent", "tools");
    let options = CompileOptions {
        interrupt_before: vec!["tools".into()],
        ..CompileOptions::default()
    };
    let graph = graph.compile(options.checkpointer(Arc::clone(&saver)))?;
    let config = RunConfig::thread(thread());
    let input = MessagesStateUpdate::default().messages(vec![Message::human("fly me")]);
    let paused = graph.invoke(Some(input), &config).await?;
    assert!(paused.interrupted);
    let state = graph.get_state(&config).await?;
    assert_eq!(state.next, ["tools"]);

    // The reviewer edits the pending call: same message id, new arguments.
    let mut edited = state
        .values
        .messages
        .last()
        .cloned()
        .ok_or("the AI message")?;
    if let Message::Ai(ai) = &mut edited {
        ai.tool_calls[0].args = json!({"to": "LAX"});
    }
    let update = MessagesStateUpdate::default().messages(vec![edited]);
    graph
        .update_state(&config, Some(update), Some("agent"))
        .await?;
    let done = graph.invoke(None, &config).await?;
    let messages = &done.values.messages;
    assert_eq!(
        messages.iter().map(Message::kind).collect::<Vec<_>>(),
        ["human", "ai", "tool"]
    );
    assert_eq!(messages[1].id(), Some("ai-1"));
    assert_eq!(messages[1].tool_calls()[0].args, json!({"to": "LAX"}));
    assert_eq!(messages[2].text(), "booked to \"LAX\"");
    Ok(())
}
