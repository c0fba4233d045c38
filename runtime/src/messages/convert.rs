//! Messages to and from the chat APIs: OpenAI Chat Completions and Anthropic Messages.
//!
//! Requests follow LangChain's `ChatOpenAI` and `ChatAnthropic` formatting:
//!
//! - OpenAI: one dict per message. An assistant message that only calls tools has `content:
//!   null`; a tool message is `{"role": "tool", "tool_call_id", "content"}` and carries no
//!   `name`, which the API does not accept on tool messages.
//! - Anthropic: system messages become the request's `system` text, wherever they stand (a
//!   run of consecutive ones is joined with a blank line; two separate runs are an error, as in
//!   `ChatAnthropic`). Tool results travel as `tool_result` blocks of a user turn, and
//!   consecutive turns of one role are merged into one, since the API wants user and
//!   assistant turns to alternate. Message names are dropped: the API has no field for them.
//!
//! A [`Message::Chat`] takes its role: as it is to OpenAI, and to Anthropic a `user`,
//! `assistant` or `system` role (`human`, `ai` and `developer` too) becomes that side; any
//! other role, like a [`Message::Function`] (OpenAI's legacy function result, sent to OpenAI
//! with the `function` role), has no Anthropic form and is an error.
//!
//! A [`Message::Remove`] is an instruction to [`add_messages`](crate::messages::add_messages),
//! not something a model can read: every conversion refuses it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::messages::{AiMessage, Content, Message, ToolCall, UsageMetadata};

/// Why messages could not be converted to or from a chat API format.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// A remove instruction was given where only messages belong.
    #[error(
        "message {index} is a RemoveMessage (id `{id}`): it is an instruction to add_messages, \
         not a message to send to a model"
    )]
    RemoveMessage {
        /// Its position in the list.
        index: usize,
        /// The id it would delete.
        id: String,
    },

    /// The messages cannot be expressed in the target format.
    #[error("message {index} cannot be converted: {detail}")]
    Unsupported {
        /// The position of the offending message.
        index: usize,
        /// What is wrong with it.
        detail: String,
    },

    /// A provider response lacks a field or has one of the wrong shape.
    #[error("malformed {provider} response: {detail}")]
    MalformedResponse {
        /// `openai` or `anthropic`.
        provider: &'static str,
        /// What is missing or wrong.
        detail: String,
    },

    /// A tool call's arguments in a response are not valid JSON.
    #[error("tool call `{name}` has arguments that are not valid JSON: {source}")]
    InvalidArguments {
        /// The tool called.
        name: String,
        /// The JSON parser's error.
        #[source]
        source: serde_json::Error,
    },
}

/// The parts of an Anthropic Messages request that come from the conversation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnthropicRequest {
    /// The system prompt, if any system message was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The user and assistant turns, alternating.
    pub messages: Vec<Value>,
}

/// The messages as OpenAI Chat Completions request messages.
pub fn to_openai(messages: &[Message]) -> Result<Vec<Value>, ConvertError> {
    messages
        .iter()
        .enumerate()
        .map(|(index, message)| openai_message(index, message))
        .collect()
}

fn openai_message(index: usize, message: &Message) -> Result<Value, ConvertError> {
    let mut out = Map::new();
    match message {
        Message::System(m) => {
            out.insert("role".into(), json!("system"));
            out.insert("content".into(), json!(m.content.text()));
        }
        Message::Human(m) => {
            out.insert("role".into(), json!("user"));
            let content = match &m.content {
                Content::Text(text) => json!(text),
                Content::Blocks(blocks) => Value::Array(openai_user_blocks(index, blocks)?),
            };
            out.insert("content".into(), content);
        }
        Message::Ai(m) => {
            out.insert("role".into(), json!("assistant"));
            let text = m.content.text();
            if m.tool_calls.is_empty() {
                out.insert("content".into(), json!(text));
            } else {
                // The API expects null, not "", beside tool calls when there is no text.
                let content = if text.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                };
                out.insert("content".into(), content);
                let calls = m
                    .tool_calls
                    .iter()
                    .map(|call| openai_tool_call(index, call))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert("tool_calls".into(), Value::Array(calls));
            }
        }
        Message::Tool(m) => {
            // Tool messages take no `name` in this API, so it is left out.
            return Ok(json!({
                "role": "tool",
                "tool_call_id": m.tool_call_id,
                "content": m.content.text(),
            }));
        }
        Message::Chat(m) => {
            out.insert("role".into(), json!(m.role));
            let content = match &m.content {
                Content::Blocks(blocks) if m.role == "user" => {
                    Value::Array(openai_user_blocks(index, blocks)?)
                }
                Content::Text(text) => json!(text),
                Content::Blocks(_) => json!(m.content.text()),
            };
            out.insert("content".into(), content);
        }
        Message::Function(m) => {
            out.insert("role".into(), json!("function"));
            out.insert("content".into(), json!(m.content.text()));
        }
        Message::Remove(m) => {
            return Err(ConvertError::RemoveMessage {
                index,
                id: m.id.clone(),
            });
        }
    }
    if let Some(name) = message.name() {
        out.insert("name".into(), json!(name));
    }
    Ok(Value::Object(out))
}

