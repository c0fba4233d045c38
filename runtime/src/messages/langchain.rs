//! LangChain's forms of a message: every JSON form read, and the dict form, Python's
//! `model_dump()` and LangGraph's `lc: 2` constructor form written.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};

use crate::messages::{
    AiMessage, ChatMessage, Content, FunctionMessage, HumanMessage, InvalidToolCall, Message,
    RemoveMessage, SystemMessage, ToolCall, ToolCallChunk, ToolMessage, ToolStatus, UsageMetadata,
};

/// Waypoint's kinds of message, one per [`Message`] variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Human,
    Ai,
    System,
    Tool,
    Chat,
    Function,
    Remove,
}

impl Kind {
    fn of(message: &Message) -> Kind {
        match message {
            Message::Human(_) => Kind::Human,
            Message::Ai(_) => Kind::Ai,
            Message::System(_) => Kind::System,
            Message::Tool(_) => Kind::Tool,
            Message::Chat(_) => Kind::Chat,
            Message::Function(_) => Kind::Function,
            Message::Remove(_) => Kind::Remove,
        }
    }

    /// LangChain's `type` of the plain class.
    pub(crate) fn lc_type(self) -> &'static str {
        match self {
            Kind::Human => "human",
            Kind::Ai => "ai",
            Kind::System => "system",
            Kind::Tool => "tool",
            Kind::Chat => "chat",
            Kind::Function => "function",
            Kind::Remove => "remove",
        }
    }
}

/// A LangChain message class: a kind, and whether it is the kind's `*MessageChunk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Class {
    pub(crate) kind: Kind,
    pub(crate) chunk: bool,
}

/// Every class, with its name and module (langchain-core 1.x).
const CLASSES: [(Kind, bool, &str, &str); 13] = [
    (
        Kind::Human,
        false,
        "HumanMessage",
        "langchain_core.messages.human",
    ),
    (
        Kind::Human,
        true,
        "HumanMessageChunk",
        "langchain_core.messages.human",
    ),
    (Kind::Ai, false, "AIMessage", "langchain_core.messages.ai"),
    (
        Kind::Ai,
        true,
        "AIMessageChunk",
        "langchain_core.messages.ai",
    ),
    (
        Kind::System,
        false,
        "SystemMessage",
        "langchain_core.messages.system",
    ),
    (
        Kind::System,
        true,
        "SystemMessageChunk",
        "langchain_core.messages.system",
    ),
    (
        Kind::Tool,
        false,
        "ToolMessage",
        "langchain_core.messages.tool",
    ),
    (
        Kind::Tool,
        true,
        "ToolMessageChunk",
        "langchain_core.messages.tool",
    ),
    (
        Kind::Chat,
        false,
        "ChatMessage",
        "langchain_core.messages.chat",
    ),
    (
        Kind::Chat,
        true,
        "ChatMessageChunk",
        "langchain_core.messages.chat",
    ),
    (
        Kind::Function,
        false,
        "FunctionMessage",
        "langchain_core.messages.function",
    ),
    (
        Kind::Function,
        true,
        "FunctionMessageChunk",
        "langchain_core.messages.function",
    ),
    (
        Kind::Remove,
        false,
        "RemoveMessage",
        "langchain_core.messages.modifier",
    ),
];

impl Class {
    pub(crate) fn of(message: &Message) -> Class {
        Class {
            kind: Kind::of(message),
            chunk: message.is_chunk(),
        }
    }

    fn entry(self) -> (&'static str, &'static str) {
        CLASSES
            .iter()
            .find(|(kind, chunk, _, _)| *kind == self.kind && *chunk == self.chunk)
            .map_or(("RemoveMessage", "langchain_core.messages.modifier"), |e| {
                (e.2, e.3)
            })
    }

    /// The Python class name.
    pub(crate) fn name(self) -> &'static str {
        self.entry().0
    }

    /// The Python module.
    pub(crate) fn module(self) -> &'static str {
        self.entry().1
    }

    /// The `type` field: the kind's for a plain class, the class name for a chunk.
    pub(crate) fn lc_type(self) -> &'static str {
        if self.chunk {
            self.name()
        } else {
            self.kind.lc_type()
        }
    }

    /// The class whose `type` field is `lc_type`.
    pub(crate) fn from_type(lc_type: &str) -> Option<Class> {
        CLASSES
            .iter()
            .find(|(kind, chunk, name, _)| {
                if *chunk {
                    *name == lc_type
                } else {
                    kind.lc_type() == lc_type
                }
            })
            .map(|&(kind, chunk, _, _)| Class { kind, chunk })
    }

    /// The class named `name`.
    pub(crate) fn from_name(name: &str) -> Option<Class> {
        CLASSES
            .iter()
            .find(|e| e.2 == name)
            .map(|&(kind, chunk, _, _)| Class { kind, chunk })
    }
}

