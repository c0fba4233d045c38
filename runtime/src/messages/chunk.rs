//! Streamed pieces of an AI message and how they add up, as LangChain's `AIMessageChunk`.
//!
//! Adding chunks (`a + b`, `a += b`, `chunks.into_iter().sum()`) follows LangChain's
//! `add_ai_message_chunks`:
//! - content: text + text concatenates; blocks + blocks merges blocks that share an integer
//!   `index` key (or an `lc_`-prefixed string one) and appends the rest; text + blocks puts
//!   the text first as a string block; blocks + text appends the text to a trailing string
//!   block, or adds it as a new one;
//! - tool-call chunks with the same `index` (and no conflicting ids) become one: the first
//!   name and id seen are kept and the argument texts are concatenated; chunks without an
//!   index are appended;
//! - the id is the first provider id, else the first run id (`run-` or `lc_run-`), else the
//!   first other `lc_` id; the name is the first one seen;
//! - usage metadata is summed (see [`UsageMetadata::add`]).
//!
//! Where LangChain would raise or lose data this module does neither, since `+` cannot fail:
//! merged block keys whose values have different types (or unequal floats or booleans) keep
//! the left value, text added to an empty block list becomes a block instead of being
//! dropped, and a merged tool-call chunk keeps its first name rather than concatenating the
//! names (providers send a name once; a repeat must not double it).
//!
//! [`AiMessageChunk::into_message`] parses the argument texts strictly: arguments that are not
//! a complete JSON object are an error naming the tool, where LangChain would parse partial
//! JSON leniently and file the rest under `invalid_tool_calls`.

use std::iter::Sum;
use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use crate::messages::{AiMessage, Content, Message, ToolCall, UsageMetadata};
use crate::{Error, Result};

/// A piece of a tool call as a model streams it.
///
/// JSON follows LangChain's `tool_call_chunk` dict; a missing field reads as `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, tag = "type", rename = "tool_call_chunk")]
pub struct ToolCallChunk {
    /// The tool's name (usually only in the first piece).
    pub name: Option<String>,
    /// A piece of the arguments' JSON text.
    pub args: Option<String>,
    /// The call's id (usually only in the first piece).
    pub id: Option<String>,
    /// Which call of the message this piece belongs to; pieces with equal indexes merge.
    pub index: Option<usize>,
}

/// A streamed piece of an AI message; chunks add up (`+`, `+=`, `sum`) to the whole.
///
/// JSON follows LangChain's `AIMessageChunk` dict (`{"type": "AIMessageChunk", "content":
/// ..., "tool_call_chunks": [...]}`), so chunks can be streamed to clients as they come; keys
/// it does not model (`tool_calls`, which the chunks hold, `additional_kwargs`,
/// `response_metadata`, `chunk_position`, ...) are ignored when read. A whole
/// `AIMessageChunk` kept in a conversation is a [`Message::Ai`] with `chunk: true`, which
/// keeps every field. Binary formats are not supported: content blocks are free JSON, which
/// bincode and postcard cannot decode, and chunks are streamed, not checkpointed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, tag = "type", rename = "AIMessageChunk")]
pub struct AiMessageChunk {
    /// This piece of what the message says (usually text).
    #[serde(with = "content_json")]
    pub content: Content,
    /// The message's id, if this piece carries it.
    pub id: Option<String>,
    /// An optional name of the speaker.
    pub name: Option<String>,
    /// Pieces of the tool calls the message asks for.
    pub tool_call_chunks: Vec<ToolCallChunk>,
    /// Tokens this piece reports.
    pub usage_metadata: Option<UsageMetadata>,
}

impl AiMessageChunk {
    /// A chunk saying `content`.
    pub fn new(content: impl Into<Content>) -> Self {
        AiMessageChunk {
            content: content.into(),
            ..AiMessageChunk::default()
        }
    }