fn openai_tool_call(index: usize, call: &ToolCall) -> Result<Value, ConvertError> {
    let id = call_id(index, call)?;
    let arguments = serde_json::to_string(&call.args).map_err(|e| ConvertError::Unsupported {
        index,
        detail: format!("tool call `{}` arguments: {e}", call.name),
    })?;
    Ok(json!({
        "id": id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }))
}

/// A tool call's id; both APIs pair results to calls by it, so a call without one cannot be
/// sent.
fn call_id(index: usize, call: &ToolCall) -> Result<&str, ConvertError> {
    call.id.as_deref().ok_or_else(|| ConvertError::Unsupported {
        index,
        detail: format!("tool call `{}` has no id", call.name),
    })
}

/// The error for a content block that is neither text nor an object with a `type`.
fn untyped_block(index: usize, block: &Value) -> ConvertError {
    let detail = match block {
        Value::Object(_) => format!("content block without a `type`: {block}"),
        other => format!("content block must be text or an object, not {other}"),
    };
    ConvertError::Unsupported { index, detail }
}

/// User content blocks in OpenAI's shape: text and `image_url` blocks as they are, bare
/// strings as text blocks, Anthropic image blocks as `image_url`, `tool_use` dropped (it
/// belongs to the assistant side), anything else passed on for the API to judge.
fn openai_user_blocks(index: usize, blocks: &[Value]) -> Result<Vec<Value>, ConvertError> {
    let mut out = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block {
            Value::String(text) => out.push(json!({"type": "text", "text": text})),
            Value::Object(b) => match b.get("type").and_then(Value::as_str) {
                Some("tool_use") => {}
                Some("image") => out.push(openai_image_from_anthropic(index, b)?),
                Some(_) => out.push(block.clone()),
                None => return Err(untyped_block(index, block)),
            },
            other => return Err(untyped_block(index, other)),
        }
    }
    Ok(out)
}

pub(crate) fn openai_image_from_anthropic(
    index: usize,
    block: &Map<String, Value>,
) -> Result<Value, ConvertError> {
    let source = block.get("source").and_then(Value::as_object);
    let field = |key: &str| source.and_then(|s| s.get(key)).and_then(Value::as_str);
    let url = match field("type") {
        Some("base64") => match (field("media_type"), field("data")) {
            (Some(media_type), Some(data)) => format!("data:{media_type};base64,{data}"),
            _ => String::new(),
        },
        Some("url") => field("url").unwrap_or_default().to_owned(),
        _ => String::new(),
    };
    if url.is_empty() {
        return Err(ConvertError::Unsupported {
            index,
            detail: "image block needs a base64 or url source".into(),
        });
    }
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// The messages as an Anthropic Messages request (see the module docs for the system prompt
/// and merging rules).
pub fn to_anthropic(messages: &[Message]) -> Result<AnthropicRequest, ConvertError> {
    let mut system: Vec<String> = Vec::new();
    let mut system_run_ended = false;
    let mut turns: Vec<(&'static str, Value)> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let (role, content) = match message {
            Message::System(m) => {
                push_system(&mut system, system_run_ended, index, &m.content)?;
                continue;
            }
            Message::Human(m) => ("user", anthropic_content(index, &m.content)?),
            Message::Chat(m) => match anthropic_role(message) {
                Some("system") => {
                    push_system(&mut system, system_run_ended, index, &m.content)?;
                    continue;
                }
                Some("user") => ("user", anthropic_content(index, &m.content)?),
                Some("assistant") => ("assistant", anthropic_content(index, &m.content)?),
                _ => {
                    return Err(ConvertError::Unsupported {
                        index,
                        detail: format!(
                            "a chat message with role `{}` has no Anthropic form (roles: user, \
                             assistant, system)",
                            m.role
                        ),
                    });
                }
            },
            Message::Function(m) => {
                return Err(ConvertError::Unsupported {
                    index,
                    detail: format!(
                        "a function message (`{}`) has no Anthropic form: answer tool calls \
                         with tool messages",
                        m.name
                    ),
                });
            }
            Message::Ai(m) => ("assistant", anthropic_ai_content(index, m)?),
            Message::Tool(m) => {
                let result = json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id,
                    "content": anthropic_content(index, &m.content)?,
                });
                ("user", Value::Array(vec![result]))
            }
            Message::Remove(m) => {
                return Err(ConvertError::RemoveMessage {
                    index,
                    id: m.id.clone(),
                });
            }
        };
        if !system.is_empty() {
            system_run_ended = true;
        }
        match turns.last_mut() {
            Some((last_role, last)) if *last_role == role => {
                let mut merged = into_blocks(std::mem::take(last));
                merged.extend(into_blocks(content));
                *last = Value::Array(merged);
            }
            _ => turns.push((role, content)),
        }
    }
    Ok(AnthropicRequest {
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages: turns
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect(),
    })
}

