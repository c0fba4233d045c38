//! Reading a message straight from a human-readable deserializer.
//!
//! [`Message::from_json`] reads a JSON value; building that value first allocates every key
//! and string of the message, which are then picked apart again. Here the known keys of the
//! common forms go straight into the message's fields: LangGraph's `lc: 2` map (what its
//! codec shows for a Python message: `lc`, `type`, `id`, `ext`, `method`, `args` and the
//! `model_dump()` as `kwargs`), LangChain's `lc: 1` constructor form, and the dict form
//! (`type`, `content`, `id`, `name`, `tool_calls`, `usage_metadata`, ...). Only what is
//! free-form becomes a `Value`: content, tool-call arguments, `additional_kwargs`,
//! `response_metadata`, usage breakdowns and keys the class does not define.
//!
//! The keys may come in any order, so a map is read in one pass whatever comes first: the
//! fields every class has as soon as they come, a class's own fields into typed slots once
//! `type` (or a constructor's `id`) has told the class, and into `Fields::rest` until then.
//! Errors wait for the end of the map, so the deserializer's own errors come first; then
//! they are those of [`Message::from_json`], checked in its order. Lists (`[role, content]`
//! pairs) and other values are read as JSON and handed to [`Message::from_json`]. The one
//! difference: a map with two `type` keys that disagree (JSON text can hold one) is an
//! error, where a JSON value would have kept the last.

use std::fmt;

use serde::Deserialize;
use serde::de::value::U128Deserializer;
use serde::de::value::{I128Deserializer, MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::messages::langchain::{self, Class, Fields, Kind};
use crate::messages::{Message, ToolCall, UsageMetadata};

/// Reads a message in any form [`Message::from_json`] accepts.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Message, D::Error> {
    Seed(MessageShape).deserialize(d)?.map_err(D::Error::custom)
}

// ---------------------------------------------------------------------------------------
// Reading any value: maps and lists as a shape chooses, anything else as JSON.

/// How one value is read: its maps, lists and strings as the shape chooses, anything else
/// as the JSON value `serde_json::Value` would read.
trait Shape<'de>: Sized {
    /// What reading gives.
    type Out;

    /// What is expected, for the deserializer's own errors.
    const EXPECTING: &'static str;

    /// The JSON value of anything the shape does not read itself.
    fn value(self, value: Value) -> Self::Out;

    fn map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Out, A::Error> {
        Ok(self.value(Value::deserialize(MapAccessDeserializer::new(map))?))
    }

    fn seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Out, A::Error> {
        Ok(self.value(Value::deserialize(SeqAccessDeserializer::new(seq))?))
    }

    fn string(self, s: String) -> Self::Out {
        self.value(Value::String(s))
    }

    fn str(self, s: &str) -> Self::Out {
        self.string(s.to_owned())
    }
}

/// A [`Shape`] as a seed: asks for any value.
struct Seed<S>(S);

impl<'de, S: Shape<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Out;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Out, D::Error> {
        d.deserialize_any(Visit(self.0))
    }
}

/// A [`Shape`] as a visitor; scalars become JSON as `serde_json::Value` reads them.
struct Visit<S>(S);

