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

pub use agent::{
    AgentOptions, ChatModel, NEED_MORE_STEPS, ResponseFormat, ScriptedModel, create_react_agent,
    create_react_agent_with_state,
};
pub use tool::{FnTool, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, return_direct, tool};
pub use tool_node::{HandleToolErrors, ToolNode};

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::error::Result;
use crate::messages::{Message, MessagesState, MessagesStateUpdate};
use crate::pregel::graph::END;
use crate::state::{JsonState, State, json_messages};

/// A state holding a conversation that the prebuilt pieces read and append to (LangGraph's
/// `messages` key); implement it for your own state to run a [`ToolNode`] or a ReAct agent
/// over it. [`MessagesState`] and [`JsonState`] (its `messages` key) have it.
pub trait HasMessages: State {
    /// The conversation, or an error saying why it cannot be read.
    fn messages(&self) -> Result<Cow<'_, [Message]>>;

    /// An update writing `messages` into the conversation (through its reducer).
    fn messages_update(messages: Vec<Message>) -> Self::Update;

    /// Takes the messages `update` writes out of it, if it writes the conversation.
    fn take_update_messages(update: &mut Self::Update) -> Result<Option<Vec<Message>>>;

    /// Makes `update` write `messages` into the conversation.
    fn set_update_messages(update: &mut Self::Update, messages: Vec<Message>);

    /// An update storing an agent's structured response (LangGraph's `structured_response`
    /// key), or `None` when the state has no place for one (the default).
    fn structured_response_update(_response: Value) -> Option<Self::Update> {
        None
    }
}

impl HasMessages for MessagesState {
    fn messages(&self) -> Result<Cow<'_, [Message]>> {
        Ok(Cow::Borrowed(&self.messages))
    }

    fn messages_update(messages: Vec<Message>) -> MessagesStateUpdate {
        MessagesStateUpdate::default().messages(messages)
    }

    fn take_update_messages(update: &mut MessagesStateUpdate) -> Result<Option<Vec<Message>>> {
        Ok(update.messages.take())
    }

    fn set_update_messages(update: &mut MessagesStateUpdate, messages: Vec<Message>) {
        update.messages = Some(messages);
    }
}

/// The key of a [`JsonState`] holding the conversation.
pub const MESSAGES_KEY: &str = "messages";

/// The key of a [`JsonState`] holding an agent's structured response.
pub const STRUCTURED_RESPONSE_KEY: &str = "structured_response";

/// A JSON state's conversation is its `messages` key (declare it with
/// [`JsonSchema::messages`](crate::JsonSchema::messages)); its structured response goes to
/// `structured_response` (declare it to use an agent's `response_format`).
impl HasMessages for JsonState {
    fn messages(&self) -> Result<Cow<'_, [Message]>> {
        match self.get(MESSAGES_KEY) {
            None => Ok(Cow::Owned(Vec::new())),
            Some(value) => json_messages(MESSAGES_KEY, value.clone()).map(Cow::Owned),
        }
    }

    fn messages_update(messages: Vec<Message>) -> Map<String, Value> {
        let mut update = Map::new();
        Self::set_update_messages(&mut update, messages);
        update
    }

    fn take_update_messages(update: &mut Map<String, Value>) -> Result<Option<Vec<Message>>> {
        update
            .remove(MESSAGES_KEY)
            .map(|value| json_messages(MESSAGES_KEY, value))
            .transpose()
    }

    fn set_update_messages(update: &mut Map<String, Value>, messages: Vec<Message>) {
        let messages = messages.iter().map(Message::to_json).collect();
        update.insert(MESSAGES_KEY.to_owned(), Value::Array(messages));
    }

    fn structured_response_update(response: Value) -> Option<Map<String, Value>> {
        Some(Map::from_iter([(
            STRUCTURED_RESPONSE_KEY.to_owned(),
            response,
        )]))
    }
}

/// The node a tool-calling graph goes to next (LangGraph's `tools_condition`): `"tools"` when
/// the last message is an AI message with tool calls, else [`END`]. A conversation that
/// cannot be read goes to `"tools"` too, whose node then fails with the reason.
pub fn tools_condition<S: HasMessages>(state: &S) -> &'static str {
    match state.messages() {
        Ok(messages) => match messages.last() {
            Some(last) if !last.tool_calls().is_empty() => "tools",
            _ => END,
        },
        Err(_) => "tools",
    }
}