/// Adds a system message's text to the system prompt, unless the run of system messages
/// has ended (Anthropic takes one system prompt).
fn push_system(
    system: &mut Vec<String>,
    run_ended: bool,
    index: usize,
    content: &Content,
) -> Result<(), ConvertError> {
    if run_ended {
        return Err(ConvertError::Unsupported {
            index,
            detail: "system messages must be consecutive: Anthropic takes one system prompt".into(),
        });
    }
    system.push(content.text());
    Ok(())
}

/// The Anthropic side of a system or chat message: `user`, `assistant` or `system` (a chat
/// message's role read as OpenAI's), `None` for a role Anthropic has no place for.
fn anthropic_role(message: &Message) -> Option<&'static str> {
    match message {
        Message::System(_) => Some("system"),
        Message::Chat(m) => match m.role.as_str() {
            "user" | "human" => Some("user"),
            "assistant" | "ai" => Some("assistant"),
            "system" | "developer" => Some("system"),
            _ => None,
        },
        _ => None,
    }
}

/// Turn content as a block list, for merging two turns into one.
fn into_blocks(content: Value) -> Vec<Value> {
    match content {
        Value::Array(blocks) => blocks,
        // Anthropic refuses empty text blocks.
        Value::String(text) if text.trim().is_empty() => Vec::new(),
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        other => vec![other],
    }
}

/// Human or tool content: text stays a string, blocks are put in Anthropic's shape.
fn anthropic_content(index: usize, content: &Content) -> Result<Value, ConvertError> {
    Ok(match content {
        Content::Text(text) => json!(text),
        Content::Blocks(blocks) => Value::Array(anthropic_blocks(index, blocks)?),
    })
}

/// Content blocks in Anthropic's shape: bare strings as text blocks, blank text blocks
/// dropped (the API refuses them), `image_url` blocks as `image` blocks, anything else kept.
fn anthropic_blocks(index: usize, blocks: &[Value]) -> Result<Vec<Value>, ConvertError> {
    let mut out = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block {
            Value::String(text) if text.trim().is_empty() => {}
            Value::String(text) => out.push(json!({"type": "text", "text": text})),
            Value::Object(b) => match b.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let text = b.get("text").and_then(Value::as_str).unwrap_or_default();
                    if !text.trim().is_empty() {
                        out.push(block.clone());
                    }
                }
                Some("image_url") => out.push(anthropic_image(index, b)?),
                Some(_) => out.push(block.clone()),
                None => return Err(untyped_block(index, block)),
            },
            other => return Err(untyped_block(index, other)),
        }
    }
    Ok(out)
}

