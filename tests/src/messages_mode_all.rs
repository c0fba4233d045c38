//! The `messages` stream carries every message a node returns (LangGraph's
//! `StreamMessagesHandler`): a tool node's answers and the human or system messages a node
//! adds too, each once; and the events stream shows a ReAct agent's model calls as chat-model
//! runs and the custom events its tools dispatch.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::messages::{AiMessage, ToolCall};
use waypoint_runtime::prebuilt::{
    AgentOptions, ScriptedModel, Tool, ToolContext, ToolNode, create_react_agent, tool,
};
use waypoint_runtime::{
    CHAT_MODEL_NAME, CompileOptions, Context, EventKind, Message, MessagesState,
    MessagesStateUpdate, NodeResult, RunConfig, START, StateGraph, StreamMode, StreamPart,
};

use crate::{TestResult, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// The weather tool: reports its progress as a custom event, then answers.
fn weather() -> Arc<dyn Tool<MessagesState>> {
    tool(
        "get_weather",
        "The weather in a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        |args: Value, ctx: ToolContext<MessagesState>| async move {
            let city = args["city"].as_str().unwrap_or("?").to_owned();
            ctx.context()
                .dispatch_custom_event("progress", json!({"looking_up": city}));
            Ok(format!("sunny in {city}"))
        },
    )
}

/// An AI message with id `id` asking for the weather in Paris.
fn asking(id: &str) -> AiMessage {
    AiMessage {
        id: Some(id.into()),
        tool_calls: vec![ToolCall::new(
            "call-1",
            "get_weather",
            json!({"city": "Paris"}),
        )],
        ..AiMessage::default()
    }
}

/// A node returning `messages`.
fn returning(
    messages: Vec<Message>,
) -> impl Fn(Arc<MessagesState>, Context) -> futures::future::Ready<NodeResult<MessagesStateUpdate>>
+ Send
+ Sync
+ 'static {
    move |_, _| {
        futures::future::ready(Ok(MessagesStateUpdate::default().messages(messages.clone())))
    }
}

/// A tool node's answer and the human and system messages a node returns are in the
/// `messages` stream, in order, each once, with their node and step: a message the node got
/// in its input and returns again is not sent again.
pub async fn tool_and_human_messages_are_streamed(saver: Saver) -> TestResult {
    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_node("ask", returning(vec![Message::Ai(asking("ai-1"))]))
        .add_node("tools", ToolNode::new(vec![weather()])?.as_node())
        .add_node(
            "follow_up",
            returning(vec![
                Message::human("weather?").with_id("h-1"),
                Message::human("and tomorrow?").with_id("h-2"),
                Message::system("be brief").with_id("s-1"),
            ]),
        )
        .add_edge(START, "ask")
        .add_edge("ask", "tools")
        .add_edge("tools", "follow_up");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let input =
        MessagesStateUpdate::default().messages(vec![Message::human("weather?").with_id("h-1")]);
    let mut stream = Box::pin(graph.stream(Some(input), &config, &[StreamMode::Messages]));
    let mut seen = Vec::new();
    while let Some(part) = stream.next().await {
        let (kind, text, metadata) = match part? {
            StreamPart::Messages { chunk, metadata } => ("ai", chunk.content.text(), metadata),
            StreamPart::Returned { message, metadata } => {
                assert_eq!(metadata.id.as_deref(), message.id());
                (message.kind(), message.text(), metadata)
            }
            other => panic!("only the messages mode was asked for: {other:?}"),
        };
        assert!(
            metadata
                .checkpoint_ns
                .starts_with(&format!("{}:", metadata.node))
        );
        seen.push((kind, text, metadata.node, metadata.step));
    }
    let expected = [
        ("ai", "", "ask", 1),
        ("tool", "sunny in Paris", "tools", 2),
        ("human", "and tomorrow?", "follow_up", 3),
        ("system", "be brief", "follow_up", 3),
    ];
    let expected: Vec<_> = (expected.iter())
        .map(|&(kind, text, node, step)| (kind, text.to_owned(), node.to_owned(), step))
        .collect();
    assert_eq!(seen, expected);
    Ok(())
}