// ---------------------------------------------------------------------------------------
// Reading.

/// A message from any accepted JSON form (see [`Message::from_json`]).
pub(crate) fn from_json(value: Value) -> Result<Message, String> {
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

/// A message from a JSON object in a constructor form, LangChain's dict form or OpenAI's.
fn from_map(mut map: Map<String, Value>) -> Result<Message, String> {
    if map.contains_key("lc") && map.get("type").and_then(Value::as_str) == Some("constructor") {
        return from_constructor(map);
    }
    match (map.remove("type"), map.get("role")) {
        (Some(Value::String(lc_type)), _) => from_dict(class_of_type(&lc_type)?, map),
        (Some(other), _) => Err(type_not_text(&other)),
        (None, Some(_)) => {
            let class = openai_class(map.remove("role"))?;
            from_dict(class, map)
        }
        (None, None) => Err(NO_TYPE.into()),
    }
}

/// Why a message map with neither `type` nor `role` is refused.
pub(crate) const NO_TYPE: &str = "a message needs a `type` or a `role`";

/// The class whose `type` field is `lc_type`, or why there is none.
fn class_of_type(lc_type: &str) -> Result<Class, String> {
    Class::from_type(lc_type).ok_or_else(|| unknown_type(lc_type))
}

/// Why a `type` naming no class is refused.
pub(crate) fn unknown_type(lc_type: &str) -> String {
    format!("unknown message type `{lc_type}`")
}

/// Why a `type` that is not text is refused.
pub(crate) fn type_not_text(value: &Value) -> String {
    format!("a message `type` must be text, not {value}")
}

/// A message from LangChain's serialized constructor form (`lc: 1`) or LangGraph's
/// (`lc: 2`): the id names the class, the kwargs hold its fields.
fn from_constructor(mut map: Map<String, Value>) -> Result<Message, String> {
    let (class, dotted) = constructor_class(map.remove("id"))?;
    from_kwargs(class, &dotted, map.remove("kwargs"))
}

/// Why a constructor id that is not a list is refused.
pub(crate) const NO_CLASS_ID: &str = "a serialized message needs an `id` list naming its class";
/// Why a constructor id with an item that is not text is refused.
pub(crate) const ID_NOT_NAMES: &str = "a constructor id must be a list of names";

/// The class a constructor form's `id` names, and the id joined with dots (for errors).
pub(crate) fn constructor_class(id: Option<Value>) -> Result<(Class, String), String> {
    let path: Vec<&str> = match &id {
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| p.as_str().ok_or(ID_NOT_NAMES))
            .collect::<Result<_, _>>()?,
        _ => return Err(NO_CLASS_ID.into()),
    };
    let dotted = path.join(".");
    let class = match path.split_last() {
        Some((name, [first, ..])) => message_class(first, name),
        _ => None,
    };
    match class {
        Some(class) => Ok((class, dotted)),
        None => Err(not_a_message_class(&dotted)),
    }
}

/// The message class named `name` in a module path starting with `first`.
pub(crate) fn message_class(first: &str, name: &str) -> Option<Class> {
    match first {
        "langchain_core" | "langchain" => Class::from_name(name),
        _ => None,
    }
}

/// Why a constructor id naming another class is refused.
pub(crate) fn not_a_message_class(dotted: &str) -> String {
    format!("`{dotted}` is not a LangChain message class")
}

/// A message of `class` from a constructor form's kwargs (`dotted` names the class in
/// errors).
pub(crate) fn from_kwargs(
    class: Class,
    dotted: &str,
    kwargs: Option<Value>,
) -> Result<Message, String> {
    let mut kwargs = match kwargs {
        Some(Value::Object(kwargs)) => kwargs,
        None | Some(Value::Null) => Map::new(),
        Some(other) => return Err(kwargs_not_object(dotted, &other)),
    };
    // The class decides; a `type` among the kwargs only repeats it.
    kwargs.remove("type");
    from_dict(class, kwargs)
}