/// An OpenAI `image_url` block as an Anthropic `image` block: a data URL becomes a base64
/// source, any other URL a url source.
fn anthropic_image(index: usize, block: &Map<String, Value>) -> Result<Value, ConvertError> {
    let url = match block.get("image_url") {
        Some(Value::String(url)) => Some(url.as_str()),
        Some(Value::Object(image)) => image.get("url").and_then(Value::as_str),
        _ => None,
    };
    let Some(url) = url else {
        return Err(ConvertError::Unsupported {
            index,
            detail: "image_url block has no url".into(),
        });
    };
    let source = match url.strip_prefix("data:") {
        Some(rest) => {
            let Some((media_type, data)) = rest.split_once(";base64,") else {
                return Err(ConvertError::Unsupported {
                    index,
                    detail: "an image data URL must be base64 (data:<type>;base64,<data>)".into(),
                });
            };
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        None => json!({"type": "url", "url": url}),
    };
    Ok(json!({"type": "image", "source": source}))
}

/// AI content: plain text alone stays a string; with tool calls it becomes a text block (if
/// any text) followed by one `tool_use` block per call. Blocks already present (say, from an
/// Anthropic response) are kept, a `tool_use` block being replaced by the tool call with its
/// id, so a call never appears twice.
fn anthropic_ai_content(index: usize, m: &AiMessage) -> Result<Value, ConvertError> {
    let tool_use = |call: &ToolCall| -> Result<Value, ConvertError> {
        Ok(json!({
            "type": "tool_use",
            "id": call_id(index, call)?,
            "name": call.name,
            "input": call.args,
        }))
    };
    let mut blocks = match &m.content {
        Content::Text(text) if m.tool_calls.is_empty() => return Ok(json!(text)),
        Content::Text(text) => into_blocks(json!(text)),
        Content::Blocks(blocks) => anthropic_blocks(index, blocks)?,
    };
    let mut sent: Vec<&str> = Vec::new();
    for block in &mut blocks {
        if block.get("type").and_then(Value::as_str) != Some("tool_use") {
            continue;
        }
        let id = block.get("id").and_then(Value::as_str);
        if let Some(call) = m
            .tool_calls
            .iter()
            .find(|c| c.id.is_some() && c.id.as_deref() == id)
        {
            *block = tool_use(call)?;
            sent.extend(call.id.as_deref());
        }
    }
    for call in &m.tool_calls {
        if !call.id.as_deref().is_some_and(|id| sent.contains(&id)) {
            blocks.push(tool_use(call)?);
        }
    }
    Ok(Value::Array(blocks))
}

/// The AI message of an OpenAI chat completion (`choices[0].message`), with the response's
/// id and token usage.
pub fn from_openai_response(response: &Value) -> Result<Message, ConvertError> {
    let malformed = |detail: String| ConvertError::MalformedResponse {
        provider: "openai",
        detail,
    };
    let response = response
        .as_object()
        .ok_or_else(|| malformed(format!("expected an object, got {response}")))?;
    let choice = match response.get("choices") {
        Some(Value::Array(choices)) => choices
            .first()
            .ok_or_else(|| malformed("`choices` is empty".into()))?,
        Some(other) => return Err(malformed(format!("`choices` must be a list, not {other}"))),
        None => return Err(malformed("no `choices`".into())),
    };
    let message = choice
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| malformed("`choices[0]` has no `message` object".into()))?;
    match message.get("role") {
        None | Some(Value::Null) => {}
        Some(Value::String(role)) if role == "assistant" => {}
        Some(other) => {
            return Err(malformed(format!(
                "`choices[0].message.role` must be \"assistant\", not {other}"
            )));
        }
    }
    let content = match message.get("content") {
        None | Some(Value::Null) => Content::default(),
        Some(Value::String(text)) => Content::Text(text.clone()),
        Some(Value::Array(blocks)) => Content::Blocks(blocks.clone()),
        Some(other) => {
            return Err(malformed(format!(
                "`content` must be text, a list or null, not {other}"
            )));
        }
    };
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .map(|call| openai_response_tool_call(call, &malformed))
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(malformed(format!(
                "`tool_calls` must be a list, not {other}"
            )));
        }
    };
    let usage_metadata = match response.get("usage") {
        None | Some(Value::Null) => None,
        Some(Value::Object(usage)) => {
            let count = |key: &str| token_count(usage, key, &malformed);
            let input_tokens = count("prompt_tokens")?.unwrap_or(0);
            let output_tokens = count("completion_tokens")?.unwrap_or(0);
            Some(UsageMetadata::new(
                input_tokens,
                output_tokens,
                count("total_tokens")?.unwrap_or(input_tokens.saturating_add(output_tokens)),
            ))
        }
        Some(other) => return Err(malformed(format!("`usage` must be an object, not {other}"))),
    };
    Ok(Message::Ai(AiMessage {
        content,
        id: string_field(response, "id", &malformed)?,
        name: None,
        tool_calls,
        usage_metadata,
        ..AiMessage::default()
    }))
}