    /// The same chunk with id `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The whole AI message, each tool call's argument text parsed as a JSON object (empty
    /// text is `{}`); arguments that do not parse are an [`Error::InvalidUpdate`] naming the
    /// tool.
    pub fn into_message(self) -> Result<Message> {
        let tool_calls = self
            .tool_call_chunks
            .into_iter()
            .map(tool_call)
            .collect::<Result<Vec<_>>>()?;
        Ok(Message::Ai(AiMessage {
            content: self.content,
            id: self.id,
            name: self.name,
            tool_calls,
            usage_metadata: self.usage_metadata,
            ..AiMessage::default()
        }))
    }
}

/// The tool call a merged chunk describes; a missing name is empty, as in LangChain.
fn tool_call(chunk: ToolCallChunk) -> Result<ToolCall> {
    let name = chunk.name.unwrap_or_default();
    let text = chunk.args.unwrap_or_default();
    let args = if text.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        match serde_json::from_str::<Value>(&text) {
            Ok(args @ Value::Object(_)) => args,
            Ok(other) => {
                return Err(Error::InvalidUpdate(format!(
                    "tool call `{name}` has arguments that are not a JSON object: {other}"
                )));
            }
            Err(e) => {
                return Err(Error::InvalidUpdate(format!(
                    "tool call `{name}` has arguments that are not valid JSON ({e}): {text}"
                )));
            }
        }
    };
    Ok(ToolCall {
        id: chunk.id,
        name,
        args,
        extra: Map::new(),
    })
}

impl From<AiMessage> for AiMessageChunk {
    fn from(message: AiMessage) -> Self {
        AiMessageChunk {
            content: message.content,
            id: message.id,
            name: message.name,
            // Without an index, as LangChain does: each call stays whole and separate.
            tool_call_chunks: message
                .tool_calls
                .into_iter()
                .map(|call| ToolCallChunk {
                    name: Some(call.name),
                    args: Some(call.args.to_string()),
                    id: call.id,
                    index: None,
                })
                .collect(),
            usage_metadata: message.usage_metadata,
        }
    }
}

impl AddAssign for AiMessageChunk {
    fn add_assign(&mut self, rhs: AiMessageChunk) {
        merge_content(&mut self.content, rhs.content);
        for chunk in rhs.tool_call_chunks {
            merge_tool_call_chunk(&mut self.tool_call_chunks, chunk);
        }
        self.usage_metadata = match (self.usage_metadata.take(), rhs.usage_metadata) {
            (Some(a), Some(b)) => Some(a.add(&b)),
            (a, b) => a.or(b),
        };

        // Keeping the left id unless the right one ranks strictly higher picks, over any
        // sequence, the first id of the best rank, whatever the grouping of the additions.
        if id_rank(rhs.id.as_deref()) > id_rank(self.id.as_deref()) {
            self.id = rhs.id;
        }
        if self.name.is_none() {
            self.name = rhs.name;
        }
    }
}

impl Add for AiMessageChunk {
    type Output = AiMessageChunk;

    fn add(mut self, rhs: AiMessageChunk) -> AiMessageChunk {
        self += rhs;
        self
    }
}

impl Sum for AiMessageChunk {
    fn sum<I: Iterator<Item = AiMessageChunk>>(mut iter: I) -> AiMessageChunk {
        // Starting from the first chunk, not an empty one: empty text before blocks would
        // become a leading "" block.
        match iter.next() {
            Some(first) => iter.fold(first, Add::add),
            None => AiMessageChunk::default(),
        }
    }
}

/// How much an id is preferred: a provider's id over a run id over another generated one.
fn id_rank(id: Option<&str>) -> i8 {
    match id {
        None | Some("") => -1,
        Some(id) if id.starts_with("lc_run-") || id.starts_with("run-") => 1,
        Some(id) if id.starts_with("lc_") => 0,
        Some(_) => 2,
    }
}

fn is_blank(id: Option<&str>) -> bool {
    id.is_none_or(str::is_empty)
}

