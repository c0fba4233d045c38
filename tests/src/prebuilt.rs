//! The prebuilt ReAct agent on a checkpointer: parallel tool calls in the saved history, and
//! the human review of tool calls (LangGraph's guide: pause before `tools`, edit the call
//! with `update_state`, resume).

use std::sync::Arc;

use serde_json::{Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::messages::{AiMessage, ToolCall};
use waypoint_runtime::prebuilt::{AgentOptions, ScriptedModel, Tool, create_react_agent, tool};
use waypoint_runtime::{Message, MessagesState, MessagesStateUpdate, RunConfig};

use crate::{TestResult, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// The guide's weather and flight tools.
fn tools() -> Vec<Arc<dyn Tool<MessagesState>>> {
    vec![
        tool(
            "get_weather",
            "The weather in a city.",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            |args: Value, _ctx| async move {
                Ok(format!("sunny in {}", args["city"].as_str().unwrap_or("?")))
            },
        ),
        tool(
            "book_flight",
            "Books a flight.",
            json!({"type": "object", "properties": {"to": {"type": "string"}}}),
            |args: Value, _ctx| async move {
                Ok(format!("booked to {}", args["to"].as_str().unwrap_or("?")))
            },
        ),
    ]
}

/// An AI message with id `id` calling `calls`.
pub fn calling(id: &str, calls: Vec<ToolCall>) -> AiMessage {
    AiMessage {
        id: Some(id.into()),
        tool_calls: calls,
        ..AiMessage::default()
    }
}

/// An AI message with id `id` saying `text`.
pub fn saying(id: &str, text: &str) -> AiMessage {
    AiMessage {
        id: Some(id.into()),
        content: text.into(),
        ..AiMessage::default()
    }
}

/// The kinds of `messages`.
pub fn kinds(messages: &[Message]) -> Vec<&'static str> {
    messages.iter().map(Message::kind).collect()
}

/// A ReAct agent whose model calls two tools at once: both answers in call order, and every
/// step checkpointed (next node, message count), read back the same.
pub async fn agent_parallel_tool_calls_are_checkpointed(saver: Saver) -> TestResult {
    let model = ScriptedModel::new([
        calling(
            "ai-1",
            vec![
                ToolCall::new("call-w", "get_weather", json!({"city": "Paris"})),
                ToolCall::new("call-f", "book_flight", json!({"to": "SFO"})),
            ],
        ),
        saying("ai-2", "Sunny, and you fly to SFO."),
    ]);
    let agent = create_react_agent(model, tools(), AgentOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let input = MessagesStateUpdate::default().messages(vec![Message::human("weather, then fly")]);
    let done = agent.invoke(Some(input), &config).await?;
    assert!(!done.interrupted);
    let messages = &done.values.messages;
    assert_eq!(kinds(messages), ["human", "ai", "tool", "tool", "ai"]);
    let answers: Vec<(String, String)> = messages[2..4]
        .iter()
        .map(|m| match m {
            Message::Tool(t) => (t.tool_call_id.clone(), t.content.text()),
            _ => Default::default(),
        })
        .collect();
    assert_eq!(
        answers,
        [
            ("call-w".to_string(), "sunny in Paris".to_string()),
            ("call-f".to_string(), "booked to SFO".to_string()),
        ]
    );

    // One checkpoint per step, newest first: the input, agent, tools (both calls in one
    // step), agent.
    let history = agent
        .get_state_history(&config, &Default::default())
        .await?;
    let steps: Vec<(Vec<String>, usize)> = history
        .iter()
        .map(|s| (s.next.clone(), s.values.messages.len()))
        .collect();
    let next = |nodes: &[&str]| nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(
        steps,
        [
            (next(&[]), 5),
            (next(&["agent"]), 4),
            (next(&["tools"]), 2),
            (next(&["agent"]), 1),
            (next(&["__start__"]), 0),
        ]
    );
    let reread = agent.get_state(&config).await?;
    assert_eq!(reread.values.messages, *messages);
    Ok(())
}

/// Human review before tools: the run pauses before `tools`, the tool call is edited by id
/// with `update_state`, and the resumed run executes the edited call.
pub async fn agent_human_review_edits_the_tool_call(saver: Saver) -> TestResult {
    let model = Arc::new(ScriptedModel::new([
        calling(
            "ai-1",
            vec![ToolCall::new("call-f", "book_flight", json!({"to": "SFO"}))],
        ),
        saying("ai-2", "Booked."),
    ]));
    let options = AgentOptions::default()
        .checkpointer(saver)
        .interrupt_before(["tools"]);
    let agent = create_react_agent(Arc::clone(&model), tools(), options)?;
    let config = RunConfig::thread(thread());
    let input = MessagesStateUpdate::default().messages(vec![Message::human("fly me to SFO")]);
    let paused = agent.invoke(Some(input), &config).await?;
    assert!(paused.interrupted);
    let state = agent.get_state(&config).await?;
    assert_eq!(state.next, ["tools"]);
    let pending = state.values.messages.last().ok_or("the AI message")?;
    assert_eq!(pending.tool_calls()[0].args, json!({"to": "SFO"}));

    // The reviewer changes the destination: the same message id replaces the call.
    let mut edited = pending.clone();
    if let Message::Ai(ai) = &mut edited {
        ai.tool_calls[0].args = json!({"to": "LAX"});
    }
    let update = MessagesStateUpdate::default().messages(vec![edited]);
    agent
        .update_state(&config, Some(update), Some("agent"))
        .await?;
    assert_eq!(agent.get_state(&config).await?.next, ["tools"]);

    let done = agent.invoke(None, &config).await?;
    assert!(!done.interrupted);
    let messages = &done.values.messages;
    assert_eq!(kinds(messages), ["human", "ai", "tool", "ai"]);
    assert_eq!(messages[1].id(), Some("ai-1"));
    assert_eq!(messages[2].text(), "booked to LAX");
    assert_eq!(messages[3].text(), "Booked.");
    // The model saw the edited call and its answer.
    let calls = model.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].0[1].tool_calls()[0].args, json!({"to": "LAX"}));
    Ok(())
}