/// Why a constructor form's kwargs that are not a map are refused.
fn kwargs_not_object(dotted: &str, kwargs: &Value) -> String {
    format!("serialized `{dotted}` has kwargs {kwargs}")
}

/// The class of OpenAI's form for `role` (`user`, `assistant`, `system`, `developer`,
/// `tool`, `function`, and LangChain's `human` and `ai`).
pub(crate) fn openai_class(role: Option<Value>) -> Result<Class, String> {
    let kind = match role {
        Some(Value::String(role)) => match role.as_str() {
            "user" | "human" => Kind::Human,
            "assistant" | "ai" => Kind::Ai,
            "system" | "developer" => Kind::System,
            "tool" => Kind::Tool,
            "function" => Kind::Function,
            other => return Err(format!("unknown message role `{other}`")),
        },
        other => return Err(format!("a message `role` must be text, not {other:?}")),
    };
    Ok(Class { kind, chunk: false })
}

/// `value` as text: `None` when absent or null, an error naming `key` otherwise.
fn text(value: Option<Value>, key: &str) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("message `{key}` must be text, not {other}")),
    }
}

/// Removes `key` from `map`: text, or `None` when absent or null.
fn take_text(map: &mut Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    text(map.remove(key), key)
}

/// `value` as an object: empty when absent or null, an error naming `key` otherwise.
fn object(value: Option<Value>, key: &str) -> Result<Map<String, Value>, String> {
    match value {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(object)) => Ok(object),
        Some(other) => Err(format!("message `{key}` must be an object, not {other}")),
    }
}

/// `value` as a list whose items `item` reads: empty when absent or null.
fn list<T>(
    value: Option<Value>,
    key: &str,
    item: impl Fn(Value) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items.into_iter().map(item).collect(),
        Some(other) => Err(not_a_list(key, &other)),
    }
}

/// Why a field that must be a list is refused.
pub(crate) fn not_a_list(key: &str, value: &Value) -> String {
    format!("`{key}` must be a list, not {value}")
}

/// Removes `key` from `map`: a list whose items `item` reads, empty when absent or null.
fn take_list<T>(
    map: &mut Map<String, Value>,
    key: &str,
    item: impl Fn(Value) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    list(map.remove(key), key, item)
}

/// The fields of a message dict as a reader took them: the five every class has, those of
/// its class a reader took out once it knew the class (as JSON, or already read), and every
/// other key in `rest`, which ends as the message's `extra`.
///
/// A class field is taken from its slot if set, else from `rest`: a streaming reader puts
/// it in `rest` while the class is unknown, and in its slot (read later, so it wins) once
/// `type` has told the class. Only the class's own slots are ever set.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    pub(crate) content: Option<Value>,
    pub(crate) id: Option<Value>,
    pub(crate) name: Option<Value>,
    pub(crate) additional_kwargs: Option<Value>,
    pub(crate) response_metadata: Option<Value>,
    /// An AI message's tool calls, read.
    pub(crate) tool_calls: Option<Result<Vec<ToolCall>, String>>,
    /// An AI message's usage, read (`None` inside for null).
    pub(crate) usage_metadata: Option<Result<Option<UsageMetadata>, String>>,
    pub(crate) invalid_tool_calls: Option<Value>,
    pub(crate) tool_call_id: Option<Value>,
    pub(crate) status: Option<Value>,
    pub(crate) artifact: Option<Value>,
    pub(crate) rest: Map<String, Value>,
}

impl Fields {
    /// The fields of a dict, the five common ones taken out.
    fn from_map(mut map: Map<String, Value>) -> Fields {
        Fields {
            content: map.remove("content"),
            id: map.remove("id"),
            name: map.remove("name"),
            additional_kwargs: map.remove("additional_kwargs"),
            response_metadata: map.remove("response_metadata"),
            rest: map,
            ..Fields::default()
        }
    }
}

/// A class field: its slot if set (read last, so it wins), else `rest`'s entry.
fn take_field(slot: Option<Value>, rest: &mut Map<String, Value>, key: &str) -> Option<Value> {
    let early = rest.remove(key);
    slot.or(early)
}

/// A message of `class` from the fields of its dict; keys the class does not define go to
/// `extra`.
pub(crate) fn from_dict(class: Class, map: Map<String, Value>) -> Result<Message, String> {
    from_fields(class, &mut Fields::from_map(map))
}