impl<'de, S: Shape<'de>> Visitor<'de> for Visit<S> {
    type Value = S::Out;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(S::EXPECTING)
    }

    fn visit_bool<E: Error>(self, v: bool) -> Result<S::Out, E> {
        Ok(self.0.value(Value::Bool(v)))
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<S::Out, E> {
        Ok(self.0.value(Value::from(v)))
    }

    fn visit_i128<E: Error>(self, v: i128) -> Result<S::Out, E> {
        Ok(self
            .0
            .value(Value::deserialize(I128Deserializer::<E>::new(v))?))
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<S::Out, E> {
        Ok(self.0.value(Value::from(v)))
    }

    fn visit_u128<E: Error>(self, v: u128) -> Result<S::Out, E> {
        Ok(self
            .0
            .value(Value::deserialize(U128Deserializer::<E>::new(v))?))
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<S::Out, E> {
        // NaN and infinities are null, as in `serde_json::Value`.
        Ok(self.0.value(Value::from(v)))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<S::Out, E> {
        Ok(self.0.str(v))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<S::Out, E> {
        Ok(self.0.string(v))
    }

    fn visit_none<E: Error>(self) -> Result<S::Out, E> {
        Ok(self.0.value(Value::Null))
    }

    fn visit_unit<E: Error>(self) -> Result<S::Out, E> {
        Ok(self.0.value(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<S::Out, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<S::Out, A::Error> {
        self.0.seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<S::Out, A::Error> {
        self.0.map(map)
    }
}

// ---------------------------------------------------------------------------------------
// Keys.

/// A key of a message map, a tool call or a usage report; known ones read without
/// allocating.
#[derive(Debug)]
enum Key {
    Lc,
    Type,
    Id,
    Ext,
    Method,
    Args,
    Kwargs,
    Content,
    Name,
    AdditionalKwargs,
    ResponseMetadata,
    ToolCalls,
    InvalidToolCalls,
    UsageMetadata,
    ToolCallId,
    Status,
    Artifact,
    Function,
    InputTokens,
    OutputTokens,
    TotalTokens,
    Other(String),
}

impl Key {
    /// The known key named `name`.
    fn known(name: &str) -> Option<Key> {
        Some(match name {
            "lc" => Key::Lc,
            "type" => Key::Type,
            "id" => Key::Id,
            "ext" => Key::Ext,
            "method" => Key::Method,
            "args" => Key::Args,
            "kwargs" => Key::Kwargs,
            "content" => Key::Content,
            "name" => Key::Name,
            "additional_kwargs" => Key::AdditionalKwargs,
            "response_metadata" => Key::ResponseMetadata,
            "tool_calls" => Key::ToolCalls,
            "invalid_tool_calls" => Key::InvalidToolCalls,
            "usage_metadata" => Key::UsageMetadata,
            "tool_call_id" => Key::ToolCallId,
            "status" => Key::Status,
            "artifact" => Key::Artifact,
            "function" => Key::Function,
            "input_tokens" => Key::InputTokens,
            "output_tokens" => Key::OutputTokens,
            "total_tokens" => Key::TotalTokens,
            _ => return None,
        })
    }

    /// The key's text.
    fn into_string(self) -> String {
        let known = match self {
            Key::Other(name) => return name,
            Key::Lc => "lc",
            Key::Type => "type",
            Key::Id => "id",
            Key::Ext => "ext",
            Key::Method => "method",
            Key::Args => "args",
            Key::Kwargs => "kwargs",
            Key::Content => "content",
            Key::Name => "name",
            Key::AdditionalKwargs => "additional_kwargs",
            Key::ResponseMetadata => "response_metadata",
            Key::ToolCalls => "tool_calls",
            Key::InvalidToolCalls => "invalid_tool_calls",
            Key::UsageMetadata => "usage_metadata",
            Key::ToolCallId => "tool_call_id",
            Key::Status => "status",
            Key::Artifact => "artifact",
            Key::Function => "function",
            Key::InputTokens => "input_tokens",
            Key::OutputTokens => "output_tokens",
            Key::TotalTokens => "total_tokens",
        };
        known.to_owned()
    }
}

/// Reads a map key (a string, as `serde_json::Value` asks for one).
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(KeySeed)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Key, E> {
        Ok(Key::known(v).unwrap_or_else(|| Key::Other(v.to_owned())))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Key, E> {
        Ok(Key::known(&v).unwrap_or(Key::Other(v)))
    }
}

// ---------------------------------------------------------------------------------------
// A message.

/// A message in any form.
struct MessageShape;

impl<'de> Shape<'de> for MessageShape {
    type Out = Result<Message, String>;
    const EXPECTING: &'static str = "a message";

    fn value(self, value: Value) -> Self::Out {
        langchain::from_json(value)
    }

    fn string(self, s: String) -> Self::Out {
        Ok(Message::human(s))
    }

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Out, A::Error> {
        let mut top = Top::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            top.entry(key, &mut map)?;
        }
        Ok(top.finish())
    }
}

/// What a message map's `type` says.
#[derive(Debug, PartialEq)]
enum TypeOf {
    /// `constructor`: a constructor form if the map has `lc`.
    Constructor,
    /// A message class.
    Class(Class),
    /// Text naming no class.
    Unknown(String),
    /// Not text.
    NotText(Value),
}

/// Reads a `type` value.
struct TypeShape;

impl<'de> Shape<'de> for TypeShape {
    type Out = TypeOf;
    const EXPECTING: &'static str = "a message type";

    fn value(self, value: Value) -> TypeOf {
        match value {
            Value::String(s) => self.string(s),
            other => TypeOf::NotText(other),
        }
    }

    fn str(self, s: &str) -> TypeOf {
        match s {
            "constructor" => TypeOf::Constructor,
            _ => Class::from_type(s).map_or_else(|| TypeOf::Unknown(s.to_owned()), TypeOf::Class),
        }
    }

    fn string(self, s: String) -> TypeOf {
        match self.str(&s) {
            TypeOf::Unknown(_) => TypeOf::Unknown(s),
            known => known,
        }
    }
}

/// A message map being read (see the module docs).
#[derive(Default)]
struct Top {
    /// The first `type`.
    ty: Option<TypeOf>,
    /// Whether a second `type` said something else.
    two_types: bool,
    /// `lc`, which makes a `constructor` map a constructor form (and is an extra key of
    /// any other).
    lc: Option<Value>,
    /// The fields of a dict form (and, before `type`, a constructor's `id` and kwargs).
    fields: Fields,
    /// A constructor form's class and dotted id, read after `type`.
    class_id: Option<Result<(Class, String), String>>,
    /// A constructor form's kwargs read after `type` and `id`: the message.
    kwargs: Option<Result<Message, String>>,
    /// A constructor form's kwargs read after `type` but before a valid `id`.
    kwargs_json: Option<Value>,
}

impl Top {
    fn entry<'de, A: MapAccess<'de>>(&mut self, key: Key, map: &mut A) -> Result<(), A::Error> {
        match (key, &self.ty) {
            (Key::Lc, _) => self.lc = Some(map.next_value()?),
            (Key::Type, ty) => {
                let said = map.next_value_seed(Seed(TypeShape))?;
                match ty {
                    None => self.ty = Some(said),
                    Some(first) => self.two_types |= *first != said,
                }
            }
            (Key::Id, Some(TypeOf::Constructor)) => {
                self.class_id = Some(map.next_value_seed(Seed(ClassIdShape))?);
            }
            (Key::Kwargs, Some(TypeOf::Constructor)) => match &self.class_id {
                Some(Ok((class, dotted))) => {
                    let shape = KwargsShape {
                        class: *class,
                        dotted,
                        out: &mut self.kwargs,
                    };
                    map.next_value_seed(Seed(shape))?;
                    self.kwargs_json = None;
                }
                _ => {
                    self.kwargs_json = Some(map.next_value()?);
                    self.kwargs = None;
                }
            },
            // A constructor form reads nothing else.
            (_, Some(TypeOf::Constructor)) => {
                map.next_value::<IgnoredAny>()?;
            }
            (key, Some(TypeOf::Class(class))) => {
                read_field(&mut self.fields, Some(*class), key, map)?
            }
            (key, _) => read_field(&mut self.fields, None, key, map)?,
        }
        Ok(())
    }

    /// The message, or what is wrong with it, as [`langchain::from_json`] says it.
    fn finish(&mut self) -> Result<Message, String> {
        // Taken field by field: moving the whole `Top` would copy it.
        let Top {
            ty,
            two_types,
            lc,
            fields,
            class_id,
            kwargs,
            kwargs_json,
        } = self;
        let (lc, kwargs, kwargs_json) = (lc.take(), kwargs.take(), kwargs_json.take());
        if *two_types {
            return Err("a message has two different `type`s".into());
        }
        match ty.take() {
            Some(TypeOf::Constructor) if lc.is_some() => {
                let (class, dotted) = match (class_id.take(), kwargs) {
                    (Some(Err(e)), _) => return Err(e),
                    // Read when the `id` came.
                    (Some(Ok(_)), Some(message)) => return message,
                    (Some(Ok(class_id)), None) => class_id,
                    (None, _) => langchain::constructor_class(fields.id.take())?,
                };
                let json = kwargs_json.or_else(|| fields.rest.remove("kwargs"));
                langchain::from_kwargs(class, &dotted, json)
            }
            // Without `lc`, `constructor` is a type like any other, and no class's.
            Some(TypeOf::Constructor) => Err(langchain::unknown_type("constructor")),
            Some(TypeOf::Class(class)) => {
                if let Some(lc) = lc {
                    fields.rest.insert("lc".into(), lc);
                }
                langchain::from_fields(class, fields)
            }
            Some(TypeOf::Unknown(lc_type)) => Err(langchain::unknown_type(&lc_type)),
            Some(TypeOf::NotText(value)) => Err(langchain::type_not_text(&value)),
            None => {
                if let Some(lc) = lc {
                    fields.rest.insert("lc".into(), lc);
                }
                match fields.rest.remove("role") {
                    Some(role) => {
                        langchain::from_fields(langchain::openai_class(Some(role))?, fields)
                    }
                    None => Err(langchain::NO_TYPE.into()),
                }
            }
        }
    }
}

/// Reads a field of a message dict into `fields`: the common ones always, `class`'s own
/// into their slots, anything else into `rest` (see [`Fields`]).
fn read_field<'de, A: MapAccess<'de>>(
    fields: &mut Fields,
    class: Option<Class>,
    key: Key,
    map: &mut A,
) -> Result<(), A::Error> {
    let kind = class.map(|c| c.kind);
    let slot = match (key, kind) {
        (Key::Content, _) => &mut fields.content,
        (Key::Id, _) => &mut fields.id,
        (Key::Name, _) => &mut fields.name,
        (Key::AdditionalKwargs, _) => &mut fields.additional_kwargs,
        (Key::ResponseMetadata, _) => &mut fields.response_metadata,
        (Key::ToolCalls, Some(Kind::Ai)) => {
            fields.tool_calls = Some(map.next_value_seed(Seed(ToolCallsShape))?);
            return Ok(());
        }
        (Key::UsageMetadata, Some(Kind::Ai)) => {
            fields.usage_metadata = Some(map.next_value_seed(Seed(UsageShape))?);
            return Ok(());
        }
        (Key::InvalidToolCalls, Some(Kind::Ai)) => &mut fields.invalid_tool_calls,
        (Key::ToolCallId, Some(Kind::Tool)) => &mut fields.tool_call_id,
        (Key::Status, Some(Kind::Tool)) => &mut fields.status,
        (Key::Artifact, Some(Kind::Tool)) => &mut fields.artifact,
        (key, _) => {
            let value = map.next_value()?;
            fields.rest.insert(key.into_string(), value);
            return Ok(());
        }
    };
    *slot = Some(map.next_value()?);
    Ok(())
}

/// A constructor form's `id`: the class, and the id joined with dots.
struct ClassIdShape;

impl<'de> Shape<'de> for ClassIdShape {
    type Out = Result<(Class, String), String>;
    const EXPECTING: &'static str = "a class id";

    fn value(self, _: Value) -> Self::Out {
        Err(langchain::NO_CLASS_ID.into())
    }

    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Out, A::Error> {
        let mut dotted = String::with_capacity(48);
        let (mut parts, mut names, mut first, mut last) = (0usize, true, None, 0);
        loop {
            let start = dotted.len() + usize::from(parts > 0);
            let part = Part {
                dotted: &mut dotted,
                dot: parts > 0,
            };
            match seq.next_element_seed(Seed(part))? {
                None => break,
                Some(false) => names = false,
                Some(true) => {
                    first.get_or_insert(start..dotted.len());
                    last = start;
                }
            }
            parts += 1;
        }
        if !names {
            return Ok(Err(langchain::ID_NOT_NAMES.into()));
        }
        let class = match first {
            Some(first) if parts > 1 => langchain::message_class(&dotted[first], &dotted[last..]),
            _ => None,
        };
        Ok(match class {
            Some(class) => Ok((class, dotted)),
            None => Err(langchain::not_a_message_class(&dotted)),
        })
    }
}

/// One name of a constructor id, appended to the dotted id: whether it is text.
struct Part<'a> {
    dotted: &'a mut String,
    dot: bool,
}

impl<'de> Shape<'de> for Part<'_> {
    type Out = bool;
    const EXPECTING: &'static str = "a name";

    fn value(self, value: Value) -> bool {
        match value {
            Value::String(s) => self.str(&s),
            _ => false,
        }
    }

    fn str(self, s: &str) -> bool {
        if self.dot {
            self.dotted.push('.');
        }
        self.dotted.push_str(s);
        true
    }

    fn string(self, s: String) -> bool {
        self.str(&s)
    }
}

/// A constructor form's kwargs, the fields of a message of `class` (`dotted` names it in
/// errors), read into `out` (which saves copying the message up through the deserializer).
struct KwargsShape<'a> {
    class: Class,
    dotted: &'a str,
    out: &'a mut Option<Result<Message, String>>,
}

impl<'de> Shape<'de> for KwargsShape<'_> {
    type Out = ();
    const EXPECTING: &'static str = "keyword arguments";

    fn value(self, value: Value) {
        *self.out = Some(langchain::from_kwargs(self.class, self.dotted, Some(value)));
    }

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut fields = Fields::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match key {
                // The class decides; a `type` among the kwargs only repeats it.
                Key::Type => {
                    map.next_value::<IgnoredAny>()?;
                }
                key => read_field(&mut fields, Some(self.class), key, &mut map)?,
            }
        }
        *self.out = Some(langchain::from_fields(self.class, &mut fields));
        Ok(())
    }
}

/// An AI message's `tool_calls`.
struct ToolCallsShape;

impl<'de> Shape<'de> for ToolCallsShape {
    type Out = Result<Vec<ToolCall>, String>;
    const EXPECTING: &'static str = "a list of tool calls";

    fn value(self, value: Value) -> Self::Out {
        match value {
            Value::Null => Ok(Vec::new()),
            other => Err(langchain::not_a_list("tool_calls", &other)),
        }
    }

    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Out, A::Error> {
        let mut calls = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        let mut error = None;
        while let Some(call) = seq.next_element_seed(Seed(ToolCallShape))? {
            match call {
                Ok(call) => calls.push(call),
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        Ok(error.map_or(Ok(calls), Err))
    }
}

/// One tool call.
struct ToolCallShape;

impl<'de> Shape<'de> for ToolCallShape {
    type Out = Result<ToolCall, String>;
    const EXPECTING: &'static str = "a tool call";

    fn value(self, _: Value) -> Self::Out {
        Err(langchain::TOOL_CALL_NOT_OBJECT.into())
    }

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Out, A::Error> {
        let (mut id, mut function, mut name, mut args) = (None, None, None, None);
        let mut extra = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let slot = match key {
                Key::Id => &mut id,
                Key::Function => &mut function,
                Key::Name => &mut name,
                Key::Args => &mut args,
                // The type only says it is a tool call.
                Key::Type => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                key => {
                    let value = map.next_value()?;
                    extra.insert(key.into_string(), value);
                    continue;
                }
            };
            *slot = Some(map.next_value()?);
        }
        Ok(langchain::tool_call_from_parts(
            id, function, name, args, extra,
        ))
    }
}

/// An AI message's `usage_metadata` (`None` for null), as [`UsageMetadata`]'s own
/// `Deserialize` reads it.
struct UsageShape;

impl<'de> Shape<'de> for UsageShape {
    type Out = Result<Option<UsageMetadata>, String>;
    const EXPECTING: &'static str = "token usage";

    fn value(self, value: Value) -> Self::Out {
        langchain::usage_from_json(Some(value))
    }

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Out, A::Error> {
        let mut counts: [Option<u64>; 3] = [None; 3];
        let mut details = Map::new();
        // One per count; the first in field order is reported, as `from_json` (whose map is
        // sorted by key, which is also field order) would, whatever order the keys came in.
        let mut errors: [Option<String>; 3] = [None, None, None];
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let index = match key {
                Key::InputTokens => 0,
                Key::OutputTokens => 1,
                Key::TotalTokens => 2,
                key => {
                    let value = map.next_value()?;
                    details.insert(key.into_string(), value);
                    continue;
                }
            };
            let value: Value = map.next_value()?;
            match value.as_u64() {
                Some(count) => counts[index] = Some(count),
                // What `u64` says of it.
                None => {
                    if let Err(e) = serde_json::from_value::<u64>(value) {
                        errors[index].get_or_insert_with(|| langchain::usage_error(&e));
                    }
                }
            }
        }
        if let Some(error) = errors.into_iter().flatten().next() {
            return Ok(Err(error));
        }
        Ok(match counts {
            [Some(input_tokens), Some(output_tokens), Some(total_tokens)] => {
                Ok(Some(UsageMetadata {
                    input_tokens,
                    output_tokens,
                    total_tokens,
                    details,
                }))
            }
            _ => {
                let names = ["input_tokens", "output_tokens", "total_tokens"];
                let missing = counts
                    .iter()
                    .zip(names)
                    .find_map(|(count, name)| count.is_none().then_some(name))
                    .unwrap_or_default();
                Err(langchain::usage_error(&serde_json::Error::missing_field(
                    missing,
                )))
            }
        })
    }
}
