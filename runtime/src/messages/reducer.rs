//! `add_messages`: how a list of messages takes an update, as LangGraph's reducer does,
//! optionally returning the list in OpenAI's content format (its `format` argument).

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use serde_json::{Map, Value, json};

use crate::messages::convert::openai_image_from_anthropic;
use crate::messages::{Content, Message, REMOVE_ALL_MESSAGES, ToolCall, ToolMessage, ToolStatus};
use crate::{Error, Result};

/// How [`add_messages_as`] returns the merged list (LangGraph's `add_messages(format=...)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessagesFormat {
    /// The messages as given (`format=None`).
    #[default]
    AsIs,
    /// `"langchain-openai"`: each message's content in OpenAI's shape, as LangChain's
    /// `convert_to_openai_messages` writes it (see [`add_messages_as`]).
    LangChainOpenAi,
}

impl FromStr for MessagesFormat {
    type Err = Error;

    /// `"langchain-openai"`; any other name is an error naming it.
    fn from_str(name: &str) -> Result<Self> {
        match name {
            "langchain-openai" => Ok(MessagesFormat::LangChainOpenAi),
            other => Err(Error::InvalidUpdate(format!(
                "unrecognized add_messages format `{other}`: expected `langchain-openai` or none"
            ))),
        }
    }
}

/// Namespace of the ids `add_messages` gives messages that have none.
const ID_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6a1f_3c7e_9b24_4d5a_8e0f_2b7c_5d91_e3a4);

/// Merges `update` into `current` by id: a message with a new id is appended, one with a
/// known id replaces it in place, [`Message::remove`] deletes its id (an unknown id is an
/// error), and [`Message::remove_all`] drops everything before it (the current list and the
/// update's earlier messages). A message without an id gets one.
///
/// The ids given are uuids derived from the message and its position rather than random
/// ones, so folding the same writes again (as loading a thread's delta history does) gives
/// the same ids.
pub fn add_messages(current: &mut Vec<Message>, update: Vec<Message>) -> Result<()> {
    merge(current, update)
}

/// [`add_messages`], then the merged list in `format` (LangGraph's
/// `add_messages(format=...)`); for a derived state,
/// `#[reducer(|c, u| add_messages_as(c, u, MessagesFormat::LangChainOpenAi))]`.
///
/// [`MessagesFormat::LangChainOpenAi`] rewrites each message's content as LangChain's
/// `convert_to_openai_messages` does: bare strings and text blocks become `{"type": "text",
/// "text"}` (other keys such as `cache_control` dropped), images (`image_url`, Anthropic's
/// `source`, LangChain's `url`/`data` blocks) become `image_url` blocks with a URL or data
/// URL, `json` and `guard_content` blocks become text, an AI message's `tool_use` blocks
/// become its tool calls (unless one has that id already), and `tool_result` blocks leave
/// their message as tool messages placed after it (a message left empty by that is dropped);
/// other blocks are kept. Content whose blocks are all text becomes one string, the texts
/// joined by newlines.
///
/// Unlike LangGraph, which rebuilds the messages from OpenAI dicts and so drops their ids
/// (and every field OpenAI has no place for), only the content changes: ids, names, tool
/// calls, usage and metadata stay, so a later update still replaces or removes a message
/// by its id. A tool message split off a `tool_result` gets an id like any message without
/// one, and the `error` status when the block says `is_error`. `json` blocks are written
/// as compact JSON, not with Python's `json.dumps` spacing. A block without a `type`, a
/// text block without text, an image without a URL or data and a `tool_use` block outside
/// an AI message are errors naming the message, and the list is left as it was.
pub fn add_messages_as(
    current: &mut Vec<Message>,
    update: Vec<Message>,
    format: MessagesFormat,
) -> Result<()> {
    match format {
        MessagesFormat::AsIs => merge(current, update),
        MessagesFormat::LangChainOpenAi => {
            let mut merged = current.clone();
            merge(&mut merged, update)?;
            *current = to_openai_content(merged)?;
            Ok(())
        }
    }
}