/// A message of `class` from the fields a reader took (see [`Fields`]).
pub(crate) fn from_fields(class: Class, fields: &mut Fields) -> Result<Message, String> {
    // Taken field by field: moving the whole `Fields` would copy it.
    let Fields {
        content,
        id,
        name,
        additional_kwargs,
        response_metadata,
        tool_calls,
        usage_metadata,
        invalid_tool_calls,
        tool_call_id,
        status,
        artifact,
        rest,
    } = fields;
    let mut map = std::mem::take(rest);
    let content = Content::from_json(content.take().unwrap_or(Value::Null))?;
    let id = text(id.take(), "id")?;
    let name = text(name.take(), "name")?;
    let additional_kwargs = object(additional_kwargs.take(), "additional_kwargs")?;
    let response_metadata = object(response_metadata.take(), "response_metadata")?;
    let chunk = class.chunk;
    Ok(match class.kind {
        Kind::Human => Message::Human(HumanMessage {
            content,
            id,
            name,
            additional_kwargs,
            response_metadata,
            extra: map,
            chunk,
        }),
        Kind::System => Message::System(SystemMessage {
            content,
            id,
            name,
            additional_kwargs,
            response_metadata,
            extra: map,
            chunk,
        }),
        Kind::Ai => {
            let early = map.remove("tool_calls");
            let tool_calls = match tool_calls.take() {
                Some(read) => read?,
                None => list(early, "tool_calls", tool_call_from_json)?,
            };
            let invalid_tool_calls = list(
                take_field(invalid_tool_calls.take(), &mut map, "invalid_tool_calls"),
                "invalid_tool_calls",
                invalid_tool_call_from_json,
            )?;
            let early = map.remove("usage_metadata");
            let usage_metadata = match usage_metadata.take() {
                Some(read) => read?,
                None => usage_from_json(early)?,
            };
            let read_chunk = |c: Value| {
                serde_json::from_value::<ToolCallChunk>(c)
                    .map_err(|e| format!("tool_call_chunks: {e}"))
            };
            let (tool_call_chunks, chunk_position) = if chunk {
                let chunks = take_list(&mut map, "tool_call_chunks", read_chunk)?;
                (chunks, take_text(&mut map, "chunk_position")?)
            } else {
                // A plain AIMessage has neither field: found as attributes of the Python
                // object, they fill the fields only in the form the fields write back.
                let chunks = match map.get("tool_call_chunks") {
                    Some(Value::Array(items)) if !items.is_empty() => items
                        .iter()
                        .cloned()
                        .map(read_chunk)
                        .collect::<Result<Vec<_>, _>>()
                        .ok(),
                    _ => None,
                };
                if chunks.is_some() {
                    map.remove("tool_call_chunks");
                }
                let position = match map.get("chunk_position") {
                    Some(Value::String(_)) => take_text(&mut map, "chunk_position")?,
                    _ => None,
                };
                (chunks.unwrap_or_default(), position)
            };
            Message::Ai(AiMessage {
                content,
                id,
                name,
                tool_calls,
                invalid_tool_calls,
                usage_metadata,
                additional_kwargs,
                response_metadata,
                extra: map,
                chunk,
                tool_call_chunks,
                chunk_position,
            })
        }
        Kind::Tool => {
            let tool_call_id = match take_field(tool_call_id.take(), &mut map, "tool_call_id") {
                Some(Value::String(id)) => id,
                // Python turns a number into its text.
                Some(Value::Number(n)) => n.to_string(),
                None | Some(Value::Null) => {
                    return Err("a tool message needs a `tool_call_id`".into());
                }
                Some(other) => return Err(format!("`tool_call_id` must be text, not {other}")),
            };
            let status =
                match text(take_field(status.take(), &mut map, "status"), "status")?.as_deref() {
                    None | Some("success") => ToolStatus::Success,
                    Some("error") => ToolStatus::Error,
                    Some(other) => {
                        return Err(format!(
                            "a tool message's `status` is `success` or `error`, not `{other}`"
                        ));
                    }
                };
            Message::Tool(ToolMessage {
                content,
                id,
                name,
                tool_call_id,
                artifact: take_field(artifact.take(), &mut map, "artifact")
                    .filter(|a| !a.is_null()),
                status,
                additional_kwargs,
                response_metadata,
                extra: map,
                chunk,
            })
        }
        Kind::Chat => Message::Chat(ChatMessage {
            content,
            id,
            name,
            role: take_text(&mut map, "role")?.ok_or("a chat message needs a `role`")?,
            additional_kwargs,
            response_metadata,
            extra: map,
            chunk,
        }),
        Kind::Function => Message::Function(FunctionMessage {
            content,
            id,
            name: name.ok_or("a function message needs a `name`")?,
            additional_kwargs,
            response_metadata,
            extra: map,
            chunk,
        }),
        Kind::Remove => {
            if !content.is_empty() {
                return Err("a remove message has no content".into());
            }
            Message::Remove(RemoveMessage {
                id: id.ok_or("a remove message needs an `id`")?,
                name,
                additional_kwargs,
                response_metadata,
                extra: map,
            })
        }
    })
}