/// A ReAct agent's events: each model call is a chat-model run inside the `agent` task
/// (start, its reply as one chunk, end), and the tool's custom event comes from the `tools`
/// task, in run order.
pub async fn agent_events_show_model_calls_and_custom_events(saver: Saver) -> TestResult {
    let reply = AiMessage {
        content: "Sunny in Paris.".into(),
        ..AiMessage::default()
    };
    let model = ScriptedModel::new([asking("ai-1"), reply]);
    let agent = create_react_agent(
        model,
        vec![weather()],
        AgentOptions::default().checkpointer(saver),
    )?;
    let config = RunConfig::thread(thread());
    let input = MessagesStateUpdate::default().messages(vec![Message::human("weather?")]);
    let mut stream = Box::pin(agent.stream_events(Some(input), &config));
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event?);
    }
    let inner: Vec<(EventKind, &str)> = (events.iter())
        .filter(|e| !matches!(e.name.as_str(), "__start__" | "LangGraph"))
        .map(|e| (e.event, e.name.as_str()))
        .collect();
    use EventKind::*;
    let agent_turn = [
        (ChainStart, "agent"),
        (ChatModelStart, CHAT_MODEL_NAME),
        (ChatModelStream, CHAT_MODEL_NAME),
        (ChatModelEnd, CHAT_MODEL_NAME),
        (ChainStream, "agent"),
        (ChainEnd, "agent"),
    ];
    let tools_turn = [
        (ChainStart, "tools"),
        (CustomEvent, "progress"),
        (ChainStream, "tools"),
        (ChainEnd, "tools"),
    ];
    assert_eq!(inner, [&agent_turn[..], &tools_turn, &agent_turn].concat());

    // Each model call is one run nested in its agent task, the reply's chunk in it too.
    let task_of = |kind: EventKind, name: &str, nth: usize| {
        (events.iter())
            .filter(|e| e.event == kind && e.name == name)
            .nth(nth)
            .ok_or(format!("no {kind:?} {name} #{nth}"))
    };
    for nth in 0..2 {
        let task = task_of(ChainStart, "agent", nth)?;
        let start = task_of(ChatModelStart, CHAT_MODEL_NAME, nth)?;
        let chunk = task_of(ChatModelStream, CHAT_MODEL_NAME, nth)?;
        let end = task_of(ChatModelEnd, CHAT_MODEL_NAME, nth)?;
        assert_eq!(start.parent_ids.last(), Some(&task.run_id));
        assert_eq!((&chunk.run_id, &end.run_id), (&start.run_id, &start.run_id));
        assert_eq!(start.metadata["langgraph_node"], "agent");
        assert_eq!(start.tags, task.tags);
        let sent = &start.data["input"]["messages"][0];
        assert_eq!(sent[0]["content"], "weather?");
        assert_eq!(end.data["input"], start.data["input"]);
        assert_eq!(end.data["output"]["id"], chunk.data["chunk"]["id"]);
    }
    let second = task_of(ChatModelEnd, CHAT_MODEL_NAME, 1)?;
    assert_eq!(second.data["output"]["content"], "Sunny in Paris.");
    // A reply without an id gets LangChain's `run-<id>`, the one stored in the thread.
    let run_id = &task_of(ChatModelStart, CHAT_MODEL_NAME, 1)?.run_id;
    let state = agent.get_state(&config).await?;
    let last = state.values.messages.last().ok_or("a reply")?;
    assert_eq!(last.id(), Some(format!("run-{run_id}").as_str()));

    let custom = task_of(CustomEvent, "progress", 0)?;
    let tools = task_of(ChainStart, "tools", 0)?;
    assert_eq!(custom.data, json!({"looking_up": "Paris"}));
    assert_eq!(
        (&custom.run_id, &custom.parent_ids, &custom.metadata),
        (&tools.run_id, &tools.parent_ids, &tools.metadata)
    );
    Ok(())
}

/// A custom event a node dispatches is dropped by the other stream modes: the `custom` mode
/// only carries `write_custom` values.
pub async fn custom_events_stay_out_of_other_modes(saver: Saver) -> TestResult {
    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_node("work", |_: Arc<MessagesState>, ctx: Context| async move {
            ctx.dispatch_custom_event("progress", json!(1));
            ctx.write_custom(json!("written"));
            NodeResult::Ok(MessagesStateUpdate::default())
        })
        .add_edge(START, "work");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let parts: Vec<_> = graph
        .stream_subgraphs(
            Some(MessagesStateUpdate::default()),
            &config,
            &StreamMode::ALL,
        )
        .collect()
        .await;
    let mut custom = Vec::new();
    for part in parts {
        match part? {
            StreamPart::Custom { value, .. } => custom.push(value),
            StreamPart::Debug(event) => assert_ne!(event["type"], "run_event", "{event}"),
            _ => {}
        }
    }
    assert_eq!(custom, [json!("written")]);
    Ok(())
}

/// A ReAct agent run by a parent graph's node (its subgraph): its model calls and its tool's
/// custom event nest in its own tasks, inside the parent's task, with the inner task's
/// checkpoint namespace.
pub async fn subgraph_agent_events_nest_in_its_tasks(saver: Saver) -> TestResult {
    let model = ScriptedModel::new([asking("ai-1"), AiMessage::default()]);
    let agent = Arc::new(create_react_agent(
        model,
        vec![weather()],
        AgentOptions::default(),
    )?);
    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_node("outer", move |state: Arc<MessagesState>, ctx: Context| {
            let agent = Arc::clone(&agent);
            async move {
                let input = MessagesStateUpdate::default().messages(state.messages.clone());
                let done = agent.invoke(Some(input), ctx.config()).await?;
                let last = done.values.messages.last().cloned();
                NodeResult::Ok(
                    MessagesStateUpdate::default().messages(last.into_iter().collect::<Vec<_>>()),
                )
            }
        })
        .add_edge(START, "outer");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let input = MessagesStateUpdate::default().messages(vec![Message::human("weather?")]);
    let events: Vec<_> = Box::pin(graph.stream_events(Some(input), &config))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let first = |kind: EventKind, name: &str| {
        (events.iter())
            .find(|e| e.event == kind && e.name == name)
            .ok_or(format!("no {kind:?} {name}"))
    };
    let outer = first(EventKind::ChainStart, "outer")?;
    let inner_agent = first(EventKind::ChainStart, "agent")?;
    let model = first(EventKind::ChatModelStart, CHAT_MODEL_NAME)?;
    let custom = first(EventKind::CustomEvent, "progress")?;
    let tools = first(EventKind::ChainStart, "tools")?;
    assert!(inner_agent.parent_ids.contains(&outer.run_id));
    assert_eq!(model.parent_ids.last(), Some(&inner_agent.run_id));
    assert_eq!(model.parent_ids.len(), inner_agent.parent_ids.len() + 1);
    assert_eq!(custom.run_id, tools.run_id);
    let ns = model.metadata["langgraph_checkpoint_ns"]
        .as_str()
        .ok_or("a namespace")?;
    assert!(ns.starts_with("outer:") && ns.contains("|agent:"), "{ns}");
    Ok(())
}
