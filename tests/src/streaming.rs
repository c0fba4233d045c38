//! Streaming as LangGraph's guides show it: whole AI messages in `messages` mode, and the
//! parts of subgraphs with their namespaces (`subgraphs=True`).

use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::messages::AiMessageChunk;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, Message, MessagesState, MessagesStateUpdate, RunConfig,
    START, StateGraph, StreamMode, StreamPart,
};

use crate::{TestResult, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// An agent node that streams its reply word by word under one message id (LangChain's
/// `lc_run--<uuid>`), then returns the whole reply with that id.
fn streaming_agent(
    graph: &mut StateGraph<MessagesState>,
    name: &'static str,
    words: &'static [&'static str],
) {
    graph.add_node(
        name,
        move |_s: Arc<MessagesState>, ctx: Context| async move {
            let id = format!("lc_run--{}", uuid::Uuid::new_v4());
            for word in words {
                ctx.stream_message(AiMessageChunk::new(*word).with_id(id.clone()));
            }
            let reply = Message::ai(words.concat()).with_id(id).with_name(name);
            Ok::<_, waypoint_runtime::BoxError>(
                MessagesStateUpdate::default().messages(vec![reply]),
            )
        },
    );
}

/// Seed 001's graph: `boss -> product_manager`, each streaming its reply.
fn team(saver: Option<&Saver>) -> waypoint_runtime::Result<CompiledGraph<MessagesState>> {
    let mut graph = StateGraph::<MessagesState>::new();
    streaming_agent(&mut graph, "boss", &["Build ", "a ", "todo ", "app."]);
    streaming_agent(
        &mut graph,
        "product_manager",
        &["Users ", "need ", "lists."],
    );
    graph
        .add_edge(START, "boss")
        .add_edge("boss", "product_manager");
    let options = CompileOptions::default();
    graph.compile(match saver {
        Some(saver) => options.checkpointer(Arc::clone(saver)),
        None => options,
    })
}

/// A part's namespace with the task id of each level replaced by `<id>`, so runs compare.
pub(crate) fn masked_namespace<S: waypoint_runtime::State>(part: &StreamPart<S>) -> Vec<String> {
    part.namespace()
        .iter()
        .map(|level| match level.split_once(':') {
            Some((node, _task)) => format!("{node}:<id>"),
            None => level.clone(),
        })
        .collect()
}

/// One streamed item as the seed prints it, `(namespace, mode, chunk)`, with the task ids of
/// namespaces and message ids replaced by `<id>` so runs compare.
fn printed(part: &StreamPart<MessagesState>) -> String {
    let namespace = masked_namespace(part);
    let chunk = match part {
        StreamPart::Messages { chunk, metadata } => format!(
            "({:?}, {{langgraph_node: {}, langgraph_step: {}}})",
            chunk.content.text(),
            metadata.node,
            metadata.step
        ),
        StreamPart::Updates { node, update } => {
            let texts: Vec<String> = update
                .iter()
                .flat_map(|u| u.messages.iter().flatten())
                .map(|m| m.text())
                .collect();
            format!("{{{node}: {texts:?}}}")
        }
        StreamPart::Subgraph { mode, data, .. } => match mode {
            StreamMode::Messages => format!(
                "({:?}, {{langgraph_node: {}, langgraph_step: {}}})",
                data[0]["content"].as_str().unwrap_or_default(),
                data[1]["langgraph_node"].as_str().unwrap_or_default(),
                data[1]["langgraph_step"]
            ),
            _ => {
                let (node, update) = data
                    .as_object()
                    .and_then(|map| map.iter().next())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .unwrap_or_default();
                let texts: Vec<&str> = update["messages"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m["content"].as_str())
                    .collect();
                format!("{{{node}: {texts:?}}}")
            }
        },
        other => format!("{other:?}"),
    };
    format!("({namespace:?}, {}, {chunk})", part.mode())
}

async fn collect(
    stream: impl futures::Stream<Item = waypoint_runtime::Result<StreamPart<MessagesState>>>,
) -> waypoint_runtime::Result<Vec<StreamPart<MessagesState>>> {
    let parts: Vec<_> = stream.collect().await;
    parts.into_iter().collect()
}

fn input() -> Option<MessagesStateUpdate> {
    Some(MessagesStateUpdate::default().messages(vec![Message::human("a todo app?")]))
}