/// The merge of [`add_messages`].
fn merge(current: &mut Vec<Message>, update: Vec<Message>) -> Result<()> {
    let mut update = update;
    for (i, message) in current.iter_mut().enumerate() {
        if message.id().is_none() {
            message.set_id(Some(fresh_id(i, message)));
        }
    }
    if let Some(last) = update
        .iter()
        .rposition(|m| matches!(m, Message::Remove(r) if r.id == REMOVE_ALL_MESSAGES))
    {
        current.clear();
        update.drain(..=last);
    }
    let mut index: HashMap<String, usize> = current
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.id().map(|id| (id.to_owned(), i)))
        .collect();
    let mut removed: HashSet<String> = HashSet::new();
    for mut message in update {
        if message.id().is_none() {
            message.set_id(Some(fresh_id(current.len(), &message)));
        }
        let id = message.id().unwrap_or_default().to_owned();
        match (index.get(&id), &message) {
            (Some(_), Message::Remove(_)) => {
                removed.insert(id);
            }
            (Some(&at), _) => {
                removed.remove(&id);
                current[at] = message;
            }
            (None, Message::Remove(_)) => {
                return Err(Error::InvalidUpdate(format!(
                    "attempting to delete a message with an id that doesn't exist (`{id}`)"
                )));
            }
            (None, _) => {
                index.insert(id, current.len());
                current.push(message);
            }
        }
    }
    if !removed.is_empty() {
        current.retain(|m| m.id().is_none_or(|id| !removed.contains(id)));
    }
    Ok(())
}

/// The id of a message without one at `position`: a uuid of its position and its JSON.
fn fresh_id(position: usize, message: &Message) -> String {
    let name = format!("{position}:{}", message.to_json());
    uuid::Uuid::new_v5(&ID_NAMESPACE, name.as_bytes()).to_string()
}

/// `messages` with their content in OpenAI's shape (see [`add_messages_as`]).
fn to_openai_content(messages: Vec<Message>) -> Result<Vec<Message>> {
    let mut out = Vec::with_capacity(messages.len());
    for (index, mut message) in messages.into_iter().enumerate() {
        let is_ai = matches!(message, Message::Ai(_));
        let blocks = match content_mut(&mut message) {
            Some(Content::Blocks(blocks)) => std::mem::take(blocks),
            _ => {
                out.push(message);
                continue;
            }
        };
        let blocks = format_blocks(index, blocks, is_ai)?;
        let emptied = blocks.kept.is_empty() && !blocks.tool_results.is_empty();
        if let Some(content) = content_mut(&mut message) {
            *content = joined(blocks.kept);
        }
        if let Message::Ai(ai) = &mut message {
            for call in blocks.tool_uses {
                if !ai.tool_calls.iter().any(|c| c.id == call.id) {
                    ai.tool_calls.push(call);
                }
            }
        }
        if !emptied {
            out.push(message);
        }
        for mut result in blocks.tool_results {
            result.set_id(Some(fresh_id(out.len(), &result)));
            out.push(result);
        }
    }
    Ok(out)
}

/// The content of a message that has one (not a remove).
fn content_mut(message: &mut Message) -> Option<&mut Content> {
    match message {
        Message::Human(m) => Some(&mut m.content),
        Message::Ai(m) => Some(&mut m.content),
        Message::System(m) => Some(&mut m.content),
        Message::Tool(m) => Some(&mut m.content),
        Message::Chat(m) => Some(&mut m.content),
        Message::Function(m) => Some(&mut m.content),
        Message::Remove(_) => None,
    }
}

/// One message's blocks in OpenAI's shape, and what leaves the content.
#[derive(Default)]
struct Formatted {
    kept: Vec<Value>,
    tool_uses: Vec<ToolCall>,
    tool_results: Vec<Message>,
}

