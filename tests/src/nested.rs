//! A graph run from inside a node with `invoke` or `stream` (LangGraph's "subgraphs called as
//! functions"): a subgraph run of the node, in its namespace, pausing and resuming with it.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, ListOptions};
use waypoint_runtime::{
    Command, CompileOptions, CompiledGraph, Context, JsonSchema, JsonState, RunConfig, START,
    StateGraph, StreamMode, StreamPart,
};

use waypoint_runtime::messages::{AiMessage, ToolCall};
use waypoint_runtime::prebuilt::{
    AgentOptions, ScriptedModel, ToolContext, create_react_agent, tool,
};
use waypoint_runtime::{Message, MessagesState, MessagesStateUpdate};

use crate::graphs::Calls;
use crate::{TestResult, obj, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// The guide's subgraph: `some_node`, then `human_node`, which asks for a name; compiled
/// with `saver` (the guide's interrupt example) or without a checkpointer of its own (its
/// "As a function" example: it then writes to its caller's).
pub(crate) fn asking_subgraph(
    calls: &Calls,
    saver: Option<&Saver>,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut sub = StateGraph::json(
        JsonSchema::new()
            .last_value("state_counter")
            .last_value("name"),
    );
    sub.add_node("some_node", {
        let calls = calls.clone();
        move |_s: JsonState, _c: Context| {
            calls.hit("node_in_subgraph");
            async { Ok(obj(json!({}))) }
        }
    });
    sub.add_node("human_node", {
        let calls = calls.clone();
        move |_s: JsonState, ctx: Context| {
            calls.hit("human_node");
            async move {
                let answer = ctx.interrupt("what is your name?")?;
                Ok(obj(json!({"name": answer})))
            }
        }
    });
    sub.add_edge(START, "some_node")
        .add_edge("some_node", "human_node");
    let options = CompileOptions::default();
    sub.compile(match saver {
        Some(saver) => options.checkpointer(Arc::clone(saver)),
        None => options,
    })
}

/// The guide's parent graph: `parent_node` runs `sub` with `sub.invoke(state)` and returns
/// its state.
fn invoking_parent(
    calls: &Calls,
    sub: CompiledGraph<JsonState>,
    saver: &Saver,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(
        JsonSchema::new()
            .last_value("state_counter")
            .last_value("name"),
    );
    graph.add_node("parent_node", {
        let calls = calls.clone();
        move |state: JsonState, ctx: Context| {
            calls.hit("parent_node");
            let sub = sub.clone();
            async move {
                let out = sub
                    .invoke(Some(state.values().clone()), ctx.config())
                    .await?;
                Ok(out.values.values().clone())
            }
        }
    });
    graph.add_edge(START, "parent_node");
    graph.compile(CompileOptions::default().checkpointer(Arc::clone(saver)))
}

/// The namespaces of `thread_id`'s checkpoints below the root graph, oldest first.
async fn subgraph_namespaces(
    saver: &Saver,
    thread_id: &str,
) -> waypoint_runtime::Result<Vec<String>> {
    let all = saver
        .list(
            Some(&CheckpointConfig {
                thread_id: thread_id.to_owned(),
                checkpoint_ns: None,
                checkpoint_id: None,
            }),
            &ListOptions::default(),
        )
        .await?;
    let mut namespaces: Vec<String> = all
        .into_iter()
        .filter_map(|t| t.config.checkpoint_ns.filter(|ns| !ns.is_empty()))
        .collect();
    namespaces.reverse();
    Ok(namespaces)
}

/// The guide's "Subgraphs called as functions": `parent_node` calls `subgraph.invoke(state)`;
/// the subgraph's interrupt pauses the parent, and on resume the parent node runs again
/// while the subgraph skips `some_node` (printed counts: 1, 1, 1 then 2, 1, 2).
pub async fn node_invokes_subgraph_and_resumes(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = asking_subgraph(&calls, None)?;
    let graph = invoking_parent(&calls, sub, &saver)?;
    let thread_id = thread();
    let config = RunConfig::thread(thread_id.clone());

    let out = graph
        .invoke(Some(obj(json!({"state_counter": 1}))), &config)
        .await?;
    assert!(out.interrupted);
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value, json!("what is your name?"));
    let counts = || {
        (
            calls.get("parent_node"),
            calls.get("node_in_subgraph"),
            calls.get("human_node"),
        )
    };
    assert_eq!(counts(), (1, 1, 1));
    // The subgraph's checkpoints live in the calling task's namespace.
    let namespaces = subgraph_namespaces(&saver, &thread_id).await?;
    assert!(!namespaces.is_empty());
    assert!(
        namespaces
            .iter()
            .all(|ns| ns.starts_with("parent_node:") && !ns.contains('|')),
        "{namespaces:?}"
    );

    let out = graph.invoke(Command::resume("35"), &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("name"), Some(&json!("35")));
    assert_eq!(out.get("state_counter"), Some(&json!(1)));
    assert_eq!(counts(), (2, 1, 2));
    Ok(())
}

