//! Chat messages as LangChain shapes them: human, ai, system, tool and remove.
//!
//! In JSON (and any human-readable format) a message is LangChain's dict form, `{"type":
//! "human", "content": ...}`, and it is also read from OpenAI's form (`{"role": "user", ...}`),
//! LangChain's serialized constructor form (`{"lc": 1, "type": "constructor", ...}`, what
//! LangGraph's JSON serializer writes), a `["user", "text"]` pair and a bare string (a human
//! message). Binary formats get a fixed layout in which free JSON (content blocks, tool-call
//! arguments, artifacts) travels as JSON text, since bincode and postcard cannot decode
//! self-describing values.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// What a message says: text, or a list of content blocks (LangChain's `[{"type": "text",
/// "text": ...}, {"type": "image_url", ...}]`).
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content blocks, each a JSON object.
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

    fn from_json(value: Value) -> Result<Content, String> {
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

/// A tool call an AI message asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The call's id, which the tool message answering it repeats.
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    pub args: Value,
}

impl ToolCall {
    /// A call of `name` with `args`, with an id.
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: Value) -> Self {
        ToolCall {
            id: Some(id.into()),
            name: name.into(),
            args,
        }
    }
}

/// Token counts an AI message reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageMetadata {
    /// Tokens in the prompt.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
}

/// A message from the user.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HumanMessage {
    /// What it says.
    pub content: Content,
    /// Its id (`add_messages` gives one to a message without).
    pub id: Option<String>,
    /// An optional name of the speaker.
    pub name: Option<String>,
}

/// A message from the model.
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
    /// The tokens it reports.
    pub usage_metadata: Option<UsageMetadata>,
}

/// Instructions for the model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemMessage {
    /// What it says.
    pub content: Content,
    /// Its id.
    pub id: Option<String>,
    /// An optional name.
    pub name: Option<String>,
}

/// A tool's result, answering one tool call.
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
}