/// An AI message's `usage_metadata` from its JSON: `None` when absent or null.
pub(crate) fn usage_from_json(value: Option<Value>) -> Result<Option<UsageMetadata>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(usage) => serde_json::from_value::<UsageMetadata>(usage)
            .map(Some)
            .map_err(|e| usage_error(&e)),
    }
}

/// An error reading `usage_metadata`, named so.
pub(crate) fn usage_error(error: &dyn std::fmt::Display) -> String {
    format!("usage_metadata: {error}")
}

/// A tool call in LangChain's form (`{"name", "args", "id", "type"}`, other keys kept) or
/// OpenAI's (`{"id", "function": {"name", "arguments": "<json text>"}}`).
fn tool_call_from_json(value: Value) -> Result<ToolCall, String> {
    let Value::Object(mut call) = value else {
        return Err(TOOL_CALL_NOT_OBJECT.into());
    };
    let id = call.remove("id");
    let function = call.remove("function");
    let name = call.remove("name");
    let args = call.remove("args");
    // The type only says it is a tool call.
    call.remove("type");
    tool_call_from_parts(id, function, name, args, call)
}

/// Why a tool call that is not an object is refused.
pub(crate) const TOOL_CALL_NOT_OBJECT: &str = "a tool call must be an object";

/// A tool call from its dict's `id`, `function`, `name` and `args` and its other keys but
/// `type` (see [`tool_call_from_json`]).
pub(crate) fn tool_call_from_parts(
    id: Option<Value>,
    function: Option<Value>,
    name: Option<Value>,
    args: Option<Value>,
    extra: Map<String, Value>,
) -> Result<ToolCall, String> {
    let id = text(id, "id").map_err(|e| format!("tool call: {e}"))?;
    if let Some(Value::Object(mut function)) = function {
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
        return Ok(ToolCall {
            id,
            name,
            args,
            extra: Map::new(),
        });
    }
    let name = match name {
        Some(Value::String(name)) => name,
        _ => return Err("a tool call needs a name".into()),
    };
    Ok(ToolCall {
        id,
        name,
        args: args.unwrap_or_else(|| json!({})),
        extra,
    })
}

/// An invalid tool call (`{"type", "id", "name", "args", "error"}`, other keys kept).
fn invalid_tool_call_from_json(value: Value) -> Result<InvalidToolCall, String> {
    let Value::Object(mut call) = value else {
        return Err("an invalid tool call must be an object".into());
    };
    let mut text =
        |key: &str| take_text(&mut call, key).map_err(|e| format!("invalid tool call: {e}"));
    let (id, name, args, error) = (text("id")?, text("name")?, text("args")?, text("error")?);
    call.remove("type");
    Ok(InvalidToolCall {
        id,
        name,
        args,
        error,
        extra: call,
    })
}

// ---------------------------------------------------------------------------------------
// Writing.

/// Which fields a dict holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Python's `model_dump()`: every field of the class, in its order, then the extra ones.
    Full,
    /// LangChain's dict form without the fields at their defaults (`type` first).
    Sparse,
    /// What the binary layout's nine fields do not hold (see `binary`).
    Extension,
}

/// A message written as a dict in `Mode`.
pub(crate) struct Dict<'a>(pub(crate) &'a Message, pub(crate) Mode);

impl Serialize for Dict<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        write_fields(&mut map, self.0, self.1)?;
        map.end()
    }
}

