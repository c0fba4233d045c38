//! Ready-made pieces for tool-calling agents (LangGraph's `langgraph.prebuilt`): tools, the
//! [`ToolNode`] that runs an AI message's tool calls, the [`tools_condition`] router, a small
//! [`ChatModel`] trait and [`create_react_agent`], the model/tools loop.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::{json, Value};
//! use waypoint_runtime::prebuilt::{AgentOptions, ScriptedModel, Tool, create_react_agent, tool};
//! use waypoint_runtime::messages::{AiMessage, ToolCall};
//! use waypoint_runtime::{Message, MessagesState, MessagesStateUpdate, RunConfig};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let multiply: Arc<dyn Tool<MessagesState>> = tool(
//!     "multiply",
//!     "Multiply two numbers.",
//!     json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
//!     |args: Value, _ctx| async move {
//!         Ok(json!(args["a"].as_i64().unwrap_or(0) * args["b"].as_i64().unwrap_or(0)))
//!     },
//! );
//! // A model that asks for the tool once, then answers.
//! let model = ScriptedModel::new([
//!     AiMessage {
//!         tool_calls: vec![ToolCall::new("call-1", "multiply", json!({"a": 6, "b": 7}))],
//!         ..AiMessage::default()
//!     },
//!     AiMessage { content: "42".into(), ..AiMessage::default() },
//! ]);
//! let agent = create_react_agent(model, vec![multiply], AgentOptions::default())?;
//! let input = MessagesStateUpdate::default().messages(vec![Message::human("what's 6 x 7?")]);
//! let done = agent.invoke(Some(input), &RunConfig::default()).await?;
//! let kinds: Vec<&str> = done.values.messages.iter().map(Message::kind).collect();
//! assert_eq!(kinds, ["human", "ai", "tool", "ai"]);
//! assert_eq!(done.values.messages[2].text(), "42");
//! # Ok::<(), waypoint_runtime::Error>(())
//! # }).unwrap();
//! ```

mod agent;
mod tool;
mod tool_node;

pub use agent::{AgentOptions, ChatModel, ScriptedModel, create_react_agent};
pub use tool::{FnTool, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, tool};
pub use tool_node::{HandleToolErrors, ToolNode};

use crate::messages::{Message, MessagesState, MessagesStateUpdate};
use crate::pregel::graph::END;
use crate::state::State;

/// A state holding a conversation that the prebuilt pieces read and append to (LangGraph's
/// `messages` key); implement it for your own state to run a [`ToolNode`] or a ReAct agent
/// over it.
pub trait HasMessages: State {
    /// The conversation.
    fn messages(&self) -> &[Message];

    /// An update writing `messages` into the conversation (through its reducer).
    fn messages_update(messages: Vec<Message>) -> Self::Update;

    /// The messages `update` writes, if it writes the conversation.
    fn update_messages(update: &mut Self::Update) -> Option<&mut Vec<Message>>;
}

impl HasMessages for MessagesState {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn messages_update(messages: Vec<Message>) -> MessagesStateUpdate {
        MessagesStateUpdate::default().messages(messages)
    }

    fn update_messages(update: &mut MessagesStateUpdate) -> Option<&mut Vec<Message>> {
        update.messages.as_mut()
    }
}

/// The node a tool-calling graph goes to next (LangGraph's `tools_condition`): `"tools"` when
/// the last message is an AI message with tool calls, else [`END`].
pub fn tools_condition<S: HasMessages>(state: &S) -> &'static str {
    match state.messages().last() {
        Some(last) if !last.tool_calls().is_empty() => "tools",
        _ => END,
    }
}
