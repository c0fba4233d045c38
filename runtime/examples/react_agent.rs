//! LangGraph's prebuilt ReAct agent on Waypoint: a model calling tools in a loop, with a
//! human reviewing each tool call before it runs (the guide's "review tool calls" pattern).
//!
//! The model is a deterministic stand-in (no LLM) implementing [`ChatModel`]: asked about a
//! trip, it calls `get_weather` and `book_flight` in one message (they run in parallel);
//! given their results, it answers with them. `book_flight` keeps the booking in the
//! store, which tools reach through their context. The agent pauses before `tools`; the
//! reviewer changes the destination with `update_state`, then the run resumes.
//!
//! `cargo run -p waypoint-runtime --example react_agent`

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use waypoint_checkpoint::{BoxError, InMemorySaver};
use waypoint_runtime::messages::{AiMessage, ToolCall};
use waypoint_runtime::prebuilt::{
    AgentOptions, ChatModel, Tool, ToolContext, ToolSpec, create_react_agent, tool,
};
use waypoint_runtime::{Message, MessagesState, MessagesStateUpdate, RunConfig};
use waypoint_store::{InMemoryStore, StoreExt};

/// A stand-in model: tool calls for a question, an answer from tool results.
struct TripModel;

#[async_trait::async_trait]
impl ChatModel for TripModel {
    async fn invoke(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<AiMessage, BoxError> {
        let last = messages.last().ok_or("no message to answer")?;
        if last.kind() == "tool" {
            let results: Vec<String> = messages
                .iter()
                .rev()
                .take_while(|m| m.kind() == "tool")
                .map(Message::text)
                .collect();
            return Ok(AiMessage {
                content: format!(
                    "Done: {}.",
                    results.into_iter().rev().collect::<Vec<_>>().join("; ")
                )
                .into(),
                ..AiMessage::default()
            });
        }
        assert!(
            tools.iter().any(|t| t.name == "book_flight"),
            "the agent offers its tools"
        );
        Ok(AiMessage {
            id: Some("ai-plan".into()),
            tool_calls: vec![
                ToolCall::new(
                    "call-weather",
                    "get_weather",
                    json!({"city": "San Francisco"}),
                ),
                ToolCall::new("call-flight", "book_flight", json!({"to": "SFO"})),
            ],
            ..AiMessage::default()
        })
    }
}

#[derive(Deserialize)]
struct Flight {
    to: String,
}

fn tools() -> Vec<Arc<dyn Tool<MessagesState>>> {
    vec![
        tool(
            "get_weather",
            "The weather in a city.",
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            |args: Value, _ctx| async move {
                Ok(format!("sunny in {}", args["city"].as_str().unwrap_or("?")))
            },
        ),
        tool(
            "book_flight",
            "Books a flight.",
            json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
            |flight: Flight, ctx: ToolContext<MessagesState>| async move {
                let store = ctx.require_store()?;
                store
                    .put(["bookings"], ctx.tool_call_id(), json!({"to": flight.to}))
                    .await?;
                Ok(format!("booked to {}", flight.to))
            },
        ),
    ]
}

/// A message's tool calls as `name(args)`.
fn calls(message: &Message) -> String {
    let calls: Vec<String> = message
        .tool_calls()
        .iter()
        .map(|c| format!("{}({})", c.name, c.args))
        .collect();
    calls.join(", ")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let store = Arc::new(InMemoryStore::new());
    let options = AgentOptions::default()
        .prompt("You plan trips.")
        .checkpointer(Arc::new(InMemorySaver::new()))
        .store(store.clone())
        .interrupt_before(["tools"]);
    let agent = create_react_agent(TripModel, tools(), options)?;
    let config = RunConfig::thread("trip-1");

    let ask = MessagesStateUpdate::default()
        .messages(vec![Message::human("Weather in SF, and book me there")]);
    let paused = agent.invoke(Some(ask), &config).await?;
    assert!(paused.interrupted);
    let state = agent.get_state(&config).await?;
    assert_eq!(state.next, ["tools"]);
    let mut plan = state
        .values
        .messages
        .last()
        .cloned()
        .ok_or("the model's plan")?;
    println!("paused before tools; the model asks for {}", calls(&plan));

    // The reviewer prefers Oakland: the same message id replaces the plan.
    if let Message::Ai(ai) = &mut plan {
        ai.tool_calls[1].args = json!({"to": "OAK"});
    }
    agent
        .update_state(
            &config,
            Some(MessagesStateUpdate::default().messages(vec![plan])),
            Some("agent"),
        )
        .await?;
    let done = agent.invoke(None, &config).await?;
    for message in &done.values.messages {
        let text = match message.tool_calls() {
            [] => message.text(),
            _ => calls(message),
        };
        println!("{:>5}: {text}", message.kind());
    }
    let answer = done
        .values
        .messages
        .last()
        .map(Message::text)
        .unwrap_or_default();
    assert_eq!(answer, "Done: sunny in San Francisco; booked to OAK.");
    let booking = store
        .get(["bookings"], "call-flight")
        .await?
        .ok_or("the booking")?;
    assert_eq!(booking.value["to"], "OAK");
    Ok(())
}