/// An instruction to `add_messages` to delete the message with `id`
/// ([`REMOVE_ALL_MESSAGES`] deletes every message before it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RemoveMessage {
    /// The id to delete.
    pub id: String,
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
    /// Deletes a message in `add_messages`.
    Remove(RemoveMessage),
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

    /// An instruction to delete the message `id` (LangGraph's `RemoveMessage(id=...)`).
    pub fn remove(id: impl Into<String>) -> Self {
        Message::Remove(RemoveMessage { id: id.into() })
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

    /// The same message with name `name` (a remove has no name: unchanged).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        match &mut self {
            Message::Human(m) => m.name = Some(name.into()),
            Message::Ai(m) => m.name = Some(name.into()),
            Message::System(m) => m.name = Some(name.into()),
            Message::Tool(m) => m.name = Some(name.into()),
            Message::Remove(_) => {}
        }
        self
    }

    /// LangChain's type name: `human`, `ai`, `system`, `tool` or `remove`.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Human(_) => "human",
            Message::Ai(_) => "ai",
            Message::System(_) => "system",
            Message::Tool(_) => "tool",
            Message::Remove(_) => "remove",
        }
    }

    /// The id, if any.
    pub fn id(&self) -> Option<&str> {
        match self {
            Message::Human(m) => m.id.as_deref(),
            Message::Ai(m) => m.id.as_deref(),
            Message::System(m) => m.id.as_deref(),
            Message::Tool(m) => m.id.as_deref(),
            Message::Remove(m) => Some(&m.id),
        }
    }

    /// Sets the id (a remove keeps its target when given `None`).
    pub fn set_id(&mut self, id: Option<String>) {
        match self {
            Message::Human(m) => m.id = id,
            Message::Ai(m) => m.id = id,
            Message::System(m) => m.id = id,
            Message::Tool(m) => m.id = id,
            Message::Remove(m) => {
                if let Some(id) = id {
                    m.id = id;
                }
            }
        }
    }

    /// The name, if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            Message::Human(m) => m.name.as_deref(),
            Message::Ai(m) => m.name.as_deref(),
            Message::System(m) => m.name.as_deref(),
            Message::Tool(m) => m.name.as_deref(),
            Message::Remove(_) => None,
        }
    }

    /// The content (empty for a remove).
    pub fn content(&self) -> &Content {
        static EMPTY: Content = Content::Text(String::new());
        match self {
            Message::Human(m) => &m.content,
            Message::Ai(m) => &m.content,
            Message::System(m) => &m.content,
            Message::Tool(m) => &m.content,
            Message::Remove(_) => &EMPTY,
        }
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

    /// LangChain's dict form, `{"type": ..., "content": ..., ...}`.
    pub fn to_json(&self) -> Value {
        // Cannot fail: every key is a string and every value is JSON already.
        self.serialize_dict(serde_json::value::Serializer)
            .unwrap_or(Value::Null)
    }

    /// Reads any of the accepted JSON forms (see the module docs).
    pub fn from_json(value: Value) -> Result<Message, String> {
        match value {
            Value::String(text) => Ok(Message::human(text)),
            Value::Array(pair) => match <[Value; 2]>::try_from(pair) {
                Ok([Value::String(role), content]) => {
                    let mut map = Map::new();
                    map.insert("role".into(), Value::String(role));
                    map.insert("content".into(), content);
                    from_map(map)
                }
                _ => Err("a message pair must be [role, content]".into()),
            },
            Value::Object(map) => from_map(map),
            other => Err(format!("not a message: {other}")),
        }
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Self {
        Message::human(text)
    }
}

/// A message from a JSON object in LangChain's, OpenAI's or the serialized constructor form.
fn from_map(mut map: Map<String, Value>) -> Result<Message, String> {
    // LangChain's serialized form: the kwargs hold the dict, the id names the class.
    if map.get("lc").is_some() && map.get("type").and_then(Value::as_str) == Some("constructor") {
        let class = map
            .get("id")
            .and_then(Value::as_array)
            .and_then(|path| path.last())
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let kind = match class.as_str() {
            "HumanMessage" | "HumanMessageChunk" => "human",
            "AIMessage" | "AIMessageChunk" => "ai",
            "SystemMessage" | "SystemMessageChunk" => "system",
            "ToolMessage" | "ToolMessageChunk" => "tool",
            "RemoveMessage" => "remove",
            other => return Err(format!("unknown message class `{other}`")),
        };
        let Some(Value::Object(mut kwargs)) = map.remove("kwargs") else {
            return Err(format!("serialized `{class}` has no kwargs"));
        };
        kwargs.insert("type".into(), json!(kind));
        return from_map(kwargs);
    }
    let kind = match (map.get("type"), map.get("role")) {
        (Some(Value::String(t)), _) => t.clone(),
        (_, Some(Value::String(role))) => match role.as_str() {
            "user" | "human" => "human".into(),
            "assistant" | "ai" => "ai".into(),
            "system" | "developer" => "system".into(),
            "tool" | "function" => "tool".into(),
            other => return Err(format!("unknown message role `{other}`")),
        },
        _ => return Err("a message needs a `type` or a `role`".into()),
    };
    let text = |map: &mut Map<String, Value>, key: &str| -> Result<Option<String>, String> {
        match map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("message `{key}` must be text, not {other}")),
        }
    };
    let content = Content::from_json(map.remove("content").unwrap_or(Value::Null))?;
    let id = text(&mut map, "id")?;
    let name = text(&mut map, "name")?;
    Ok(match kind.as_str() {
        "human" | "HumanMessageChunk" => Message::Human(HumanMessage { content, id, name }),
        "system" => Message::System(SystemMessage { content, id, name }),
        "ai" | "AIMessageChunk" => {
            let tool_calls = match map.remove("tool_calls") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(calls)) => calls
                    .into_iter()
                    .map(tool_call_from_json)
                    .collect::<Result<_, _>>()?,
                Some(other) => return Err(format!("`tool_calls` must be a list, not {other}")),
            };
            let usage_metadata = match map.remove("usage_metadata") {
                None | Some(Value::Null) => None,
                Some(usage) => Some(
                    serde_json::from_value(usage).map_err(|e| format!("usage_metadata: {e}"))?,
                ),
            };
            Message::Ai(AiMessage {
                content,
                id,
                name,
                tool_calls,
                usage_metadata,
            })
        }
        "tool" => Message::Tool(ToolMessage {
            content,
            id,
            name,
            tool_call_id: text(&mut map, "tool_call_id")?
                .ok_or("a tool message needs a `tool_call_id`")?,
            artifact: map.remove("artifact").filter(|a| !a.is_null()),
        }),
        "remove" => Message::Remove(RemoveMessage {
            id: id.ok_or("a remove message needs an `id`")?,
        }),
        other => return Err(format!("unknown message type `{other}`")),
    })
}

