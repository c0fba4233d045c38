//! Chat messages as LangChain shapes them: human, ai, system, tool, chat, function and remove.
//!
//! A [`Message`] holds every field of the LangChain message class it stands for
//! (langchain-core 1.x), so a message read from a Python LangGraph thread and written back
//! is the same Python object:
//!
//! - the fields Waypoint works with are typed (content, id, name, tool calls, usage, ...);
//! - `additional_kwargs` and `response_metadata`, which every LangChain message has, are
//!   JSON maps;
//! - anything else the message carried (an attribute set on the Python object, a field of a
//!   newer langchain-core) is kept in `extra` and written back beside the fields;
//! - the exact Python class is kept: a `*MessageChunk` is the kind of its plain class with
//!   `chunk: true`, `ChatMessage` (a message with any role) and `FunctionMessage` (OpenAI's
//!   legacy function result) have kinds of their own, [`Message::Chat`] and
//!   [`Message::Function`].
//!
//! Forms read and written (see [`Message::from_json`] for every form read):
//!
//! - JSON and any other human-readable format: LangChain's dict form, `{"type": "human",
//!   "content": ...}`, with the fields left at their defaults left out;
//! - LangGraph's encoding (while [`writing_langgraph`] is true): the `lc: 2` constructor
//!   form of the message's class, whose kwargs are exactly what Python's `model_dump()`
//!   gives ([`Message::to_langgraph`]);
//! - binary formats (MessagePack, postcard, bincode): a positional layout in which free JSON
//!   travels as JSON text, since bincode and postcard cannot decode self-describing values.
//!
//! [`writing_langgraph`]: waypoint_checkpoint::serde::writing_langgraph

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::messages::{binary, langchain, read};

/// What a message says: text, or a list of content blocks (LangChain's `[{"type": "text",
/// "text": ...}, {"type": "image_url", ...}]`).
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content blocks, each a JSON object (or a bare string).
    Blocks(Vec<Value>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Text(String::new())
    }
}

impl Content {
    /// The text: the string itself, or the text blocks' texts joined (other blocks skipped).
    pub fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("text") => {
                        o.get("text").and_then(Value::as_str)
                    }
                    _ => None,
                })
                .collect(),
        }
    }

    /// Whether there is no text and no block.
    pub fn is_empty(&self) -> bool {
        match self {
            Content::Text(text) => text.is_empty(),
            Content::Blocks(blocks) => blocks.is_empty(),
        }
    }

    /// The content as JSON: a string or a list.
    pub fn to_json(&self) -> Value {
        match self {
            Content::Text(text) => Value::String(text.clone()),
            Content::Blocks(blocks) => Value::Array(blocks.clone()),
        }
    }

    pub(crate) fn from_json(value: Value) -> Result<Content, String> {
        match value {
            Value::String(text) => Ok(Content::Text(text)),
            Value::Array(blocks) => Ok(Content::Blocks(blocks)),
            Value::Null => Ok(Content::default()),
            other => Err(format!(
                "message content must be text or a list, not {other}"
            )),
        }
    }
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Content::Text(text) => text.serialize(s),
            Content::Blocks(blocks) => blocks.serialize(s),
        }
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Content::Text(text.to_owned())
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Content::Text(text)
    }
}

/// A tool call an AI message asks for (LangChain's `ToolCall` dict).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolCall {
    /// The call's id, which the tool message answering it repeats.
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    pub args: Value,
    /// Keys of the call's dict other than `name`, `args`, `id` and `type`, kept as they came.
    pub extra: Map<String, Value>,
}

impl ToolCall {
    /// A call of `name` with `args`, with an id.
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: Value) -> Self {
        ToolCall {
            id: Some(id.into()),
            name: name.into(),
            args,
            extra: Map::new(),
        }
    }
}

/// A tool call the model made that could not be parsed (LangChain's `InvalidToolCall`):
/// say, arguments that are not valid JSON.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InvalidToolCall {
    /// The call's id.
    pub id: Option<String>,
    /// The tool's name, if the model gave one.
    pub name: Option<String>,
    /// The arguments as the model wrote them.
    pub args: Option<String>,
    /// What is wrong with the call.
    pub error: Option<String>,
    /// Keys other than `id`, `name`, `args`, `error` and `type` (`index`, `extras`, ...).
    pub extra: Map<String, Value>,
}

