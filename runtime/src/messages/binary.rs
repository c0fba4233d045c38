//! The positional layout binary formats (MessagePack, postcard, bincode) use for a message.
//!
//! A message is a sequence, so MessagePack writes no field names, and free JSON travels as
//! JSON text, since bincode and postcard cannot decode self-describing values:
//!
//! `(kind, content, blocks, id, name, tool_calls, usage, tool_call_id, artifact[, extension])`
//!
//! - `kind`: 0 human, 1 ai, 2 system, 3 tool, 4 remove, 5 chat, 6 function, plus
//!   [`EXTENDED`] when the tenth element follows;
//! - `content`: the text, or the blocks as JSON text when `blocks` is true;
//! - `tool_calls`: `(id, name, args as JSON text)`; `usage`: the three token counts;
//! - `extension`: the JSON text of what the first nine do not hold (the dict form's other
//!   keys: `additional_kwargs`, `response_metadata`, a chunk's `type`, invalid tool calls,
//!   usage details, `extra` fields, ...).
//!
//! The first nine elements are the whole layout of earlier Waypoint versions, still written
//! for a message with nothing more, so bytes written before the extension existed decode
//! unchanged (the formats without lengths know from `kind` whether a tenth element follows).

use std::borrow::Cow;
use std::fmt;

use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserializer, Serializer};
use serde_json::{Map, Value, json};

use crate::messages::langchain::{self, Class, Kind, Mode};
use crate::messages::{
    AiMessage, Content, HumanMessage, Message, RemoveMessage, SystemMessage, ToolCall, ToolMessage,
    UsageMetadata,
};

/// Set in `kind` when the extension element follows.
const EXTENDED: u8 = 0x10;

/// The kinds, at their codes.
const KINDS: [Kind; 7] = [
    Kind::Human,
    Kind::Ai,
    Kind::System,
    Kind::Tool,
    Kind::Remove,
    Kind::Chat,
    Kind::Function,
];

fn code(kind: Kind) -> u8 {
    match kind {
        Kind::Human => 0,
        Kind::Ai => 1,
        Kind::System => 2,
        Kind::Tool => 3,
        Kind::Remove => 4,
        Kind::Chat => 5,
        Kind::Function => 6,
    }
}

fn json_text<E: serde::ser::Error>(value: &impl serde::Serialize) -> Result<String, E> {
    serde_json::to_string(value).map_err(E::custom)
}

fn parse_json<E: serde::de::Error>(text: &str) -> Result<Value, E> {
    serde_json::from_str(text).map_err(E::custom)
}

/// Writes `message` in the positional layout.
pub(crate) fn serialize<S: Serializer>(message: &Message, s: S) -> Result<S::Ok, S::Error> {
    let extension = if langchain::needs_extension(message) {
        Some(json_text::<S::Error>(&langchain::Dict(
            message,
            Mode::Extension,
        ))?)
    } else {
        None
    };
    let class = Class::of(message);
    let kind = code(class.kind) | if extension.is_some() { EXTENDED } else { 0 };
    let (content, blocks) = match message.content() {
        Content::Text(text) => (Cow::Borrowed(text.as_str()), false),
        Content::Blocks(blocks) => (Cow::Owned(json_text::<S::Error>(blocks)?), true),
    };
    let mut tool_calls: Vec<(Option<&str>, &str, String)> = Vec::new();
    let mut usage: Option<(u64, u64, u64)> = None;
    let mut tool_call_id: Option<&str> = None;
    let mut artifact: Option<String> = None;
    match message {
        Message::Ai(m) => {
            // What the extension holds is not written twice.
            if !langchain::calls_need_extension(m) {
                for call in &m.tool_calls {
                    tool_calls.push((
                        call.id.as_deref(),
                        call.name.as_str(),
                        json_text::<S::Error>(&call.args)?,
                    ));
                }
            }
            if !langchain::usage_needs_extension(m) {
                usage = m
                    .usage_metadata
                    .as_ref()
                    .map(|u| (u.input_tokens, u.output_tokens, u.total_tokens));
            }
        }
        Message::Tool(m) => {
            tool_call_id = Some(&m.tool_call_id);
            artifact = m.artifact.as_ref().map(json_text::<S::Error>).transpose()?;
        }
        _ => {}
    }
    let mut t = s.serialize_tuple(if extension.is_some() { 10 } else { 9 })?;
    t.serialize_element(&kind)?;
    t.serialize_element(&content)?;
    t.serialize_element(&blocks)?;
    t.serialize_element(&message.id())?;
    t.serialize_element(&message.name())?;
    t.serialize_element(&tool_calls)?;
    t.serialize_element(&usage)?;
    t.serialize_element(&tool_call_id)?;
    t.serialize_element(&artifact)?;
    if let Some(extension) = &extension {
        t.serialize_element(extension)?;
    }
    t.end()
}

/// Reads a message in the positional layout.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Message, D::Error> {
    d.deserialize_tuple(10, Positional)
}

struct Positional;

/// The first nine elements, as read.
struct Fields {
    kind: Kind,
    content: Content,
    id: Option<String>,
    name: Option<String>,
    tool_calls: Vec<(Option<String>, String, String)>,
    usage: Option<(u64, u64, u64)>,
    tool_call_id: Option<String>,
    artifact: Option<String>,
}