/// A message as a JSON value in `mode`.
pub(crate) fn to_value(message: &Message, mode: Mode) -> Value {
    // Cannot fail: every key is text and every value is JSON already.
    serde_json::to_value(Dict(message, mode)).unwrap_or(Value::Null)
}

/// LangGraph's `lc: 2` constructor form of a message (see [`Message::to_langgraph`]).
pub(crate) struct Lc2<'a>(pub(crate) &'a Message);

impl Serialize for Lc2<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let class = Class::of(self.0);
        let id: Vec<&str> = class
            .module()
            .split('.')
            .chain(std::iter::once(class.name()))
            .collect();
        let mut map = s.serialize_map(Some(7))?;
        map.serialize_entry("lc", &2)?;
        map.serialize_entry("type", "constructor")?;
        map.serialize_entry("id", &id)?;
        map.serialize_entry("ext", &5)?;
        map.serialize_entry("method", "model_validate_json")?;
        map.serialize_entry("args", &Vec::<Value>::new())?;
        map.serialize_entry("kwargs", &Dict(self.0, Mode::Full))?;
        map.end()
    }
}

/// Whether the tool calls carry keys the binary layout has no place for.
pub(crate) fn calls_need_extension(ai: &AiMessage) -> bool {
    ai.tool_calls.iter().any(|c| !c.extra.is_empty())
}

/// Whether the usage carries more than the three counts the binary layout holds.
pub(crate) fn usage_needs_extension(ai: &AiMessage) -> bool {
    ai.usage_metadata
        .as_ref()
        .is_some_and(|u| !u.details.is_empty())
}

/// Whether a message has anything the binary layout's nine fields do not hold.
pub(crate) fn needs_extension(message: &Message) -> bool {
    let common = message.is_chunk()
        || !message.additional_kwargs().is_empty()
        || !message.response_metadata().is_empty()
        || !message.extra().is_empty();
    common
        || match message {
            Message::Ai(m) => {
                calls_need_extension(m)
                    || usage_needs_extension(m)
                    || !m.invalid_tool_calls.is_empty()
                    || !m.tool_call_chunks.is_empty()
                    || m.chunk_position.is_some()
            }
            Message::Tool(m) => m.status != ToolStatus::Success,
            Message::Chat(_) | Message::Function(_) => true,
            Message::Human(_) | Message::System(_) | Message::Remove(_) => false,
        }
}

/// Writes the fields of `message` in `mode` (see [`Mode`]).
fn write_fields<M: SerializeMap>(
    map: &mut M,
    message: &Message,
    mode: Mode,
) -> Result<(), M::Error> {
    let class = Class::of(message);
    let full = mode == Mode::Full;
    let sparse = mode == Mode::Sparse;
    let (additional_kwargs, response_metadata) =
        (message.additional_kwargs(), message.response_metadata());
    // The keys written as fields; an `extra` key among them is left out.
    let mut fields: Vec<&'static str> = Vec::with_capacity(12);
    macro_rules! entry {
        ($map:expr, $key:expr, $value:expr) => {{
            fields.push($key);
            $map.serialize_entry($key, $value)
        }};
    }
    if full {
        entry!(map, "content", message.content())?;
        entry!(map, "additional_kwargs", additional_kwargs)?;
        entry!(map, "response_metadata", response_metadata)?;
        entry!(map, "type", &class.lc_type())?;
        entry!(map, "name", &message.name())?;
        entry!(map, "id", &message.id())?;
    } else {
        if sparse || class.chunk {
            entry!(map, "type", &class.lc_type())?;
        }
        if sparse {
            if class.kind != Kind::Remove {
                entry!(map, "content", message.content())?;
            }
            if let Some(id) = message.id() {
                entry!(map, "id", &id)?;
            }
            if let Some(name) = message.name() {
                entry!(map, "name", &name)?;
            }
        }
    }
    match message {
        Message::Ai(m) => {
            let calls: Vec<ToolCallJson<'_>> = m.tool_calls.iter().map(ToolCallJson).collect();
            let invalid: Vec<InvalidToolCallJson<'_>> = m
                .invalid_tool_calls
                .iter()
                .map(InvalidToolCallJson)
                .collect();
            let calls_wanted = match mode {
                Mode::Full => true,
                Mode::Sparse => !calls.is_empty(),
                Mode::Extension => calls_need_extension(m),
            };
            if calls_wanted {
                entry!(map, "tool_calls", &calls)?;
            }
            if full || !invalid.is_empty() {
                entry!(map, "invalid_tool_calls", &invalid)?;
            }
            let usage_wanted = match mode {
                Mode::Full => true,
                Mode::Sparse => m.usage_metadata.is_some(),
                Mode::Extension => usage_needs_extension(m),
            };
            if usage_wanted {
                entry!(map, "usage_metadata", &m.usage_metadata)?;
            }
            if (full && m.chunk) || !m.tool_call_chunks.is_empty() {
                entry!(map, "tool_call_chunks", &m.tool_call_chunks)?;
            }
            if (full && m.chunk) || m.chunk_position.is_some() {
                entry!(map, "chunk_position", &m.chunk_position)?;
            }
        }
        Message::Tool(m) => {
            if mode != Mode::Extension {
                entry!(map, "tool_call_id", &m.tool_call_id)?;
            }
            if full || (sparse && m.artifact.is_some()) {
                entry!(map, "artifact", &m.artifact)?;
            }
            if full || m.status != ToolStatus::Success {
                entry!(map, "status", &m.status.as_str())?;
            }
        }
        Message::Chat(m) => entry!(map, "role", &m.role)?,
        Message::Human(_) | Message::System(_) | Message::Function(_) | Message::Remove(_) => {}
    }
    if !full {
        if !additional_kwargs.is_empty() {
            entry!(map, "additional_kwargs", additional_kwargs)?;
        }
        if !response_metadata.is_empty() {
            entry!(map, "response_metadata", response_metadata)?;
        }
    }
    let standard = standard_keys(class);
    for (key, value) in message.extra() {
        if !standard.contains(&key.as_str()) && !fields.contains(&key.as_str()) {
            map.serialize_entry(key, value)?;
        }
    }
    Ok(())
}