/// Token counts an AI message reports (LangChain's `UsageMetadata`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageMetadata {
    /// Tokens in the prompt.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
    /// The rest of the dict, as it came: the breakdowns `input_token_details` (`audio`,
    /// `cache_creation`, `cache_read`, ...) and `output_token_details` (`audio`,
    /// `reasoning`, ...) when reported, and any other key.
    #[serde(flatten)]
    pub details: Map<String, Value>,
}

impl UsageMetadata {
    /// Counts without a breakdown.
    pub fn new(input_tokens: u64, output_tokens: u64, total_tokens: u64) -> Self {
        UsageMetadata {
            input_tokens,
            output_tokens,
            total_tokens,
            details: Map::new(),
        }
    }

    /// The breakdown of the input tokens, if reported.
    pub fn input_token_details(&self) -> Option<&Map<String, Value>> {
        self.details
            .get("input_token_details")
            .and_then(Value::as_object)
    }

    /// The breakdown of the output tokens, if reported.
    pub fn output_token_details(&self) -> Option<&Map<String, Value>> {
        self.details
            .get("output_token_details")
            .and_then(Value::as_object)
    }

    /// The sum of two reports, as LangChain's `add_usage`: counts add up (saturating), and
    /// so do the integers of the breakdowns and other keys, key by key; a value that is not
    /// an integer keeps the left one.
    pub fn add(&self, other: &UsageMetadata) -> UsageMetadata {
        UsageMetadata {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            total_tokens: self.total_tokens.saturating_add(other.total_tokens),
            details: add_integers(&self.details, &other.details),
        }
    }
}

/// Two maps with their integers added key by key (nested maps too); other values keep the
/// left one, keys on one side only are kept.
fn add_integers(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let mut out = a.clone();
    for (key, right) in b {
        let merged = match (out.get(key), right) {
            (None, right) => right.clone(),
            (Some(Value::Number(l)), Value::Number(r)) => {
                match (l.as_i64(), r.as_i64(), l.as_u64(), r.as_u64()) {
                    (Some(l), Some(r), _, _) => Value::from(l.saturating_add(r)),
                    (_, _, Some(l), Some(r)) => Value::from(l.saturating_add(r)),
                    _ => Value::Number(l.clone()),
                }
            }
            (Some(Value::Object(l)), Value::Object(r)) => Value::Object(add_integers(l, r)),
            (Some(left), _) => left.clone(),
        };
        out.insert(key.clone(), merged);
    }
    out
}

/// Whether a tool ran well (LangChain's `ToolMessage.status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ToolStatus {
    /// The tool returned a result.
    #[default]
    Success,
    /// The tool failed; the content says how.
    Error,
}

impl ToolStatus {
    /// LangChain's name: `success` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Success => "success",
            ToolStatus::Error => "error",
        }
    }
}

/// A message from the user (LangChain's `HumanMessage`, or `HumanMessageChunk`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HumanMessage {
    /// What it says.
    pub content: Content,
    /// Its id (`add_messages` gives one to a message without).
    pub id: Option<String>,
    /// An optional name of the speaker.
    pub name: Option<String>,
    /// Provider-specific data the message carries (LangChain's `additional_kwargs`).
    pub additional_kwargs: Map<String, Value>,
    /// Metadata of the response it came with (LangChain's `response_metadata`).
    pub response_metadata: Map<String, Value>,
    /// Fields of the Python object Waypoint does not model, kept as they came.
    pub extra: Map<String, Value>,
    /// Whether it is a `HumanMessageChunk`.
    pub chunk: bool,
}

/// A message from the model (LangChain's `AIMessage`, or `AIMessageChunk`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AiMessage {
    /// What it says.
    pub content: Content,
    /// Its id.
    pub id: Option<String>,
    /// An optional name of the speaker.
    pub name: Option<String>,
    /// The tools it asks to call.
    pub tool_calls: Vec<ToolCall>,
    /// The tool calls it made that could not be parsed.
    pub invalid_tool_calls: Vec<InvalidToolCall>,
    /// The tokens it reports.
    pub usage_metadata: Option<UsageMetadata>,
    /// Provider-specific data (LangChain's `additional_kwargs`).
    pub additional_kwargs: Map<String, Value>,
    /// Metadata of the response: model name, finish reason, ... (`response_metadata`).
    pub response_metadata: Map<String, Value>,
    /// Fields of the Python object Waypoint does not model, kept as they came.
    pub extra: Map<String, Value>,
    /// Whether it is an `AIMessageChunk` (with the two fields below).
    pub chunk: bool,
    /// The pieces of tool calls of an `AIMessageChunk` (see
    /// [`AiMessageChunk`](crate::messages::AiMessageChunk) for adding up streamed chunks).
    pub tool_call_chunks: Vec<crate::messages::ToolCallChunk>,
    /// An `AIMessageChunk`'s `chunk_position` (`"last"` for the final chunk of a stream).
    pub chunk_position: Option<String>,
}