/// Merges `chunk` into the chunk of `chunks` with its index and a compatible id, or appends it.
fn merge_tool_call_chunk(chunks: &mut Vec<ToolCallChunk>, chunk: ToolCallChunk) {
    let target = chunk.index.and_then(|index| {
        chunks.iter_mut().find(|c| {
            c.index == Some(index)
                && (is_blank(c.id.as_deref()) || is_blank(chunk.id.as_deref()) || c.id == chunk.id)
        })
    });
    let Some(target) = target else {
        chunks.push(chunk);
        return;
    };
    if is_blank(target.name.as_deref()) && chunk.name.is_some() {
        target.name = chunk.name;
    }
    if is_blank(target.id.as_deref()) && chunk.id.is_some() {
        target.id = chunk.id;
    }
    match (&mut target.args, chunk.args) {
        (Some(args), Some(more)) => args.push_str(&more),
        (args @ None, more) => *args = more,
        (Some(_), None) => {}
    }
}

/// LangChain's `merge_content` for two contents.
fn merge_content(left: &mut Content, right: Content) {
    match (left, right) {
        (Content::Text(text), Content::Text(more)) => text.push_str(&more),
        (left @ Content::Text(_), Content::Blocks(blocks)) => {
            let Content::Text(text) = std::mem::take(left) else {
                return;
            };
            let mut merged = Vec::with_capacity(blocks.len() + 1);
            merged.push(Value::String(text));
            merged.extend(blocks);
            *left = Content::Blocks(merged);
        }
        (Content::Blocks(blocks), Content::Blocks(more)) => merge_lists(blocks, more),
        (Content::Blocks(blocks), Content::Text(more)) => match blocks.last_mut() {
            Some(Value::String(last)) => last.push_str(&more),
            _ if more.is_empty() => {}
            _ => blocks.push(Value::String(more)),
        },
    }
}

/// LangChain's `merge_lists`: an object with a mergeable `index` merges into the first one
/// with the same index and a compatible id; anything else is appended.
fn merge_lists(left: &mut Vec<Value>, right: Vec<Value>) {
    for item in right {
        let target = match &item {
            Value::Object(map) if map.get("index").is_some_and(is_merge_index) => {
                left.iter().position(|l| same_slot(l, map))
            }
            _ => None,
        };
        match (target, item) {
            (Some(i), Value::Object(map)) => {
                let addition = block_addition(&left[i], map);
                if let Some(Value::Object(target)) = left.get_mut(i) {
                    merge_maps(target, addition);
                }
            }
            (_, item) => left.push(item),
        }
    }
}

/// An index LangChain merges by: an integer, or a string it generated (`lc_...`).
fn is_merge_index(index: &Value) -> bool {
    match index {
        Value::Number(n) => n.is_i64() || n.is_u64(),
        Value::String(s) => s.starts_with("lc_"),
        _ => false,
    }
}