/// The fields `model_dump()` gives for `class`, which `extra` never holds.
fn standard_keys(class: Class) -> &'static [&'static str] {
    const BASE: &[&str] = &[
        "content",
        "additional_kwargs",
        "response_metadata",
        "type",
        "name",
        "id",
    ];
    match (class.kind, class.chunk) {
        (Kind::Ai, false) => &[
            "content",
            "additional_kwargs",
            "response_metadata",
            "type",
            "name",
            "id",
            "tool_calls",
            "invalid_tool_calls",
            "usage_metadata",
        ],
        (Kind::Ai, true) => &[
            "content",
            "additional_kwargs",
            "response_metadata",
            "type",
            "name",
            "id",
            "tool_calls",
            "invalid_tool_calls",
            "usage_metadata",
            "tool_call_chunks",
            "chunk_position",
        ],
        (Kind::Tool, _) => &[
            "content",
            "additional_kwargs",
            "response_metadata",
            "type",
            "name",
            "id",
            "tool_call_id",
            "artifact",
            "status",
        ],
        (Kind::Chat, _) => &[
            "content",
            "additional_kwargs",
            "response_metadata",
            "type",
            "name",
            "id",
            "role",
        ],
        _ => BASE,
    }
}

/// A tool call as LangChain's dict writes it: `{"name", "args", "id", "type": "tool_call"}`
/// and its extra keys.
struct ToolCallJson<'a>(&'a ToolCall);

impl Serialize for ToolCallJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const KEYS: [&str; 4] = ["name", "args", "id", "type"];
        let call = self.0;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &call.name)?;
        map.serialize_entry("args", &call.args)?;
        map.serialize_entry("id", &call.id)?;
        map.serialize_entry("type", "tool_call")?;
        for (key, value) in &call.extra {
            if !KEYS.contains(&key.as_str()) {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// An invalid tool call as LangChain's dict writes it: `{"type": "invalid_tool_call", "id",
/// "name", "args", "error"}` and its extra keys.
struct InvalidToolCallJson<'a>(&'a InvalidToolCall);

impl Serialize for InvalidToolCallJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const KEYS: [&str; 5] = ["type", "id", "name", "args", "error"];
        let call = self.0;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("type", "invalid_tool_call")?;
        map.serialize_entry("id", &call.id)?;
        map.serialize_entry("name", &call.name)?;
        map.serialize_entry("args", &call.args)?;
        map.serialize_entry("error", &call.error)?;
        for (key, value) in &call.extra {
            if !KEYS.contains(&key.as_str()) {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}