impl<'de> Visitor<'de> for Positional {
    type Value = Message;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message as a sequence (kind, content, blocks, id, name, ...)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Message, A::Error> {
        let mut at = 0;
        let mut next = || {
            at += 1;
            at - 1
        };
        macro_rules! element {
            () => {{
                let index = next();
                seq.next_element()?
                    .ok_or_else(|| A::Error::invalid_length(index, &self))?
            }};
        }
        let code: u8 = element!();
        let kind = KINDS
            .get(usize::from(code & !EXTENDED))
            .copied()
            .ok_or_else(|| A::Error::custom(format!("unknown message kind {code}")))?;
        let text: String = element!();
        let blocks: bool = element!();
        let content = if blocks {
            match parse_json::<A::Error>(&text)? {
                Value::Array(blocks) => Content::Blocks(blocks),
                _ => return Err(A::Error::custom("message blocks must be a list")),
            }
        } else {
            Content::Text(text)
        };
        let fields = Fields {
            kind,
            content,
            id: element!(),
            name: element!(),
            tool_calls: element!(),
            usage: element!(),
            tool_call_id: element!(),
            artifact: element!(),
        };
        if code & EXTENDED == 0 {
            return plain(fields);
        }
        let extension: String = element!();
        extended(fields, &extension)
    }
}

fn tool_calls<E: serde::de::Error>(
    calls: Vec<(Option<String>, String, String)>,
) -> Result<Vec<ToolCall>, E> {
    calls
        .into_iter()
        .map(|(id, name, args)| {
            Ok(ToolCall {
                id,
                name,
                args: parse_json::<E>(&args)?,
                extra: Map::new(),
            })
        })
        .collect()
}

/// A message of the nine-element layout.
fn plain<E: serde::de::Error>(f: Fields) -> Result<Message, E> {
    let (content, id, name) = (f.content, f.id, f.name);
    Ok(match f.kind {
        Kind::Human => Message::Human(HumanMessage {
            content,
            id,
            name,
            ..HumanMessage::default()
        }),
        Kind::Ai => Message::Ai(AiMessage {
            content,
            id,
            name,
            tool_calls: tool_calls::<E>(f.tool_calls)?,
            usage_metadata: f.usage.map(|(i, o, t)| UsageMetadata::new(i, o, t)),
            ..AiMessage::default()
        }),
        Kind::System => Message::System(SystemMessage {
            content,
            id,
            name,
            ..SystemMessage::default()
        }),
        Kind::Tool => Message::Tool(ToolMessage {
            content,
            id,
            name,
            tool_call_id: f
                .tool_call_id
                .ok_or_else(|| E::custom("a tool message needs a tool_call_id"))?,
            artifact: f.artifact.as_deref().map(parse_json::<E>).transpose()?,
            ..ToolMessage::default()
        }),
        Kind::Remove => Message::Remove(RemoveMessage {
            id: id.ok_or_else(|| E::custom("a remove message needs an id"))?,
            name,
            ..RemoveMessage::default()
        }),
        Kind::Chat | Kind::Function => {
            return Err(E::custom(format!(
                "a {} message needs its extension element",
                f.kind.lc_type()
            )));
        }
    })
}

/// A message of the ten-element layout: the extension's keys with the nine fields put back
/// in, read as LangChain's dict form.
fn extended<E: serde::de::Error>(f: Fields, extension: &str) -> Result<Message, E> {
    let Value::Object(mut map) = parse_json::<E>(extension)? else {
        return Err(E::custom("a message extension must be a JSON object"));
    };
    let class = match map.remove("type") {
        None => Class {
            kind: f.kind,
            chunk: false,
        },
        Some(Value::String(lc_type)) => Class::from_type(&lc_type)
            .filter(|c| c.kind == f.kind)
            .ok_or_else(|| {
                E::custom(format!(
                    "a {} message's extension names type `{lc_type}`",
                    f.kind.lc_type()
                ))
            })?,
        Some(other) => return Err(E::custom(format!("message type {other}"))),
    };
    map.insert("content".into(), f.content.to_json());
    map.insert("id".into(), json!(f.id));
    map.insert("name".into(), json!(f.name));
    if !map.contains_key("tool_calls") && !f.tool_calls.is_empty() {
        let calls = tool_calls::<E>(f.tool_calls)?;
        let calls: Vec<Value> = calls
            .into_iter()
            .map(|c| json!({"id": c.id, "name": c.name, "args": c.args}))
            .collect();
        map.insert("tool_calls".into(), Value::Array(calls));
    }
    if let (false, Some((i, o, t))) = (map.contains_key("usage_metadata"), f.usage) {
        map.insert(
            "usage_metadata".into(),
            json!({"input_tokens": i, "output_tokens": o, "total_tokens": t}),
        );
    }
    if let Some(id) = f.tool_call_id {
        map.insert("tool_call_id".into(), Value::String(id));
    }
    if let Some(artifact) = f.artifact {
        map.insert("artifact".into(), parse_json::<E>(&artifact)?);
    }
    langchain::from_dict(class, map).map_err(E::custom)
}