fn openai_response_tool_call(
    call: &Value,
    malformed: &impl Fn(String) -> ConvertError,
) -> Result<ToolCall, ConvertError> {
    let call = call
        .as_object()
        .ok_or_else(|| malformed(format!("a tool call must be an object, not {call}")))?;
    if let Some(kind) = call.get("type").and_then(Value::as_str)
        && kind != "function"
    {
        return Err(malformed(format!("unsupported tool call type `{kind}`")));
    }
    let function = call
        .get("function")
        .and_then(Value::as_object)
        .ok_or_else(|| malformed("a tool call has no `function` object".into()))?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("a tool call has no function name".into()))?
        .to_owned();
    let args = match function.get("arguments") {
        None | Some(Value::Null) => json!({}),
        // An empty argument string is how some servers spell "no arguments".
        Some(Value::String(text)) if text.trim().is_empty() => json!({}),
        Some(Value::String(text)) => {
            serde_json::from_str(text).map_err(|source| ConvertError::InvalidArguments {
                name: name.clone(),
                source,
            })?
        }
        Some(other) => {
            return Err(malformed(format!(
                "tool call `{name}` arguments must be JSON text, not {other}"
            )));
        }
    };
    Ok(ToolCall {
        id: string_field(call, "id", malformed)?,
        name,
        args,
        extra: Map::new(),
    })
}

/// The AI message of an Anthropic Messages response: text blocks alone become plain text,
/// `tool_use` blocks become tool calls (the blocks are kept as content then), with the
/// response's id and token usage.
///
/// As in LangChain, `input_tokens` counts cache reads and writes too, since Anthropic's own
/// `input_tokens` leaves them out.
pub fn from_anthropic_response(response: &Value) -> Result<Message, ConvertError> {
    let malformed = |detail: String| ConvertError::MalformedResponse {
        provider: "anthropic",
        detail,
    };
    let response = response
        .as_object()
        .ok_or_else(|| malformed(format!("expected an object, got {response}")))?;
    match response.get("type").and_then(Value::as_str) {
        None | Some("message") => {}
        Some(other) => {
            return Err(malformed(format!(
                "expected type \"message\", got `{other}`"
            )));
        }
    }
    match response.get("role") {
        None | Some(Value::Null) => {}
        Some(Value::String(role)) if role == "assistant" => {}
        Some(other) => {
            return Err(malformed(format!(
                "`role` must be \"assistant\", not {other}"
            )));
        }
    }
    let blocks = match response.get("content") {
        Some(Value::Array(blocks)) => blocks,
        Some(other) => return Err(malformed(format!("`content` must be a list, not {other}"))),
        None => return Err(malformed("no `content`".into())),
    };
    let mut text = String::new();
    let mut only_text = true;
    let mut tool_calls = Vec::new();
    for block in blocks {
        let b = block
            .as_object()
            .ok_or_else(|| malformed(format!("a content block must be an object, not {block}")))?;
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let part = b
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("a text block has no `text`".into()))?;
                text.push_str(part);
            }
            Some("tool_use") => {
                only_text = false;
                let name = b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("a tool_use block has no `name`".into()))?
                    .to_owned();
                tool_calls.push(ToolCall {
                    id: string_field(b, "id", &malformed)?,
                    name,
                    args: b.get("input").cloned().unwrap_or_else(|| json!({})),
                    extra: Map::new(),
                });
            }
            Some(_) => only_text = false,
            None => return Err(malformed(format!("a content block has no `type`: {block}"))),
        }
    }
    let content = if only_text {
        Content::Text(text)
    } else {
        Content::Blocks(blocks.clone())
    };
    let usage_metadata = match response.get("usage") {
        None | Some(Value::Null) => None,
        Some(Value::Object(usage)) => {
            let count = |key: &str| token_count(usage, key, &malformed);
            let input_tokens = [
                count("input_tokens")?,
                count("cache_read_input_tokens")?,
                count("cache_creation_input_tokens")?,
            ]
            .into_iter()
            .flatten()
            .fold(0u64, u64::saturating_add);
            let output_tokens = count("output_tokens")?.unwrap_or(0);
            Some(UsageMetadata::new(
                input_tokens,
                output_tokens,
                input_tokens.saturating_add(output_tokens),
            ))
        }
        Some(other) => return Err(malformed(format!("`usage` must be an object, not {other}"))),
    };
    Ok(Message::Ai(AiMessage {
        content,
        id: string_field(response, "id", &malformed)?,
        name: None,
        tool_calls,
        usage_metadata,
        ..AiMessage::default()
    }))
}