/// Whether `left` is the block `right` continues: same index, ids not in conflict.
fn same_slot(left: &Value, right: &Map<String, Value>) -> bool {
    let Value::Object(left) = left else {
        return false;
    };
    let blank = |m: &Map<String, Value>| match m.get("id") {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    left.get("index").is_some()
        && left.get("index") == right.get("index")
        && (blank(left) || blank(right) || left.get("id") == right.get("id"))
}

/// What of block `right` merges into `left`: its keys but `type` (a type names the block, it
/// is not text to concatenate), with a `non_standard` block's value nested as LangChain does.
fn block_addition(left: &Value, mut right: Map<String, Value>) -> Map<String, Value> {
    let left_type = left.get("type").filter(|t| truthy(t));
    let non_standard = right.get("type").and_then(Value::as_str) == Some("non_standard");
    if let (Some(left_type), true, Some(Value::Object(value))) =
        (left_type, non_standard, right.get("value"))
    {
        let mut value = value.clone();
        value.remove("type");
        let mut addition = Map::new();
        if left_type.as_str() == Some("non_standard") {
            addition.insert("value".into(), Value::Object(value));
            if let Some(index) = right.remove("index") {
                addition.insert("index".into(), index);
            }
        } else {
            addition.insert("extras".into(), Value::Object(value));
        }
        return addition;
    }
    right.remove("type");
    right
}

/// Python's truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// LangChain's `merge_dicts` for two objects, keeping the left value where it would raise.
fn merge_maps(left: &mut Map<String, Value>, right: Map<String, Value>) {
    for (key, value) in right {
        let Some(current) = left.get_mut(&key) else {
            left.insert(key, value);
            continue;
        };
        match (current, value) {
            (current @ Value::Null, value) => *current = value,
            (_, Value::Null) => {}
            (Value::String(current), Value::String(more)) => {
                let keep = (key == "index" && current.starts_with("lc_"))
                    || (matches!(key.as_str(), "id" | "output_version" | "model_provider")
                        && *current == more);
                if !keep {
                    current.push_str(&more);
                }
            }
            (Value::Object(current), Value::Object(more)) => merge_maps(current, more),
            (Value::Array(current), Value::Array(more)) => merge_lists(current, more),
            (Value::Number(current), Value::Number(more)) if *current != more => {
                // Integers add up, except those that identify or time the block; anything
                // else (floats, an integer against a float) LangChain refuses.
                if let (Some(a), Some(b)) = (integer(current), integer(&more)) {
                    if matches!(key.as_str(), "index" | "created" | "timestamp") {
                        *current = more;
                    } else if let Some(sum) = integer_number(a + b) {
                        *current = sum;
                    }
                }
            }
            // Equal values, or values LangChain cannot merge: the left one stays.
            _ => {}
        }
    }
}

fn integer(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

fn integer_number(n: i128) -> Option<Number> {
    u64::try_from(n)
        .map(Number::from)
        .ok()
        .or_else(|| i64::try_from(n).map(Number::from).ok())
}

/// Content as JSON: a string or a list of blocks (`null` reads as empty text).
mod content_json {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    use crate::messages::Content;

    pub(super) fn serialize<S: Serializer>(content: &Content, s: S) -> Result<S::Ok, S::Error> {
        match content {
            Content::Text(text) => text.serialize(s),
            Content::Blocks(blocks) => blocks.serialize(s),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Content, D::Error> {
        match Value::deserialize(d)? {
            Value::String(text) => Ok(Content::Text(text)),
            Value::Array(blocks) => Ok(Content::Blocks(blocks)),
            Value::Null => Ok(Content::default()),
            other => Err(D::Error::custom(format!(
                "message content must be text or a list, not {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn piece(
        index: Option<usize>,
        id: Option<&str>,
        name: Option<&str>,
        args: &str,
    ) -> ToolCallChunk {
        ToolCallChunk {
            name: name.map(str::to_owned),
            args: Some(args.to_owned()),
            id: id.map(str::to_owned),
            index,
        }
    }

    fn calls(pieces: Vec<ToolCallChunk>) -> AiMessageChunk {
        AiMessageChunk {
            tool_call_chunks: pieces,
            ..AiMessageChunk::default()
        }
    }

    fn blocks(blocks: Value) -> AiMessageChunk {
        match blocks {
            Value::Array(blocks) => AiMessageChunk::new(Content::Blocks(blocks)),
            other => AiMessageChunk::new(Content::Blocks(vec![other])),
        }
    }

    fn usage(input: u64, output: u64) -> Option<UsageMetadata> {
        Some(UsageMetadata::new(input, output, input + output))
    }

    #[test]
    fn text_chunks_concatenate_by_add() {
        let merged =
            AiMessageChunk::new("Hel") + AiMessageChunk::new("lo") + AiMessageChunk::new(", world");
        assert_eq!(merged.content, Content::Text("Hello, world".into()));
    }

    #[test]
    fn text_chunks_concatenate_by_sum_and_add_assign() {
        let pieces = ["The ", "quick ", "fox"].map(AiMessageChunk::new);
        let summed: AiMessageChunk = pieces.clone().into_iter().sum();
        assert_eq!(summed.content, Content::Text("The quick fox".into()));

        let mut folded = AiMessageChunk::default();
        for piece in pieces {
            folded += piece;
        }
        assert_eq!(folded, summed);
    }

    #[test]
    fn sum_of_nothing_is_an_empty_chunk() {
        let summed: AiMessageChunk = std::iter::empty().sum();
        assert_eq!(summed, AiMessageChunk::default());
    }

    #[test]
    fn interleaved_tool_call_chunks_rebuild_each_call() -> TestResult {
        let first = calls(vec![
            piece(Some(0), Some("call_a"), Some("search"), "{\"q\""),
            piece(Some(1), Some("call_b"), Some("lookup"), ""),
        ]);
        let second = calls(vec![
            piece(Some(1), None, None, "{\"key\": "),
            piece(Some(0), None, None, ": \"ru"),
        ]);
        let third = calls(vec![
            piece(Some(0), None, None, "st\"}"),
            piece(Some(1), None, None, "42}"),
        ]);

        let merged = first + second + third;
        assert_eq!(
            merged.tool_call_chunks,
            vec![
                piece(Some(0), Some("call_a"), Some("search"), "{\"q\": \"rust\"}"),
                piece(Some(1), Some("call_b"), Some("lookup"), "{\"key\": 42}"),
            ]
        );

        let message = merged.into_message()?;
        assert_eq!(
            message.tool_calls(),
            [
                ToolCall::new("call_a", "search", json!({"q": "rust"})),
                ToolCall::new("call_b", "lookup", json!({"key": 42})),
            ]
        );
        Ok(())
    }

    #[test]
    fn a_repeated_name_or_id_is_kept_once() {
        let merged = calls(vec![piece(Some(0), Some("c1"), Some("search"), "{")])
            + calls(vec![piece(Some(0), Some("c1"), Some("search"), "}")]);
        assert_eq!(
            merged.tool_call_chunks,
            vec![piece(Some(0), Some("c1"), Some("search"), "{}")]
        );
    }

    #[test]
    fn tool_call_chunks_without_index_or_with_conflicting_ids_are_appended() {
        let merged = calls(vec![piece(None, Some("a"), Some("f"), "{}")])
            + calls(vec![piece(None, Some("b"), Some("g"), "{}")])
            + calls(vec![piece(Some(0), Some("c"), Some("h"), "{")])
            + calls(vec![piece(Some(0), Some("d"), Some("i"), "{")]);
        let names: Vec<_> = merged
            .tool_call_chunks
            .iter()
            .map(|c| c.name.as_deref())
            .collect();
        assert_eq!(names, [Some("f"), Some("g"), Some("h"), Some("i")]);
    }

    #[test]
    fn the_provider_id_wins_over_run_ids() {
        let ids = |ids: &[Option<&str>]| -> Option<String> {
            ids.iter()
                .map(|id| AiMessageChunk {
                    id: id.map(str::to_owned),
                    ..AiMessageChunk::default()
                })
                .sum::<AiMessageChunk>()
                .id
        };
        assert_eq!(
            ids(&[Some("run-1"), Some("chatcmpl-9"), Some("msg_2")]).as_deref(),
            Some("chatcmpl-9")
        );
        assert_eq!(
            ids(&[Some("lc_run-1"), None, Some("run-2")]).as_deref(),
            Some("lc_run-1")
        );
        assert_eq!(
            ids(&[Some("lc_abc"), Some("run-2")]).as_deref(),
            Some("run-2")
        );
        assert_eq!(
            ids(&[None, Some("lc_abc"), Some("lc_def")]).as_deref(),
            Some("lc_abc")
        );
        assert_eq!(ids(&[None, None]), None);

        // Grouping does not change the choice.
        let chunk = |id: &str| AiMessageChunk::default().with_id(id);
        let left = (chunk("lc_x") + chunk("run-1")) + chunk("prov");
        let right = chunk("lc_x") + (chunk("run-1") + chunk("prov"));
        assert_eq!(left.id.as_deref(), Some("prov"));
        assert_eq!(right.id, left.id);
    }

    #[test]
    fn usage_is_summed() {
        let mut first = AiMessageChunk::new("a");
        first.usage_metadata = usage(10, 0);
        let mut last = AiMessageChunk::new("b");
        last.usage_metadata = usage(0, 7);
        let merged: AiMessageChunk = [first, AiMessageChunk::new("c"), last].into_iter().sum();
        assert_eq!(merged.usage_metadata, usage(10, 7));

        let none = AiMessageChunk::new("a") + AiMessageChunk::new("b");
        assert_eq!(none.usage_metadata, None);

        let huge = AiMessageChunk {
            usage_metadata: usage(u64::MAX - 1, 0),
            ..AiMessageChunk::default()
        };
        let saturated = huge.clone() + huge;
        assert_eq!(
            saturated.usage_metadata.map(|u| u.input_tokens),
            Some(u64::MAX)
        );
    }

    #[test]
    fn name_is_the_first_one_seen() {
        let mut named = AiMessageChunk::new("b");
        named.name = Some("bot".into());
        let merged = AiMessageChunk::new("a") + named;
        assert_eq!(merged.name.as_deref(), Some("bot"));
    }

    #[test]
    fn into_message_parses_args_and_reads_empty_args_as_an_empty_object() -> TestResult {
        let mut chunk = calls(vec![
            piece(Some(0), Some("c1"), Some("now"), ""),
            piece(Some(1), Some("c2"), Some("add"), "{\"a\": 1, \"b\": [2]}"),
            ToolCallChunk {
                name: Some("noargs".into()),
                ..ToolCallChunk::default()
            },
        ]);
        chunk.content = "sure".into();
        chunk.id = Some("msg_1".into());
        chunk.usage_metadata = usage(3, 4);

        let expected = Message::Ai(AiMessage {
            content: "sure".into(),
            id: Some("msg_1".into()),
            name: None,
            tool_calls: vec![
                ToolCall::new("c1", "now", json!({})),
                ToolCall::new("c2", "add", json!({"a": 1, "b": [2]})),
                ToolCall {
                    id: None,
                    name: "noargs".into(),
                    args: json!({}),
                    ..ToolCall::default()
                },
            ],
            usage_metadata: usage(3, 4),
            ..AiMessage::default()
        });
        assert_eq!(chunk.into_message()?, expected);
        Ok(())
    }

    #[test]
    fn into_message_refuses_args_that_are_not_a_json_object() {
        for bad in ["{\"q\": \"ru", "[1, 2]", "42", "not json"] {
            let chunk = calls(vec![piece(Some(0), Some("c1"), Some("search"), bad)]);
            let err = chunk.into_message().err();
            assert!(
                matches!(&err, Some(Error::InvalidUpdate(m)) if m.contains("search")),
                "{bad}: {err:?}"
            );
        }
    }

    #[test]
    fn ai_message_round_trips_through_a_chunk() -> TestResult {
        let message = AiMessage {
            content: "calling".into(),
            id: Some("msg_1".into()),
            name: Some("bot".into()),
            tool_calls: vec![
                ToolCall::new("c1", "search", json!({"q": "rust"})),
                ToolCall::new("c2", "search", json!({"q": "serde"})),
            ],
            usage_metadata: usage(1, 2),
            ..AiMessage::default()
        };
        let chunk = AiMessageChunk::from(message.clone());
        assert!(chunk.tool_call_chunks.iter().all(|c| c.index.is_none()));
        assert_eq!(chunk.into_message()?, Message::Ai(message));
        Ok(())
    }

    #[test]
    fn blocks_merge_by_index() {
        let merged = blocks(json!([{"type": "text", "text": "Hel", "index": 0}]))
            + blocks(json!([
                {"type": "text", "text": "lo", "index": 0},
                {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}, "index": 1}
            ]))
            + blocks(json!([{"type": "input_json_delta", "partial_json": "{\"q\":", "index": 1}]))
            + blocks(json!([
                {"type": "input_json_delta", "partial_json": " \"rust\"}", "index": 1},
                {"type": "text", "text": "!", "index": 2}
            ]));
        assert_eq!(
            merged.content,
            Content::Blocks(vec![
                json!({"type": "text", "text": "Hello", "index": 0}),
                json!({"type": "tool_use", "id": "toolu_1", "name": "search", "input": {},
                       "index": 1, "partial_json": "{\"q\": \"rust\"}"}),
                json!({"type": "text", "text": "!", "index": 2}),
            ])
        );
    }

    #[test]
    fn block_chunks_sum_as_they_add() {
        let pieces = [
            blocks(json!([{"type": "text", "text": "a", "index": 0}])),
            blocks(json!([{"type": "text", "text": "b", "index": 0}])),
        ];
        let summed: AiMessageChunk = pieces.clone().into_iter().sum();
        let [first, second] = pieces;
        assert_eq!(summed, first + second);
        assert_eq!(
            summed.content,
            Content::Blocks(vec![json!({"type": "text", "text": "ab", "index": 0})])
        );
    }

    #[test]
    fn blocks_with_conflicting_ids_or_no_index_are_appended() {
        let merged = blocks(json!([{"type": "text", "text": "a", "index": 0, "id": "b1"}]))
            + blocks(json!([{"type": "text", "text": "b", "index": 0, "id": "b2"}]))
            + blocks(json!([{"type": "text", "text": "c"}]))
            + blocks(json!([{"type": "text", "text": "d"}]));
        assert_eq!(merged.content.text(), "abcd");
        assert!(matches!(&merged.content, Content::Blocks(b) if b.len() == 4));
    }

    #[test]
    fn block_values_merge_as_langchain_merges_dicts() {
        let merged = blocks(json!({"index": 0, "n": 1, "f": 1.5, "s": "a", "id": "i", "created": 5}))
            + blocks(json!({"index": 0, "n": 2, "f": 2.5, "s": "b", "id": "i", "created": 7}))
            // A value of another type, or a null, leaves the left value alone.
            + blocks(json!({"index": 0, "n": "x", "s": null, "extra": true}));
        assert_eq!(
            merged.content,
            Content::Blocks(vec![json!(
                {"index": 0, "n": 3, "f": 1.5, "s": "ab", "id": "i", "created": 7, "extra": true}
            )])
        );
    }

    #[test]
    fn non_standard_blocks_nest_their_value() {
        let onto_standard = blocks(json!({"type": "text", "text": "a", "index": 0}))
            + blocks(json!({"type": "non_standard", "value": {"type": "x", "k": "v"}, "index": 0}));
        assert_eq!(
            onto_standard.content,
            Content::Blocks(vec![
                json!({"type": "text", "text": "a", "index": 0, "extras": {"k": "v"}})
            ])
        );
        let onto_non_standard =
            blocks(json!({"type": "non_standard", "value": {"k": "v"}, "index": 0}))
                + blocks(
                    json!({"type": "non_standard", "value": {"type": "x", "k": "w"}, "index": 0}),
                );
        assert_eq!(
            onto_non_standard.content,
            Content::Blocks(vec![
                json!({"type": "non_standard", "value": {"k": "vw"}, "index": 0})
            ])
        );
    }

    #[test]
    fn text_and_blocks_mix_as_langchain_does() {
        let text_then_blocks =
            AiMessageChunk::new("") + blocks(json!([{"type": "text", "text": "a", "index": 0}]));
        assert_eq!(
            text_then_blocks.content,
            Content::Blocks(vec![
                json!(""),
                json!({"type": "text", "text": "a", "index": 0})
            ])
        );

        let onto_string_block = blocks(json!(["x"])) + AiMessageChunk::new("y");
        assert_eq!(
            onto_string_block.content,
            Content::Blocks(vec![json!("xy")])
        );

        let onto_object_block =
            blocks(json!([{"type": "image"}])) + AiMessageChunk::new("y") + AiMessageChunk::new("");
        assert_eq!(
            onto_object_block.content,
            Content::Blocks(vec![json!({"type": "image"}), json!("y")])
        );

        // LangChain drops text added to an empty block list; it is kept here.
        let onto_nothing =
            AiMessageChunk::new(Content::Blocks(Vec::new())) + AiMessageChunk::new("y");
        assert_eq!(onto_nothing.content.text(), "y");
    }

    #[test]
    fn chunks_round_trip_through_json() -> TestResult {
        let mut chunk = calls(vec![
            piece(Some(0), Some("c1"), Some("search"), "{\"q\""),
            ToolCallChunk::default(),
        ]);
        chunk.content = Content::Blocks(vec![json!({"type": "text", "text": "hi", "index": 0})]);
        chunk.id = Some("run-1".into());
        chunk.name = Some("bot".into());
        chunk.usage_metadata = usage(1, 1);

        let text = serde_json::to_value(&chunk)?;
        assert_eq!(text["type"], "AIMessageChunk");
        assert_eq!(text["tool_call_chunks"][0]["type"], "tool_call_chunk");
        assert_eq!(serde_json::from_value::<AiMessageChunk>(text)?, chunk);

        let plain = AiMessageChunk::new("hello");
        assert_eq!(
            serde_json::from_str::<AiMessageChunk>(&serde_json::to_string(&plain)?)?,
            plain
        );
        Ok(())
    }

    #[test]
    fn langchain_chunk_dicts_are_read() -> TestResult {
        let dict = json!({
            "content": "", "additional_kwargs": {}, "response_metadata": {}, "type": "AIMessageChunk",
            "name": null, "id": null,
            "tool_calls": [{"name": "f", "args": {}, "id": "c1", "type": "tool_call"}],
            "invalid_tool_calls": [], "usage_metadata": null,
            "tool_call_chunks": [{"name": "f", "args": "", "id": "c1", "index": 0, "type": "tool_call_chunk"}],
            "chunk_position": null
        });
        let chunk: AiMessageChunk = serde_json::from_value(dict)?;
        assert_eq!(
            chunk,
            calls(vec![piece(Some(0), Some("c1"), Some("f"), "")])
        );

        let sparse: AiMessageChunk = serde_json::from_value(json!({"content": null}))?;
        assert_eq!(sparse, AiMessageChunk::default());
        assert!(serde_json::from_value::<AiMessageChunk>(json!({"content": 3})).is_err());
        Ok(())
    }

    /// Small JSON values whose keys collide often, so merges reach every branch.
    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "(lc_)?[a-c]{0,3}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("index".to_owned()),
                        Just("id".to_owned()),
                        Just("type".to_owned()),
                        Just("value".to_owned()),
                        Just("created".to_owned()),
                        "[a-c]",
                    ],
                    prop_oneof![
                        inner,
                        Just(Value::from("non_standard")),
                        (0u8..3).prop_map(Value::from)
                    ],
                    0..5,
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_chunk() -> impl Strategy<Value = AiMessageChunk> {
        let content = prop_oneof![
            ".{0,4}".prop_map(Content::Text),
            prop::collection::vec(arb_json(), 0..4).prop_map(Content::Blocks),
        ];
        let piece = (
            prop::option::of("[fg]"),
            prop::option::of(prop_oneof![
                Just("{}".to_owned()),
                Just("{\"a\"".to_owned()),
                ".{0,3}"
            ]),
            prop::option::of("(run-|lc_)?[xy]?"),
            prop::option::of(0usize..3),
        )
            .prop_map(|(name, args, id, index)| ToolCallChunk {
                name,
                args,
                id,
                index,
            });
        (
            content,
            prop::option::of("(run-|lc_run-|lc_)?[xy]?"),
            prop::option::of("[ab]"),
            prop::collection::vec(piece, 0..3),
            prop::option::of((any::<u64>(), any::<u64>(), any::<u64>())),
        )
            .prop_map(
                |(content, id, name, tool_call_chunks, usage)| AiMessageChunk {
                    content,
                    id,
                    name,
                    tool_call_chunks,
                    usage_metadata: usage.map(|(i, o, t)| UsageMetadata::new(i, o, t)),
                },
            )
    }

    proptest! {
        /// Adding any chunks, and turning the sum into a message, never panics; the sum
        /// survives JSON.
        #[test]
        fn any_chunks_add_up_without_panicking(chunks in prop::collection::vec(arb_chunk(), 0..6)) {
            let summed: AiMessageChunk = chunks.iter().cloned().sum();
            let text = serde_json::to_string(&summed).expect("encode");
            let back: AiMessageChunk = serde_json::from_str(&text).expect("decode");
            prop_assert_eq!(&back, &summed);
            let _ = summed.into_message();
        }

        /// Text chunks add up to the concatenated text however they are grouped.
        #[test]
        fn text_sums_are_concatenations(pieces in prop::collection::vec(".{0,5}", 0..6)) {
            let summed: AiMessageChunk = pieces.iter().map(|p| AiMessageChunk::new(p.as_str())).sum();
            prop_assert_eq!(summed.content, Content::Text(pieces.concat()));
        }
    }
}