/// Instructions for the model (LangChain's `SystemMessage`, or `SystemMessageChunk`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemMessage {
    /// What it says.
    pub content: Content,
    /// Its id.
    pub id: Option<String>,
    /// An optional name.
    pub name: Option<String>,
    /// Provider-specific data (LangChain's `additional_kwargs`).
    pub additional_kwargs: Map<String, Value>,
    /// LangChain's `response_metadata`.
    pub response_metadata: Map<String, Value>,
    /// Fields of the Python object Waypoint does not model, kept as they came.
    pub extra: Map<String, Value>,
    /// Whether it is a `SystemMessageChunk`.
    pub chunk: bool,
}

/// A tool's result, answering one tool call (LangChain's `ToolMessage`, or
/// `ToolMessageChunk`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolMessage {
    /// The result as the model sees it.
    pub content: Content,
    /// Its id.
    pub id: Option<String>,
    /// An optional name (the tool's).
    pub name: Option<String>,
    /// The id of the call it answers.
    pub tool_call_id: String,
    /// Output kept for the program, not sent to the model.
    pub artifact: Option<Value>,
    /// Whether the tool succeeded.
    pub status: ToolStatus,
    /// LangChain's `additional_kwargs`.
    pub additional_kwargs: Map<String, Value>,
    /// LangChain's `response_metadata`.
    pub response_metadata: Map<String, Value>,
    /// Fields of the Python object Waypoint does not model, kept as they came.
    pub extra: Map<String, Value>,
    /// Whether it is a `ToolMessageChunk`.
    pub chunk: bool,
}

/// A message with a role of its own (LangChain's `ChatMessage`, or `ChatMessageChunk`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatMessage {
    /// What it says.
    pub content: Content,
    /// Its id.
    pub id: Option<String>,
    /// An optional name of the speaker.
    pub name: Option<String>,
    /// The speaker's role (`user`, `assistant`, or any other).
    pub role: String,
    /// LangChain's `additional_kwargs`.
    pub additional_kwargs: Map<String, Value>,
    /// LangChain's `response_metadata`.
    pub response_metadata: Map<String, Value>,
    /// Fields of the Python object Waypoint does not model, kept as they came.
    pub extra: Map<String, Value>,
    /// Whether it is a `ChatMessageChunk`.
    pub chunk: bool,
}

/// A function's result in OpenAI's legacy function-calling API (LangChain's
/// `FunctionMessage`, or `FunctionMessageChunk`); tools answer with [`ToolMessage`] now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FunctionMessage {
    /// The result.
    pub content: Content,
    /// Its id.
    pub id: Option<String>,
    /// The function's name.
    pub name: String,
    /// LangChain's `additional_kwargs`.
    pub additional_kwargs: Map<String, Value>,
    /// LangChain's `response_metadata`.
    pub response_metadata: Map<String, Value>,
    /// Fields of the Python object Waypoint does not model, kept as they came.
    pub extra: Map<String, Value>,
    /// Whether it is a `FunctionMessageChunk`.
    pub chunk: bool,
}

/// An instruction to `add_messages` to delete the message with `id`
/// ([`REMOVE_ALL_MESSAGES`] deletes every message before it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RemoveMessage {
    /// The id to delete.
    pub id: String,
    /// An optional name.
    pub name: Option<String>,
    /// LangChain's `additional_kwargs`.
    pub additional_kwargs: Map<String, Value>,
    /// LangChain's `response_metadata`.
    pub response_metadata: Map<String, Value>,
    /// Fields of the Python object Waypoint does not model, kept as they came.
    pub extra: Map<String, Value>,
}

/// The id a [`RemoveMessage`] carries to delete every message before it.
pub const REMOVE_ALL_MESSAGES: &str = "__remove_all__";