/// A tool call in LangChain's form (`{"id", "name", "args"}`) or OpenAI's (`{"id",
/// "function": {"name", "arguments": "<json text>"}}`).
fn tool_call_from_json(value: Value) -> Result<ToolCall, String> {
    let Value::Object(mut call) = value else {
        return Err("a tool call must be an object".into());
    };
    let id = call
        .remove("id")
        .and_then(|v| v.as_str().map(str::to_owned));
    if let Some(Value::Object(mut function)) = call.remove("function") {
        let name = function
            .remove("name")
            .and_then(|v| v.as_str().map(str::to_owned))
            .ok_or("a tool call needs a function name")?;
        let args = match function.remove("arguments") {
            Some(Value::String(text)) if text.trim().is_empty() => json!({}),
            Some(Value::String(text)) => serde_json::from_str(&text)
                .map_err(|e| format!("tool call `{name}` has arguments that are not JSON: {e}"))?,
            Some(other) => other,
            None => json!({}),
        };
        return Ok(ToolCall { id, name, args });
    }
    let name = call
        .remove("name")
        .and_then(|v| v.as_str().map(str::to_owned))
        .ok_or("a tool call needs a name")?;
    let args = call.remove("args").unwrap_or_else(|| json!({}));
    Ok(ToolCall { id, name, args })
}

/// The fixed layout binary formats use, as a sequence (MessagePack then writes no field
/// names); free JSON is carried as JSON text. Written as [`BinaryRef`], which must keep the
/// same fields in the same order.
struct Binary {
    kind: u8,
    /// Text content, or the blocks as JSON text when `blocks` is set.
    content: String,
    blocks: bool,
    id: Option<String>,
    name: Option<String>,
    /// `(id, name, args as JSON text)`.
    tool_calls: Vec<(Option<String>, String, String)>,
    usage: Option<(u64, u64, u64)>,
    tool_call_id: Option<String>,
    artifact: Option<String>,
}

/// The fields of [`Binary`], in order.
type BinaryFields = (
    u8,
    String,
    bool,
    Option<String>,
    Option<String>,
    Vec<(Option<String>, String, String)>,
    Option<(u64, u64, u64)>,
    Option<String>,
    Option<String>,
);

impl<'de> Deserialize<'de> for Binary {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (kind, content, blocks, id, name, tool_calls, usage, tool_call_id, artifact) =
            BinaryFields::deserialize(d)?;
        Ok(Binary {
            kind,
            content,
            blocks,
            id,
            name,
            tool_calls,
            usage,
            tool_call_id,
            artifact,
        })
    }
}

fn json_text<E: serde::ser::Error>(value: &Value) -> Result<String, E> {
    serde_json::to_string(value).map_err(E::custom)
}

fn parse_json<E: serde::de::Error>(text: &str) -> Result<Value, E> {
    serde_json::from_str(text).map_err(E::custom)
}

/// [`Binary`] borrowed from a message, for writing without copying its strings.
struct BinaryRef<'a> {
    kind: u8,
    content: std::borrow::Cow<'a, str>,
    blocks: bool,
    id: Option<&'a str>,
    name: Option<&'a str>,
    tool_calls: Vec<(Option<&'a str>, &'a str, String)>,
    usage: Option<(u64, u64, u64)>,
    tool_call_id: Option<&'a str>,
    artifact: Option<String>,
}

impl Serialize for BinaryRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (
            self.kind,
            &self.content,
            self.blocks,
            self.id,
            self.name,
            &self.tool_calls,
            self.usage,
            self.tool_call_id,
            &self.artifact,
        )
            .serialize(s)
    }
}

/// A tool call as LangChain's dict writes it.
struct ToolCallJson<'a>(&'a ToolCall);

impl Serialize for ToolCallJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("id", &self.0.id)?;
        map.serialize_entry("name", &self.0.name)?;
        map.serialize_entry("args", &self.0.args)?;
        map.serialize_entry("type", "tool_call")?;
        map.end()
    }
}

