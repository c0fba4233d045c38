//! Conversation history: LangChain-shaped messages, the `add_messages` reducer and the
//! prebuilt [`MessagesState`].

mod binary;
mod chunk;
mod convert;
mod langchain;
mod message;
mod read;
mod reducer;
mod trim;

use serde::{Deserialize, Serialize};

pub use chunk::{AiMessageChunk, ToolCallChunk};
pub use convert::{
    AnthropicRequest, ConvertError, from_anthropic_response, from_openai_response, to_anthropic,
    to_openai,
};
pub use message::{
    AiMessage, ChatMessage, Content, FunctionMessage, HumanMessage, InvalidToolCall, Message,
    REMOVE_ALL_MESSAGES, RemoveMessage, SystemMessage, ToolCall, ToolMessage, ToolStatus,
    UsageMetadata,
};
pub use reducer::{MessagesFormat, add_messages, add_messages_as};
pub use trim::{
    CHARS_PER_TOKEN, EXTRA_TOKENS_PER_MESSAGE, TokenCounter, TrimOptions, TrimStrategy,
    count_tokens_approximately, trim_messages,
};

/// A state holding only a conversation, folded by [`add_messages`] (LangGraph's
/// `MessagesState`).
#[derive(crate::State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessagesState {
    /// The conversation.
    #[reducer(add_messages)]
    pub messages: Vec<Message>,
}

#[cfg(test)]
mod langchain_tests;
#[cfg(test)]
mod read_tests;
#[cfg(test)]
mod tests;