/// One chat message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// From the user.
    Human(HumanMessage),
    /// From the model.
    Ai(AiMessage),
    /// Instructions.
    System(SystemMessage),
    /// A tool's result.
    Tool(ToolMessage),
    /// From a speaker with any role.
    Chat(ChatMessage),
    /// A function's result (OpenAI's legacy function calling).
    Function(FunctionMessage),
    /// Deletes a message in `add_messages`.
    Remove(RemoveMessage),
}

/// Applies `$body` to the message struct inside any variant, bound to `$m`, or with
/// `remove`, to every variant but [`Message::Remove`], which gets the last arm.
macro_rules! each {
    ($message:expr, $m:ident => $body:expr) => {
        each!($message, $m => $body, Message::Remove($m) => $body)
    };
    ($message:expr, $m:ident => $body:expr, $remove:pat => $on_remove:expr) => {
        match $message {
            Message::Human($m) => $body,
            Message::Ai($m) => $body,
            Message::System($m) => $body,
            Message::Tool($m) => $body,
            Message::Chat($m) => $body,
            Message::Function($m) => $body,
            $remove => $on_remove,
        }
    };
}

impl Message {
    /// A human message saying `content`.
    pub fn human(content: impl Into<Content>) -> Self {
        Message::Human(HumanMessage {
            content: content.into(),
            ..HumanMessage::default()
        })
    }

    /// An AI message saying `content`.
    pub fn ai(content: impl Into<Content>) -> Self {
        Message::Ai(AiMessage {
            content: content.into(),
            ..AiMessage::default()
        })
    }

    /// A system message saying `content`.
    pub fn system(content: impl Into<Content>) -> Self {
        Message::System(SystemMessage {
            content: content.into(),
            ..SystemMessage::default()
        })
    }