/// Formats the blocks of message `index`; `tool_use` blocks are only allowed when `is_ai`.
fn format_blocks(index: usize, blocks: Vec<Value>, is_ai: bool) -> Result<Formatted> {
    let bad = |detail: String| Error::InvalidUpdate(format!("message {index}: {detail}"));
    let mut out = Formatted::default();
    for block in blocks {
        let map = match block {
            Value::String(text) => {
                out.kept.push(json!({"type": "text", "text": text}));
                continue;
            }
            Value::Object(map) => map,
            other => {
                return Err(bad(format!(
                    "a content block must be text or an object, not {other}"
                )));
            }
        };
        let text_of = |key: &str| map.get(key).and_then(Value::as_str);
        match text_of("type") {
            None => {
                return Err(bad(format!(
                    "content block without a `type`: {}",
                    Value::Object(map)
                )));
            }
            Some("text") => match text_of("text") {
                Some(text) => out.kept.push(json!({"type": "text", "text": text})),
                None => return Err(bad("a text block needs a string `text`".into())),
            },
            Some("image_url") => {
                out.kept
                    .push(json!({"type": "image_url", "image_url": map.get("image_url")}));
            }
            Some("image") => match image_url(index, &map) {
                Some(block) => out.kept.push(block?),
                None => {
                    let block = Value::Object(map);
                    return Err(bad(format!(
                        "an image block needs a URL or base64 data: {block}"
                    )));
                }
            },
            Some("json") => {
                let json = map.get("json").unwrap_or(&Value::Null);
                out.kept
                    .push(json!({"type": "text", "text": json.to_string()}));
            }
            Some("guard_content") => {
                let text = map
                    .get("guard_content")
                    .and_then(|g| g.get("text"))
                    .and_then(Value::as_str);
                out.kept
                    .push(json!({"type": "text", "text": text.unwrap_or_default()}));
            }
            Some("tool_use") if is_ai => out.tool_uses.push(ToolCall {
                id: text_of("id").map(str::to_owned),
                name: text_of("name").unwrap_or_default().to_owned(),
                args: map.get("input").cloned().unwrap_or_else(|| json!({})),
                extra: Map::new(),
            }),
            Some("tool_use") => {
                return Err(bad("a `tool_use` block belongs to an AI message".into()));
            }
            Some("tool_result") => {
                let content = match map.get("content").cloned().unwrap_or(Value::Null) {
                    Value::Array(blocks) => joined(format_blocks(index, blocks, false)?.kept),
                    Value::String(text) => Content::Text(text),
                    Value::Null => Content::default(),
                    other => Content::Text(other.to_string()),
                };
                let status = match map.get("is_error").and_then(Value::as_bool) {
                    Some(true) => ToolStatus::Error,
                    _ => ToolStatus::Success,
                };
                out.tool_results.push(Message::Tool(ToolMessage {
                    content,
                    tool_call_id: text_of("tool_use_id").unwrap_or_default().to_owned(),
                    status,
                    ..ToolMessage::default()
                }));
            }
            Some(_) => out.kept.push(Value::Object(map)),
        }
    }
    Ok(out)
}

/// An `image` block as an `image_url` block: Anthropic's `source`, or LangChain's `url` or
/// `data`/`base64` with `mime_type`. `None` when it has neither.
fn image_url(index: usize, block: &Map<String, Value>) -> Option<Result<Value>> {
    if block.contains_key("source") {
        return Some(
            openai_image_from_anthropic(index, block)
                .map_err(|e| Error::InvalidUpdate(e.to_string())),
        );
    }
    let text = |key: &str| block.get(key).and_then(Value::as_str);
    let url = match (
        text("url"),
        text("data").or(text("base64")),
        text("mime_type"),
    ) {
        (Some(url), _, _) => url.to_owned(),
        (None, Some(data), Some(mime)) => format!("data:{mime};base64,{data}"),
        _ => return None,
    };
    Some(Ok(json!({"type": "image_url", "image_url": {"url": url}})))
}

/// Blocks as content: one string when they are all text blocks (joined by newlines).
fn joined(blocks: Vec<Value>) -> Content {
    let texts: Option<Vec<&str>> = blocks
        .iter()
        .map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => b.get("text").and_then(Value::as_str),
            _ => None,
        })
        .collect();
    match texts {
        Some(texts) => Content::Text(texts.join("\n")),
        None => Content::Blocks(blocks),
    }
}