/// Seed 001: `stream_mode=["updates", "messages"]` with `subgraphs=True` on a flat graph
/// yields `(namespace, mode, chunk)` with the namespace always `()`: each node's chunks
/// (one message id per node, different between nodes), then its update. The whole reply
/// each node returns is not sent again in `messages` mode (its id was streamed).
pub async fn seed_001_flat_graph_streams_with_empty_namespace(saver: Saver) -> TestResult {
    let graph = team(Some(&saver))?;
    let modes = [StreamMode::Updates, StreamMode::Messages];
    let config = RunConfig::thread(thread());
    let parts = collect(graph.stream_subgraphs(input(), &config, &modes)).await?;
    let lines: Vec<String> = parts.iter().map(printed).collect();
    let expected = [
        r#"([], messages, ("Build ", {langgraph_node: boss, langgraph_step: 1}))"#,
        r#"([], messages, ("a ", {langgraph_node: boss, langgraph_step: 1}))"#,
        r#"([], messages, ("todo ", {langgraph_node: boss, langgraph_step: 1}))"#,
        r#"([], messages, ("app.", {langgraph_node: boss, langgraph_step: 1}))"#,
        r#"([], updates, {boss: ["Build a todo app."]})"#,
        r#"([], messages, ("Users ", {langgraph_node: product_manager, langgraph_step: 2}))"#,
        r#"([], messages, ("need ", {langgraph_node: product_manager, langgraph_step: 2}))"#,
        r#"([], messages, ("lists.", {langgraph_node: product_manager, langgraph_step: 2}))"#,
        r#"([], updates, {product_manager: ["Users need lists."]})"#,
    ];
    assert_eq!(lines, expected);
    // One message id per node, different between the nodes.
    let ids: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = parts
        .iter()
        .filter_map(|part| match part {
            StreamPart::Messages { metadata, .. } => Some((
                metadata.node.clone(),
                metadata.id.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .fold(Default::default(), |mut ids, (node, id)| {
            ids.entry(node).or_default().insert(id);
            ids
        });
    assert_eq!(ids.len(), 2);
    assert!(ids.values().all(|set| set.len() == 1));
    assert_ne!(ids["boss"], ids["product_manager"]);
    Ok(())
}

/// Seed 001's agents as a subgraph node `team` of a parent: with subgraphs, their parts
/// reach the parent's stream under the namespace `("team:<task id>",)`, then the parent's
/// own update follows with an empty namespace; the messages the subgraph streamed are not
/// repeated when the parent's node returns them. Without subgraphs only the parent's parts
/// come, and the replies the subgraph made reach `messages` mode whole, from `team`.
pub async fn subgraph_parts_carry_their_namespace(saver: Saver) -> TestResult {
    let mut parent = StateGraph::<MessagesState>::new();
    parent.add_subgraph("team", team(None)?);
    parent.add_edge(START, "team");
    let parent = parent.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let modes = [StreamMode::Updates, StreamMode::Messages];
    let config = RunConfig::thread(thread());
    let parts = collect(parent.stream_subgraphs(input(), &config, &modes)).await?;
    let lines: Vec<String> = parts.iter().map(printed).collect();
    let sub = r#"["team:<id>"]"#;
    let expected = [
        format!(r#"({sub}, messages, ("Build ", {{langgraph_node: boss, langgraph_step: 1}}))"#),
        format!(r#"({sub}, messages, ("a ", {{langgraph_node: boss, langgraph_step: 1}}))"#),
        format!(r#"({sub}, messages, ("todo ", {{langgraph_node: boss, langgraph_step: 1}}))"#),
        format!(r#"({sub}, messages, ("app.", {{langgraph_node: boss, langgraph_step: 1}}))"#),
        format!(r#"({sub}, updates, {{boss: ["Build a todo app."]}})"#),
        format!(
            r#"({sub}, messages, ("Users ", {{langgraph_node: product_manager, langgraph_step: 2}}))"#
        ),
        format!(
            r#"({sub}, messages, ("need ", {{langgraph_node: product_manager, langgraph_step: 2}}))"#
        ),
        format!(
            r#"({sub}, messages, ("lists.", {{langgraph_node: product_manager, langgraph_step: 2}}))"#
        ),
        format!(r#"({sub}, updates, {{product_manager: ["Users need lists."]}})"#),
        r#"([], updates, {team: ["a todo app?", "Build a todo app.", "Users need lists."]})"#
            .to_owned(),
    ];
    assert_eq!(lines, expected);

    // The namespace is the subgraph's checkpoint namespace, `team:<the team task's id>`,
    // and the messages' metadata names the subgraph node's own task below it.
    let namespace = parts[0].namespace().to_vec();
    let team_task = namespace[0]
        .strip_prefix("team:")
        .ok_or("a team namespace")?;
    let history = parent
        .get_state_history(&config, &waypoint_checkpoint::ListOptions::default())
        .await?;
    assert!(
        history.iter().any(|s| s
            .tasks
            .iter()
            .any(|t| t.name == "team" && t.id == team_task)),
        "the namespace names the parent's team task"
    );
    let StreamPart::Subgraph { data, .. } = &parts[0] else {
        panic!("a subgraph part")
    };
    let task_ns = data[1]["langgraph_checkpoint_ns"].as_str().unwrap_or("");
    assert!(
        task_ns.starts_with(&format!("{}|boss:", namespace[0])),
        "{task_ns}"
    );
    // Its JSON is the LangGraph API's event for a subgraph: `{mode}|{namespace}`.
    let event = serde_json::to_value(&parts[0])?;
    assert_eq!(
        event["event"],
        Value::from(format!("messages|{}", namespace[0]))
    );

    // Without subgraphs: the parent's parts only; the replies come whole, from `team`.
    let config = RunConfig::thread(thread());
    let parts = collect(parent.stream(input(), &config, &modes)).await?;
    let lines: Vec<String> = parts.iter().map(printed).collect();
    assert_eq!(
        lines,
        [
            r#"([], messages, ("Build a todo app.", {langgraph_node: team, langgraph_step: 1}))"#,
            r#"([], messages, ("Users need lists.", {langgraph_node: team, langgraph_step: 1}))"#,
            r#"([], updates, {team: ["a todo app?", "Build a todo app.", "Users need lists."]})"#,
        ]
    );
    Ok(())
}

/// A node that calls its model without streaming and returns the AI message whole: in
/// `messages` mode it comes as one part with the node's metadata and the message's id (as
/// LangGraph's `StreamMessagesHandler` emits node outputs). Messages already in the node's
/// input (the human's, an edit of an earlier reply) and those streamed chunk by chunk are
/// not sent again.
pub async fn whole_ai_message_is_one_messages_part(saver: Saver) -> TestResult {
    use waypoint_runtime::messages::{AiMessage, ToolCall};

    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node(
        "call_model",
        |_s: Arc<MessagesState>, _ctx: Context| async move {
            let reply = Message::Ai(AiMessage {
                content: "Let me look.".into(),
                tool_calls: vec![ToolCall::new(
                    "call-1",
                    "search",
                    serde_json::json!({"q": "sf"}),
                )],
                ..AiMessage::default()
            })
            .with_id("ai-1");
            Ok::<_, waypoint_runtime::BoxError>(
                MessagesStateUpdate::default().messages(vec![reply]),
            )
        },
    );
    graph.add_node(
        "tools",
        |_s: Arc<MessagesState>, _ctx: Context| async move {
            let done = Message::tool("call-1", "sunny").with_id("tool-1");
            // An edit of the model's reply, by id: already in the input, not re-sent. The
            // tool message is sent, as LangGraph sends every message a node returns.
            let edited = Message::ai("Let me look again.").with_id("ai-1");
            Ok::<_, waypoint_runtime::BoxError>(
                MessagesStateUpdate::default().messages(vec![done, edited]),
            )
        },
    );
    streaming_agent(&mut graph, "answer", &["It is ", "sunny."]);
    graph
        .add_edge(START, "call_model")
        .add_edge("call_model", "tools")
        .add_edge("tools", "answer");
    let graph = graph.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let config = RunConfig::thread(thread());
    let parts = collect(graph.stream(input(), &config, &[StreamMode::Messages])).await?;
    let mut seen = Vec::new();
    for part in &parts {
        let (text, metadata) = match part {
            StreamPart::Messages { chunk, metadata } => (chunk.content.text(), metadata),
            StreamPart::Returned { message, metadata } => (message.text(), metadata),
            _ => panic!("only the messages mode was asked for: {part:?}"),
        };
        seen.push((
            metadata.node.clone(),
            metadata.step,
            text,
            metadata.id.clone(),
        ));
    }
    let answer_id = seen.last().and_then(|s| s.3.clone());
    assert_eq!(
        seen,
        [
            (
                "call_model".into(),
                1,
                "Let me look.".into(),
                Some("ai-1".into())
            ),
            ("tools".into(), 2, "sunny".into(), Some("tool-1".into())),
            ("answer".into(), 3, "It is ".into(), answer_id.clone()),
            ("answer".into(), 3, "sunny.".into(), answer_id),
        ]
    );
    // The whole message keeps its tool calls and builds back into the stored message.
    let StreamPart::Messages { chunk, metadata } = &parts[0] else {
        panic!("a message part")
    };
    assert_eq!(metadata.namespace, "");
    assert!(metadata.checkpoint_ns.starts_with("call_model:"));
    let rebuilt = chunk.clone().into_message()?;
    assert_eq!(rebuilt.tool_calls().len(), 1);
    assert_eq!(rebuilt.tool_calls()[0].args["q"], "sf");
    Ok(())
}