    /// A tool message answering call `tool_call_id` with `content`.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<Content>) -> Self {
        Message::Tool(ToolMessage {
            content: content.into(),
            tool_call_id: tool_call_id.into(),
            ..ToolMessage::default()
        })
    }

    /// A message from a speaker with role `role` saying `content` (LangChain's
    /// `ChatMessage`).
    pub fn chat(role: impl Into<String>, content: impl Into<Content>) -> Self {
        Message::Chat(ChatMessage {
            content: content.into(),
            role: role.into(),
            ..ChatMessage::default()
        })
    }

    /// The result `content` of function `name` (LangChain's `FunctionMessage`).
    pub fn function(name: impl Into<String>, content: impl Into<Content>) -> Self {
        Message::Function(FunctionMessage {
            content: content.into(),
            name: name.into(),
            ..FunctionMessage::default()
        })
    }

    /// An instruction to delete the message `id` (LangGraph's `RemoveMessage(id=...)`).
    pub fn remove(id: impl Into<String>) -> Self {
        Message::Remove(RemoveMessage {
            id: id.into(),
            ..RemoveMessage::default()
        })
    }

    /// An instruction to delete every message before it.
    pub fn remove_all() -> Self {
        Message::remove(REMOVE_ALL_MESSAGES)
    }

    /// The same message with id `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.set_id(Some(id.into()));
        self
    }

    /// The same message with name `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        match &mut self {
            Message::Function(m) => m.name = name,
            Message::Human(m) => m.name = Some(name),
            Message::Ai(m) => m.name = Some(name),
            Message::System(m) => m.name = Some(name),
            Message::Tool(m) => m.name = Some(name),
            Message::Chat(m) => m.name = Some(name),
            Message::Remove(m) => m.name = Some(name),
        }
        self
    }

    /// Waypoint's kind, LangChain's type name of the plain class: `human`, `ai`, `system`,
    /// `tool`, `chat`, `function` or `remove` (a chunk has its plain class's kind).
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Human(_) => "human",
            Message::Ai(_) => "ai",
            Message::System(_) => "system",
            Message::Tool(_) => "tool",
            Message::Chat(_) => "chat",
            Message::Function(_) => "function",
            Message::Remove(_) => "remove",
        }
    }

    /// Whether it is one of LangChain's `*MessageChunk` classes.
    pub fn is_chunk(&self) -> bool {
        each!(self, m => m.chunk, Message::Remove(_) => false)
    }

    /// The Python class it stands for: `HumanMessage`, `AIMessageChunk`, `RemoveMessage`, ...
    pub fn class_name(&self) -> &'static str {
        langchain::Class::of(self).name()
    }

    /// The Python module of that class: `langchain_core.messages.human`, ...
    pub fn module(&self) -> &'static str {
        langchain::Class::of(self).module()
    }

    /// The `type` field LangChain gives that class: the kind for a plain class, the class
    /// name for a chunk (`AIMessageChunk`).
    pub fn lc_type(&self) -> &'static str {
        langchain::Class::of(self).lc_type()
    }

    /// The id, if any.
    pub fn id(&self) -> Option<&str> {
        each!(self, m => m.id.as_deref(), Message::Remove(m) => Some(&m.id))
    }

    /// Sets the id (a remove keeps its target when given `None`).
    pub fn set_id(&mut self, id: Option<String>) {
        each!(self, m => m.id = id, Message::Remove(m) => {
            if let Some(id) = id {
                m.id = id;
            }
        })
    }

    /// The name, if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            Message::Function(m) => Some(&m.name),
            Message::Human(m) => m.name.as_deref(),
            Message::Ai(m) => m.name.as_deref(),
            Message::System(m) => m.name.as_deref(),
            Message::Tool(m) => m.name.as_deref(),
            Message::Chat(m) => m.name.as_deref(),
            Message::Remove(m) => m.name.as_deref(),
        }
    }

    /// The content (empty for a remove).
    pub fn content(&self) -> &Content {
        static EMPTY: Content = Content::Text(String::new());
        each!(self, m => &m.content, Message::Remove(_) => &EMPTY)
    }

    /// The content's text (see [`Content::text`]).
    pub fn text(&self) -> String {
        self.content().text()
    }

    /// The tool calls of an AI message (none for the others).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Message::Ai(m) => &m.tool_calls,
            _ => &[],
        }
    }

    /// LangChain's `additional_kwargs`.
    pub fn additional_kwargs(&self) -> &Map<String, Value> {
        each!(self, m => &m.additional_kwargs)
    }

    /// LangChain's `response_metadata`.
    pub fn response_metadata(&self) -> &Map<String, Value> {
        each!(self, m => &m.response_metadata)
    }

    /// The fields of the Python object Waypoint does not model.
    pub fn extra(&self) -> &Map<String, Value> {
        each!(self, m => &m.extra)
    }

    /// LangChain's dict form, `{"type": ..., "content": ..., ...}`, without the fields left
    /// at their defaults.
    pub fn to_json(&self) -> Value {
        langchain::to_value(self, langchain::Mode::Sparse)
    }

    /// What Python's `model_dump()` gives for this message: every field of its class, in
    /// the class's order, defaults included, then the [`extra`](Message::extra) ones.
    pub fn model_dump(&self) -> Value {
        langchain::to_value(self, langchain::Mode::Full)
    }

    /// The form LangGraph's encoding writes (what [`Serialize`] writes while
    /// [`writing_langgraph`](waypoint_checkpoint::serde::writing_langgraph) is true):
    /// `{"lc": 2, "type": "constructor", "id": [<module parts>, <class>], "ext": 5,
    /// "method": "model_validate_json", "args": [], "kwargs": <model_dump>}`.
    pub fn to_langgraph(&self) -> Value {
        serde_json::to_value(langchain::Lc2(self)).unwrap_or(Value::Null)
    }

    /// Reads any of the accepted JSON forms:
    ///
    /// - LangChain's dict form or Python's `model_dump()`, `{"type": "human", ...}`, for
    ///   every class (`type` is `human`, `ai`, `system`, `tool`, `chat`, `function`,
    ///   `remove`, or a chunk's class name such as `AIMessageChunk`);
    /// - LangChain's serialized constructor forms, `{"lc": 1, "type": "constructor", "id":
    ///   [..., "AIMessage"], "kwargs": {...}}` and LangGraph's `lc: 2` form (see
    ///   [`Message::to_langgraph`]);
    /// - OpenAI's form, `{"role": "user", "content": ...}` (`user`, `assistant`, `system`,
    ///   `developer`, `tool`, `function`);
    /// - a `[role, content]` pair, and a bare string (a human message).
    ///
    /// Keys the class does not define are kept in `extra`.
    pub fn from_json(value: Value) -> Result<Message, String> {
        langchain::from_json(value)
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Self {
        Message::human(text)
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if waypoint_checkpoint::serde::writing_langgraph() {
            return langchain::Lc2(self).serialize(s);
        }
        if s.is_human_readable() {
            return langchain::Dict(self, langchain::Mode::Sparse).serialize(s);
        }
        binary::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            return read::deserialize(d);
        }
        binary::deserialize(d)
    }
}