/// A node that streams a graph gets its parts as they happen and pauses with its
/// interrupt; resumed, the stream ends with the subgraph's last update.
pub async fn node_streams_subgraph_and_resumes(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = asking_subgraph(&calls, None)?;
    let mut graph = StateGraph::json(JsonSchema::new().last_value("seen"));
    graph.add_node("parent_node", {
        move |_state: JsonState, ctx: Context| {
            let sub = sub.clone();
            async move {
                let mut parts = sub.stream(
                    Some(obj(json!({"state_counter": 1}))),
                    ctx.config(),
                    &[StreamMode::Updates],
                );
                let mut seen = Vec::new();
                while let Some(part) = parts.next().await {
                    if let StreamPart::Updates { node, .. } = part? {
                        seen.push(node);
                    }
                }
                Ok(obj(json!({"seen": seen})))
            }
        }
    });
    graph.add_edge(START, "parent_node");
    let graph = graph.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let config = RunConfig::thread(thread());

    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert!(out.interrupted);
    assert_eq!(out.interrupts[0].value, json!("what is your name?"));
    let out = graph.invoke(Command::resume("35"), &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("seen"), Some(&json!(["human_node"])));
    assert_eq!(calls.get("node_in_subgraph"), 1);
    Ok(())
}

/// A graph a node runs on another thread is a root run of that thread, not a subgraph.
pub async fn invoke_on_another_thread_is_a_root_run(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let mut other = StateGraph::json(JsonSchema::new().last_value("n"));
    other.add_node("count", {
        let calls = calls.clone();
        move |_s: JsonState, _c: Context| {
            calls.hit("count");
            async { Ok(obj(json!({"n": 1}))) }
        }
    });
    other.add_edge(START, "count");
    let other = other.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let other_thread = thread();
    let mut graph = StateGraph::json(JsonSchema::new().last_value("n"));
    graph.add_node("caller", {
        let (other, other_thread) = (other.clone(), other_thread.clone());
        move |_s: JsonState, _c: Context| {
            let (other, config) = (other.clone(), RunConfig::thread(other_thread.clone()));
            async move {
                let out = other.invoke(Some(obj(json!({}))), &config).await?;
                Ok(out.values.values().clone())
            }
        }
    });
    graph.add_edge(START, "caller");
    let graph = graph.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let thread_id = thread();
    let out = graph
        .invoke(Some(obj(json!({}))), &RunConfig::thread(thread_id.clone()))
        .await?;
    assert_eq!(out.get("n"), Some(&json!(1)));
    assert!(subgraph_namespaces(&saver, &thread_id).await?.is_empty());
    let state = other.get_state(&RunConfig::thread(other_thread)).await?;
    assert_eq!(state.values.get("n"), Some(&json!(1)));
    Ok(())
}