/// An optional string field; present with another type is malformed.
fn string_field(
    map: &Map<String, Value>,
    key: &str,
    malformed: &impl Fn(String) -> ConvertError,
) -> Result<Option<String>, ConvertError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(malformed(format!("`{key}` must be text, not {other}"))),
    }
}

/// An optional token count; present but not a non-negative integer is malformed.
fn token_count(
    usage: &Map<String, Value>,
    key: &str,
    malformed: &impl Fn(String) -> ConvertError,
) -> Result<Option<u64>, ConvertError> {
    match usage.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_u64().map(Some).ok_or_else(|| {
            malformed(format!(
                "usage `{key}` must be a non-negative integer, not {value}"
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::ToolMessage;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    /// System, question, a call of two tools, their results, the answer.
    fn conversation() -> Vec<Message> {
        vec![
            Message::system("You are a weather bot."),
            Message::human("Weather in Paris and Rome?").with_name("ada"),
            Message::Ai(AiMessage {
                tool_calls: vec![
                    ToolCall::new("call_1", "weather", json!({"city": "Paris"})),
                    ToolCall::new("call_2", "weather", json!({"city": "Rome"})),
                ],
                ..AiMessage::default()
            }),
            Message::tool("call_1", "18C, cloudy").with_name("weather"),
            Message::tool("call_2", "25C, sunny"),
            Message::ai("Paris is 18C and cloudy; Rome is 25C and sunny."),
        ]
    }

    #[test]
    fn conversation_to_openai_matches_chat_completions_shape() -> TestResult {
        let expected = vec![
            json!({"role": "system", "content": "You are a weather bot."}),
            json!({"role": "user", "content": "Weather in Paris and Rome?", "name": "ada"}),
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}},
                ],
            }),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"}),
            json!({"role": "tool", "tool_call_id": "call_2", "content": "25C, sunny"}),
            json!({
                "role": "assistant",
                "content": "Paris is 18C and cloudy; Rome is 25C and sunny.",
            }),
        ];
        assert_eq!(to_openai(&conversation())?, expected);
        Ok(())
    }

    #[test]
    fn conversation_to_anthropic_hoists_system_and_merges_tool_results() -> TestResult {
        let expected = AnthropicRequest {
            system: Some("You are a weather bot.".into()),
            messages: vec![
                json!({"role": "user", "content": "Weather in Paris and Rome?"}),
                json!({"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_1", "name": "weather",
                     "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "call_2", "name": "weather",
                     "input": {"city": "Rome"}},
                ]}),
                json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "18C, cloudy"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "25C, sunny"},
                ]}),
                json!({"role": "assistant",
                       "content": "Paris is 18C and cloudy; Rome is 25C and sunny."}),
            ],
        };
        assert_eq!(to_anthropic(&conversation())?, expected);
        Ok(())
    }

    #[test]
    fn anthropic_request_serializes_without_empty_system() -> TestResult {
        let request = to_anthropic(&[Message::human("hi")])?;
        assert_eq!(
            serde_json::to_value(&request)?,
            json!({"messages": [{"role": "user", "content": "hi"}]})
        );
        Ok(())
    }

    #[test]
    fn assistant_text_beside_tool_calls_is_kept() -> TestResult {
        let ai = Message::Ai(AiMessage {
            content: "Let me look.".into(),
            tool_calls: vec![ToolCall::new("c", "search", json!({"q": "x"}))],
            ..AiMessage::default()
        });
        let openai = to_openai(std::slice::from_ref(&ai))?;
        assert_eq!(openai[0]["content"], json!("Let me look."));
        let anthropic = to_anthropic(&[Message::human("q"), ai])?;
        assert_eq!(
            anthropic.messages[1]["content"],
            json!([
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "c", "name": "search", "input": {"q": "x"}},
            ])
        );
        Ok(())
    }

    #[test]
    fn tool_message_stays_a_tool_result() -> TestResult {
        let tool = Message::Tool(ToolMessage {
            content: Content::Blocks(vec![json!({"type": "text", "text": "42"})]),
            name: Some("calc".into()),
            tool_call_id: "call_9".into(),
            artifact: Some(json!({"raw": 42})),
            ..ToolMessage::default()
        });
        let openai = to_openai(std::slice::from_ref(&tool))?;
        assert_eq!(
            openai,
            vec![json!({"role": "tool", "tool_call_id": "call_9", "content": "42"})]
        );
        let anthropic = to_anthropic(&[tool])?;
        assert_eq!(
            anthropic.messages,
            vec![json!({"role": "user", "content": [{
                "type": "tool_result",
                "tool_use_id": "call_9",
                "content": [{"type": "text", "text": "42"}],
            }]})]
        );
        Ok(())
    }

    #[test]
    fn human_after_tool_results_joins_the_same_user_turn() -> TestResult {
        let request = to_anthropic(&[
            Message::tool("call_1", "done"),
            Message::human("thanks"),
            Message::human(""),
        ])?;
        assert_eq!(
            request.messages,
            vec![json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "done"},
                {"type": "text", "text": "thanks"},
            ]})]
        );
        Ok(())
    }

    #[test]
    fn system_messages_join_and_a_late_one_is_hoisted() -> TestResult {
        let joined = to_anthropic(&[
            Message::system("Be brief."),
            Message::system("Be kind."),
            Message::human("hi"),
        ])?;
        assert_eq!(joined.system.as_deref(), Some("Be brief.\n\nBe kind."));
        let hoisted = to_anthropic(&[Message::human("hi"), Message::system("Be brief.")])?;
        assert_eq!(hoisted.system.as_deref(), Some("Be brief."));
        assert_eq!(
            hoisted.messages,
            vec![json!({"role": "user", "content": "hi"})]
        );
        Ok(())
    }

    #[test]
    fn separate_system_messages_are_an_error() {
        let err = to_anthropic(&[
            Message::system("Be brief."),
            Message::human("hi"),
            Message::system("Be kind."),
        ]);
        assert!(matches!(
            err,
            Err(ConvertError::Unsupported { index: 2, .. })
        ));
    }

    #[test]
    fn remove_message_is_an_error() {
        let messages = [Message::human("hi"), Message::remove("m1")];
        assert!(matches!(
            to_openai(&messages),
            Err(ConvertError::RemoveMessage { index: 1, ref id }) if id == "m1"
        ));
        assert!(matches!(
            to_anthropic(&messages),
            Err(ConvertError::RemoveMessage { index: 1, .. })
        ));
    }

    #[test]
    fn tool_call_without_id_is_an_error() {
        let ai = Message::Ai(AiMessage {
            tool_calls: vec![ToolCall {
                id: None,
                name: "search".into(),
                args: json!({}),
                ..ToolCall::default()
            }],
            ..AiMessage::default()
        });
        let messages = [Message::human("q"), ai];
        assert!(matches!(
            to_openai(&messages),
            Err(ConvertError::Unsupported { index: 1, .. })
        ));
        assert!(matches!(
            to_anthropic(&messages),
            Err(ConvertError::Unsupported { index: 1, .. })
        ));
    }

    #[test]
    fn user_blocks_keep_openai_shape_and_become_anthropic_images() -> TestResult {
        let human = Message::human(Content::Blocks(vec![
            json!("What is this?"),
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
            json!({"type": "image_url", "image_url": {"url": "https://x.test/cat.png"}}),
        ]));
        let openai = to_openai(std::slice::from_ref(&human))?;
        assert_eq!(
            openai[0]["content"],
            json!([
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "https://x.test/cat.png"}},
            ])
        );
        let anthropic = to_anthropic(&[human])?;
        assert_eq!(
            anthropic.messages[0]["content"],
            json!([
                {"type": "text", "text": "What is this?"},
                {"type": "image", "source":
                    {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.png"}},
            ])
        );
        Ok(())
    }

    fn openai_response() -> Value {
        json!({
            "id": "chatcmpl-123",
            "object": "chat.completion",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"},
                    }],
                },
                "finish_reason": "tool_calls",
            }],
            "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27},
        })
    }

    #[test]
    fn openai_response_becomes_an_ai_message() -> TestResult {
        let message = from_openai_response(&openai_response())?;
        let expected = Message::Ai(AiMessage {
            id: Some("chatcmpl-123".into()),
            tool_calls: vec![ToolCall::new("call_1", "weather", json!({"city": "Paris"}))],
            usage_metadata: Some(UsageMetadata::new(20, 7, 27)),
            ..AiMessage::default()
        });
        assert_eq!(message, expected);
        Ok(())
    }

    #[test]
    fn openai_response_round_trips_to_request_message() -> TestResult {
        let response = openai_response();
        let message = from_openai_response(&response)?;
        let sent = to_openai(&[message])?;
        assert_eq!(sent, vec![response["choices"][0]["message"].clone()]);
        Ok(())
    }

    #[test]
    fn openai_response_errors_are_reported_not_panics() {
        let mut bad_args = openai_response();
        bad_args["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] =
            json!("{\"city\": ");
        assert!(matches!(
            from_openai_response(&bad_args),
            Err(ConvertError::InvalidArguments { ref name, .. }) if name == "weather"
        ));
        for response in [
            json!({"id": "x"}),
            json!({"choices": []}),
            json!({"choices": "no"}),
            json!({"choices": [{"index": 0}]}),
            json!({"choices": [{"message": {"role": "user", "content": "hi"}}]}),
            json!({"choices": [{"message": {"content": 3}}]}),
            json!({"choices": [{"message": {"tool_calls": [{"id": "c"}]}}]}),
            json!({"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": -1}}),
            json!([1, 2]),
        ] {
            assert!(
                matches!(
                    from_openai_response(&response),
                    Err(ConvertError::MalformedResponse {
                        provider: "openai",
                        ..
                    })
                ),
                "{response}"
            );
        }
    }

    #[test]
    fn openai_text_response_has_text_and_summed_total() -> TestResult {
        let message = from_openai_response(&json!({
            "choices": [{"message": {"role": "assistant", "content": "Hello"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }))?;
        assert_eq!(message.text(), "Hello");
        assert_eq!(message.id(), None);
        let Message::Ai(ai) = message else {
            panic!("not an AI message: {message:?}");
        };
        assert_eq!(ai.usage_metadata.map(|u| u.total_tokens), Some(5));
        Ok(())
    }

    fn anthropic_response() -> Value {
        json!({
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather",
                 "input": {"city": "Paris"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 30, "output_tokens": 12},
        })
    }

    #[test]
    fn anthropic_response_becomes_an_ai_message() -> TestResult {
        let response = anthropic_response();
        let message = from_anthropic_response(&response)?;
        let expected = Message::Ai(AiMessage {
            content: Content::Blocks(response["content"].as_array().cloned().unwrap_or_default()),
            id: Some("msg_01".into()),
            tool_calls: vec![ToolCall::new(
                "toolu_1",
                "weather",
                json!({"city": "Paris"}),
            )],
            usage_metadata: Some(UsageMetadata::new(30, 12, 42)),
            ..AiMessage::default()
        });
        assert_eq!(message, expected);
        Ok(())
    }

    #[test]
    fn anthropic_response_round_trips_without_duplicate_tool_use() -> TestResult {
        let response = anthropic_response();
        let message = from_anthropic_response(&response)?;
        let request = to_anthropic(&[Message::human("Paris?"), message.clone()])?;
        assert_eq!(
            request.messages[1],
            json!({"role": "assistant", "content": response["content"]})
        );
        // To OpenAI the same message is its text and a function call.
        let openai = to_openai(&[message])?;
        assert_eq!(openai[0]["content"], json!("Let me check."));
        assert_eq!(
            openai[0]["tool_calls"][0]["function"]["arguments"],
            json!("{\"city\":\"Paris\"}")
        );
        Ok(())
    }

    #[test]
    fn anthropic_text_response_is_plain_text_with_cache_tokens_counted() -> TestResult {
        let message = from_anthropic_response(&json!({
            "id": "msg_02",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": " there"}],
            "usage": {"input_tokens": 5, "output_tokens": 2,
                      "cache_read_input_tokens": 100, "cache_creation_input_tokens": null},
        }))?;
        let Message::Ai(ai) = message else {
            panic!("not an AI message: {message:?}");
        };
        assert_eq!(ai.content, Content::Text("Hello there".into()));
        assert_eq!(ai.usage_metadata, Some(UsageMetadata::new(105, 2, 107)));
        Ok(())
    }

    #[test]
    fn anthropic_response_errors_are_reported_not_panics() {
        for response in [
            json!({"id": "msg"}),
            json!({"content": "text"}),
            json!({"type": "error", "error": {"type": "overloaded_error"}}),
            json!({"content": [{"type": "tool_use", "id": "t", "input": {}}]}),
            json!({"content": [{"text": "no type"}]}),
            json!({"content": [{"type": "text"}]}),
            json!({"content": [], "usage": {"input_tokens": "many"}}),
            json!("just text"),
        ] {
            assert!(
                matches!(
                    from_anthropic_response(&response),
                    Err(ConvertError::MalformedResponse {
                        provider: "anthropic",
                        ..
                    })
                ),
                "{response}"
            );
        }
    }
}