impl Message {
    /// LangChain's dict form written straight to `s`: what [`Message::to_json`] builds.
    fn serialize_dict<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("type", self.kind())?;
        match self.content() {
            _ if matches!(self, Message::Remove(_)) => {}
            Content::Text(text) => map.serialize_entry("content", text)?,
            Content::Blocks(blocks) => map.serialize_entry("content", blocks)?,
        }
        if let Some(id) = self.id() {
            map.serialize_entry("id", id)?;
        }
        if let Some(name) = self.name() {
            map.serialize_entry("name", name)?;
        }
        match self {
            Message::Ai(m) => {
                if !m.tool_calls.is_empty() {
                    let calls: Vec<ToolCallJson<'_>> =
                        m.tool_calls.iter().map(ToolCallJson).collect();
                    map.serialize_entry("tool_calls", &calls)?;
                }
                if let Some(usage) = &m.usage_metadata {
                    map.serialize_entry("usage_metadata", usage)?;
                }
            }
            Message::Tool(m) => {
                map.serialize_entry("tool_call_id", &m.tool_call_id)?;
                if let Some(artifact) = &m.artifact {
                    map.serialize_entry("artifact", artifact)?;
                }
            }
            _ => {}
        }
        map.end()
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return self.serialize_dict(s);
        }
        let (content, blocks) = match self.content() {
            Content::Text(text) => (std::borrow::Cow::Borrowed(text.as_str()), false),
            Content::Blocks(blocks) => (
                std::borrow::Cow::Owned(json_text(&Value::Array(blocks.clone()))?),
                true,
            ),
        };
        let kind = match self {
            Message::Human(_) => 0,
            Message::Ai(_) => 1,
            Message::System(_) => 2,
            Message::Tool(_) => 3,
            Message::Remove(_) => 4,
        };
        let mut b = BinaryRef {
            kind,
            content,
            blocks,
            id: self.id(),
            name: self.name(),
            tool_calls: Vec::new(),
            usage: None,
            tool_call_id: None,
            artifact: None,
        };
        match self {
            Message::Ai(m) => {
                for call in &m.tool_calls {
                    b.tool_calls.push((
                        call.id.as_deref(),
                        call.name.as_str(),
                        json_text(&call.args)?,
                    ));
                }
                b.usage = m
                    .usage_metadata
                    .map(|u| (u.input_tokens, u.output_tokens, u.total_tokens));
            }
            Message::Tool(m) => {
                b.tool_call_id = Some(&m.tool_call_id);
                b.artifact = m.artifact.as_ref().map(json_text).transpose()?;
            }
            _ => {}
        }
        b.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            return Message::from_json(Value::deserialize(d)?).map_err(D::Error::custom);
        }
        let b = Binary::deserialize(d)?;
        let content = if b.blocks {
            match parse_json::<D::Error>(&b.content)? {
                Value::Array(blocks) => Content::Blocks(blocks),
                _ => return Err(D::Error::custom("message blocks must be a list")),
            }
        } else {
            Content::Text(b.content)
        };
        let (id, name) = (b.id, b.name);
        Ok(match b.kind {
            0 => Message::Human(HumanMessage { content, id, name }),
            1 => Message::Ai(AiMessage {
                content,
                id,
                name,
                tool_calls: b
                    .tool_calls
                    .into_iter()
                    .map(|(id, name, args)| {
                        Ok(ToolCall {
                            id,
                            name,
                            args: parse_json::<D::Error>(&args)?,
                        })
                    })
                    .collect::<Result<_, D::Error>>()?,
                usage_metadata: b.usage.map(|(i, o, t)| UsageMetadata {
                    input_tokens: i,
                    output_tokens: o,
                    total_tokens: t,
                }),
            }),
            2 => Message::System(SystemMessage { content, id, name }),
            3 => Message::Tool(ToolMessage {
                content,
                id,
                name,
                tool_call_id: b
                    .tool_call_id
                    .ok_or_else(|| D::Error::custom("a tool message needs a tool_call_id"))?,
                artifact: b
                    .artifact
                    .as_deref()
                    .map(parse_json::<D::Error>)
                    .transpose()?,
            }),
            4 => Message::Remove(RemoveMessage {
                id: id.ok_or_else(|| D::Error::custom("a remove message needs an id"))?,
            }),
            other => return Err(D::Error::custom(format!("unknown message kind {other}"))),
        })
    }
}