/// LangGraph's `get_state(config, subgraphs=True)` on a parent paused inside a subgraph it
/// invoked: the parent's task points at the subgraph's checkpoint, whose snapshot shows the
/// subgraph paused before `human_node` with the interrupt; resumed, no task is left.
pub async fn get_state_subgraphs_shows_the_paused_subgraph(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = asking_subgraph(&calls, Some(&saver))?;
    let graph = invoking_parent(&calls, sub.clone(), &saver)?;
    let thread_id = thread();
    let config = RunConfig::thread(thread_id.clone());
    graph
        .invoke(Some(obj(json!({"state_counter": 1}))), &config)
        .await?;

    // Without subgraphs, the task points nowhere.
    let plain = graph.get_state(&config).await?;
    assert_eq!(plain.tasks.len(), 1);
    assert_eq!(plain.tasks[0].state, None);

    let parent = graph.get_state_subgraphs(&config).await?;
    assert_eq!(parent.next, vec!["parent_node".to_owned()]);
    let task = &parent.tasks[0];
    assert_eq!(task.name, "parent_node");
    assert_eq!(task.interrupts.len(), 1);
    assert_eq!(task.interrupts[0].value, json!("what is your name?"));
    let Some(at) = &task.state else {
        return Err("the paused task points at no subgraph checkpoint".into());
    };
    assert_eq!(at.thread_id.as_deref(), Some(thread_id.as_str()));
    assert_eq!(at.checkpoint_ns, format!("parent_node:{}", task.id));
    assert!(at.checkpoint_id.is_some());
    let json = serde_json::to_value(&parent)?;
    assert_eq!(
        json["tasks"][0]["checkpoint"]["checkpoint_ns"],
        json!(at.checkpoint_ns)
    );

    let child = sub.get_state_subgraphs(at).await?;
    assert_eq!(child.next, vec!["human_node".to_owned()]);
    assert_eq!(child.values.get("state_counter"), Some(&json!(1)));
    assert_eq!(child.tasks.len(), 1);
    assert_eq!(child.tasks[0].state, None);
    assert_eq!(child.interrupts, task.interrupts);
    assert_eq!(
        child.metadata.parents.as_ref().and_then(|p| p.get("")),
        parent.config.checkpoint_id.as_ref()
    );

    graph.invoke(Command::resume("35"), &config).await?;
    let done = graph.get_state_subgraphs(&config).await?;
    assert!(done.tasks.is_empty());
    assert_eq!(done.values.get("name"), Some(&json!("35")));
    Ok(())
}

/// A tool that invokes a graph (an agent as a tool) runs it as the tool node's subgraph: the
/// subgraph's interrupt pauses the agent, and resuming answers it; the tool's answer is the
/// subgraph's result.
pub async fn tool_invokes_subgraph_and_resumes(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let sub = asking_subgraph(&calls, None)?;
    let ask = tool(
        "ask_name",
        "Asks the user's name.",
        json!({"type": "object", "properties": {}}),
        move |_args: serde_json::Value, ctx: ToolContext<MessagesState>| {
            let sub = sub.clone();
            async move {
                let input = obj(json!({"state_counter": 1}));
                let out = sub.invoke(Some(input), ctx.context().config()).await?;
                Ok(out.get("name").cloned().unwrap_or_default().to_string())
            }
        },
    );
    let model = ScriptedModel::new([
        AiMessage {
            id: Some("ai-1".into()),
            tool_calls: vec![ToolCall::new("call-1", "ask_name", json!({}))],
            ..AiMessage::default()
        },
        AiMessage {
            id: Some("ai-2".into()),
            content: "Hello!".into(),
            ..AiMessage::default()
        },
    ]);
    let agent = create_react_agent(
        model,
        vec![ask],
        AgentOptions::default().checkpointer(Arc::clone(&saver)),
    )?;
    let thread_id = thread();
    let config = RunConfig::thread(thread_id.clone());
    let input = MessagesStateUpdate::default().messages(vec![Message::human("hi")]);
    let out = agent.invoke(Some(input), &config).await?;
    assert!(out.interrupted);
    assert_eq!(out.interrupts[0].value, json!("what is your name?"));
    let namespaces = subgraph_namespaces(&saver, &thread_id).await?;
    assert!(!namespaces.is_empty());
    assert!(
        namespaces.iter().all(|ns| ns.starts_with("tools:")),
        "{namespaces:?}"
    );

    let out = agent.invoke(Command::resume("35"), &config).await?;
    assert!(!out.interrupted);
    let messages = &out.values.messages;
    let kinds: Vec<&str> = messages.iter().map(Message::kind).collect();
    assert_eq!(kinds, ["human", "ai", "tool", "ai"]);
    match &messages[2] {
        Message::Tool(answer) => assert_eq!(answer.content.text(), "\"35\""),
        other => return Err(format!("expected a tool message, got {other:?}").into()),
    }
    assert_eq!(
        (calls.get("node_in_subgraph"), calls.get("human_node")),
        (1, 2)
    );
    Ok(())
}
