//! Stored values to JSON, for any writer: Waypoint's serializers and LangGraph's.
//!
//! LangGraph writes `null`, `bytes`, `bytearray`, `json` and `msgpack` (and `pickle` when
//! its pickle fallback is on). `msgpack` is read by the checkpoint crate's codec, which
//! shows a Python object as its `lc: 2` constructor map (class, arguments); LangChain
//! messages among them are shown as messages, in LangChain's dict form. What cannot be read
//! (a pickle, an encrypted value, postcard or bincode without its Rust type, malformed
//! bytes) is reported with the reason.

use serde_json::{Map, Value, json};
use waypoint_checkpoint::serde::{TAG_BYTES, TAG_JSON, TAG_MSGPACK, TAG_NULL};
use waypoint_checkpoint::{Error, Serde, SerializedValue};

use crate::Message;

/// LangGraph's tag for a `bytearray`, stored as its bytes.
const TAG_BYTEARRAY: &str = "bytearray";

/// A stored value as the inspector shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    /// The value, as JSON.
    Value(Value),
    /// Why it could not be read, with its type tag and size.
    Undecodable {
        /// What went wrong.
        reason: String,
        /// The stored type tag.
        tag: String,
        /// The stored size in bytes.
        bytes: usize,
    },
}

impl Decoded {
    /// Reads a stored value by its type tag; never fails.
    pub fn of(value: &SerializedValue) -> Decoded {
        let tag = value.type_tag.as_ref();
        let bytes = value.bytes.as_ref();
        let result = match tag {
            TAG_NULL => Ok(Value::Null),
            TAG_BYTES | TAG_BYTEARRAY => Ok(bytes_json(bytes)),
            TAG_JSON => serde_json::from_slice(bytes)
                .map(python_messages)
                .map_err(|e| format!("invalid JSON: {e}")),
            TAG_MSGPACK => msgpack(value).map(|v| runtime_messages(value, python_messages(v))),
            "pickle" => Err("a Python pickle (only Python can read it)".to_owned()),
            _ if tag.contains('+') => Err("encrypted, and no key opened it".to_owned()),
            "postcard" | "bincode" => Err(format!(
                "{tag} is not self-describing (needs the Rust type)"
            )),
            _ => Err("unknown serializer type tag".to_owned()),
        };
        match result {
            Ok(value) => Decoded::Value(value),
            Err(reason) => Decoded::Undecodable {
                reason,
                tag: tag.to_owned(),
                bytes: bytes.len(),
            },
        }
    }

    /// The value, or `None` when undecodable.
    pub fn value(&self) -> Option<&Value> {
        match self {
            Decoded::Value(value) => Some(value),
            Decoded::Undecodable { .. } => None,
        }
    }

    /// The JSON form: the value, or `{"undecodable": REASON, "type": TAG, "bytes": N}`.
    pub fn to_json(&self) -> Value {
        match self {
            Decoded::Value(value) => value.clone(),
            Decoded::Undecodable { reason, tag, bytes } => {
                json!({"undecodable": reason, "type": tag, "bytes": bytes})
            }
        }
    }

    /// The one-line form for tables: compact JSON, or `<cannot decode: ...>`.
    pub fn display(&self) -> String {
        match self {
            Decoded::Value(value) => value.to_string(),
            Decoded::Undecodable { reason, tag, bytes } => {
                format!("<cannot decode: {reason} (type {tag}, {bytes} bytes)>")
            }
        }
    }
}

/// A value the runtime wrote, JSON or MessagePack, as JSON (the runtime's compact messages in
/// their dict form, as [`Decoded::of`] shows them, Python objects as they are); `None` for
/// any other or bytes that do not decode. Metadata rebuilt from stored values reads them so
/// (see [`super::writes`]): what it gives for given bytes must never change.
pub(crate) fn runtime_json(value: &SerializedValue) -> Option<Value> {
    let bytes = value.bytes.as_ref();
    match value.type_tag.as_ref() {
        TAG_NULL => Some(Value::Null),
        TAG_JSON => serde_json::from_slice(bytes).ok(),
        TAG_MSGPACK => waypoint_checkpoint::Format::MsgPack
            .decode(bytes)
            .ok()
            .map(|decoded| runtime_messages(value, decoded)),
        _ => None,
    }
}

/// The runtime stores chat messages in a compact array form; a value shaped like a list of
/// them (each an array starting with a kind from 0 to 4) that the runtime's own `Message`
/// decodes is shown in LangChain's dict form instead. Anything else stays as it is.
fn runtime_messages(stored: &SerializedValue, value: Value) -> Value {
    let looks_like_messages = value.as_array().is_some_and(|items| {
        !items.is_empty()
            && items.iter().all(|m| {
                m.get(0)
                    .and_then(Value::as_u64)
                    .is_some_and(|kind| kind <= 4)
            })
    });
    if !looks_like_messages {
        return value;
    }
    Serde::default()
        .loads::<Vec<Message>>(stored)
        .ok()
        .and_then(|messages| serde_json::to_value(messages).ok())
        .unwrap_or(value)
}

/// Raw bytes as JSON: an array of byte values (lossless).
fn bytes_json(bytes: &[u8]) -> Value {
    Value::Array(bytes.iter().map(|b| Value::from(*b)).collect())
}

/// Decodes one MessagePack document (Waypoint's or LangGraph's) to JSON with the checkpoint
/// crate's codec; a failure is its message.
fn msgpack(stored: &SerializedValue) -> Result<Value, String> {
    Serde::new(waypoint_checkpoint::Format::LangGraph)
        .loads::<Value>(stored)
        .map_err(|e| match e {
            Error::Serialization {
                path: Some(path),
                message,
                ..
            } => format!("at `{}`: {message}", short_path(&path)),
            Error::Serialization { message, .. } => message,
            other => other.to_string(),
        })
}

/// A field path short enough for a table cell: a long one keeps its start and end.
fn short_path(path: &str) -> String {
    const KEEP: usize = 24;
    let chars: Vec<char> = path.chars().collect();
    if chars.len() <= 2 * KEEP + 3 {
        return path.to_owned();
    }
    let head: String = chars[..KEEP].iter().collect();
    let tail: String = chars[chars.len() - KEEP..].iter().collect();
    format!("{head}...{tail}")
}

/// Shows LangChain messages anywhere in `value` as messages: an `lc: 2` object of a class
/// in `langchain_core.messages` becomes LangChain's dict form. Other objects keep their
/// `lc: 2` form, which names their class.
fn python_messages(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(python_messages).collect()),
        Value::Object(map) => {
            let map: Map<String, Value> = map
                .into_iter()
                .map(|(key, item)| (key, python_messages(item)))
                .collect();
            if !is_langchain_message(&map) {
                return Value::Object(map);
            }
            let object = Value::Object(map);
            match serde_json::from_value::<Message>(object.clone()) {
                Ok(message) => serde_json::to_value(message).unwrap_or(object),
                Err(_) => object,
            }
        }
        other => other,
    }
}

/// Whether `map` is the `lc: 2` form of an object whose module is in
/// `langchain_core.messages`.
fn is_langchain_message(map: &Map<String, Value>) -> bool {
    let module = match map.get("id") {
        Some(Value::Array(id)) if id.len() >= 2 => &id[..id.len() - 1],
        _ => return false,
    };
    map.get("lc").and_then(Value::as_u64) == Some(2)
        && map.get("type").and_then(Value::as_str) == Some("constructor")
        && module.first().and_then(Value::as_str) == Some("langchain_core")
        && module.get(1).and_then(Value::as_str) == Some("messages")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waypoint_values_round_trip() {
        let value = json!({"a": [1, -2, 300, -70000, 1.5, null, true], "b": {"c": "d"}});
        let stored = Serde::default().dumps(&value).unwrap();
        assert_eq!(Decoded::of(&stored), Decoded::Value(value.clone()));
        let stored = Serde::new(waypoint_checkpoint::Format::Json)
            .dumps(&value)
            .unwrap();
        assert_eq!(Decoded::of(&stored), Decoded::Value(value));
        let big = json!([u64::MAX, i64::MIN, "x".repeat(300)]);
        let stored = Serde::default().dumps(&big).unwrap();
        assert_eq!(Decoded::of(&stored), Decoded::Value(big));
    }

    /// `HumanMessage(content="hi", id="1")` as LangGraph writes it (reference 6.3).
    const HUMAN: &str = "c7880594bd6c616e67636861696e5f636f72652e6d657373616765732e68756d616e\
        ac48756d616e4d65737361676586a7636f6e74656e74a26869b16164646974696f6e616c5f6b7761726773\
        80b1726573706f6e73655f6d6574616461746180a474797065a568756d616ea46e616d65c0a26964a131b3\
        6d6f64656c5f76616c69646174655f6a736f6e";

    /// `[AIMessage(content="", id="a1", tool_calls=[{"name": "search", "args": {"q":
    /// "cats"}, "id": "call_1"}]), ToolMessage(content="3 cats", tool_call_id="call_1",
    /// id="t1")]` as langgraph-checkpoint 4.3.2 with langchain-core 1.7.2 writes it.
    const AI_AND_TOOL: &str = "92c7e10594ba6c616e67636861696e5f636f72652e6d657373616765732e6169\
        a941494d65737361676589a7636f6e74656e74a0b16164646974696f6e616c5f6b776172677380b1726573\
        706f6e73655f6d6574616461746180a474797065a26169a46e616d65c0a26964a26131aa746f6f6c5f6361\
        6c6c739184a46e616d65a6736561726368a46172677381a171a463617473a26964a663616c6c5f31a47479\
        7065a9746f6f6c5f63616c6cb2696e76616c69645f746f6f6c5f63616c6c7390ae75736167655f6d657461\
        64617461c0b36d6f64656c5f76616c69646174655f6a736f6ec7b70594bc6c616e67636861696e5f636f72\
        652e6d657373616765732e746f6f6cab546f6f6c4d65737361676589a7636f6e74656e74a6332063617473\
        b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065\
        a4746f6f6ca46e616d65c0a26964a27431ac746f6f6c5f63616c6c5f6964a663616c6c5f31a86172746966\
        616374c0a6737461747573a773756363657373b36d6f64656c5f76616c69646174655f6a736f6e";

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    fn msgpack_of(bytes: Vec<u8>) -> Decoded {
        Decoded::of(&SerializedValue::new("msgpack", bytes))
    }

    /// An ext-5 object `m.C` with `payload` after the class (kwargs, method).
    fn pydantic_v2(tail: &[u8]) -> Vec<u8> {
        let mut payload = vec![0x94, 0xa1, b'm', 0xa1, b'C'];
        payload.extend_from_slice(tail);
        let mut bytes = vec![0xc7, payload.len() as u8, 5];
        bytes.extend_from_slice(&payload);
        bytes
    }

    #[test]
    fn python_messages_are_shown_as_messages() {
        let Decoded::Value(human) = msgpack_of(hex(HUMAN)) else {
            panic!("a HumanMessage decodes");
        };
        assert_eq!(human, json!({"type": "human", "content": "hi", "id": "1"}));

        let Decoded::Value(shown) = msgpack_of(hex(AI_AND_TOOL)) else {
            panic!("an AIMessage and a ToolMessage decode");
        };
        let [ai, tool] = shown.as_array().expect("a list").as_slice() else {
            panic!("two messages: {shown}");
        };
        assert_eq!(ai["type"], "ai", "{ai}");
        assert_eq!(ai["id"], "a1");
        assert_eq!(ai["content"], "");
        assert_eq!(ai["tool_calls"][0]["name"], "search", "{ai}");
        assert_eq!(ai["tool_calls"][0]["args"], json!({"q": "cats"}));
        assert_eq!(ai["tool_calls"][0]["id"], "call_1");
        assert_eq!(tool["type"], "tool", "{tool}");
        assert_eq!(tool["content"], "3 cats");
        assert_eq!(tool["tool_call_id"], "call_1");
        assert_eq!(tool["id"], "t1");

        // Nested anywhere: a message inside a map inside a list.
        let mut nested = vec![0x91, 0x81, 0xa1, b'm'];
        nested.extend(hex(HUMAN));
        let Decoded::Value(nested) = msgpack_of(nested) else {
            panic!("a nested message decodes");
        };
        assert_eq!(nested[0]["m"]["type"], "human", "{nested}");
        // The same object in LangGraph's JSON form.
        let lc2 = Message::human("hey").with_id("2").to_langgraph();
        let stored = SerializedValue::new("json", serde_json::to_vec(&json!({"x": lc2})).unwrap());
        let Decoded::Value(from_json) = Decoded::of(&stored) else {
            panic!("JSON decodes");
        };
        assert_eq!(
            from_json["x"],
            json!({"type": "human", "content": "hey", "id": "2"})
        );
    }

    #[test]
    fn other_python_objects_keep_their_class() {
        // ext 5 (pydantic v2): `m.C(x=1)`.
        let tail = [
            0x81, 0xa1, b'x', 0x01, 0xb3, b'm', b'o', b'd', b'e', b'l', b'_', b'v', b'a', b'l',
            b'i', b'd', b'a', b't', b'e', b'_', b'j', b's', b'o', b'n',
        ];
        assert_eq!(
            msgpack_of(pydantic_v2(&tail)),
            Decoded::Value(json!({
                "lc": 2, "type": "constructor", "id": ["m", "C"], "ext": 5,
                "method": "model_validate_json", "args": [], "kwargs": {"x": 1},
            }))
        );
        // A `_DeltaSnapshot([1])` is its value.
        assert_eq!(
            msgpack_of(vec![0xd5, 7, 0x91, 0x01]),
            Decoded::Value(json!([1]))
        );
        // A class outside `langchain_core.messages` is not read as a message, even if named
        // like one.
        let mut lookalike: Value = Message::human("x").to_langgraph();
        lookalike["id"] = json!(["mine", "HumanMessage"]);
        let stored = SerializedValue::new("json", serde_json::to_vec(&lookalike).unwrap());
        assert_eq!(Decoded::of(&stored), Decoded::Value(lookalike));
    }

    #[test]
    fn what_cannot_be_read_is_reported_with_the_reason() {
        // A method LangGraph never allows, named with its class by the codec.
        let decoded = msgpack_of(pydantic_v2(&[0x80, 0xa1, b'v']));
        assert!(
            decoded.display().starts_with("<cannot decode: ")
                && decoded.display().contains("m.C")
                && decoded.display().ends_with("(type msgpack, 11 bytes)>"),
            "{}",
            decoded.display()
        );
        // An extension code LangGraph does not define.
        let decoded = msgpack_of(vec![0xd4, 9, 0xc0]);
        assert!(
            decoded.display().contains("extension type 9"),
            "{decoded:?}"
        );
        for (tag, bytes, needle) in [
            ("msgpack", vec![0xdc, 0xff], "end of input"),
            ("msgpack", vec![0x91; 1000], "deeper than 128"),
            ("pickle", vec![1], "pickle"),
            ("msgpack+aes", vec![1, 2], "encrypted"),
            ("postcard", vec![1], "not self-describing"),
            ("bincode", vec![1], "not self-describing"),
            ("json", b"{".to_vec(), "invalid JSON"),
            ("x", vec![], "unknown"),
        ] {
            let decoded = Decoded::of(&SerializedValue::new(tag, bytes.clone()));
            assert!(decoded.value().is_none(), "{tag} {bytes:?}");
            let shown = decoded.to_json();
            assert_eq!(shown["type"], tag);
            assert_eq!(shown["bytes"], bytes.len());
            let reason = shown["undecodable"].as_str().unwrap_or_default();
            assert!(
                !reason.is_empty() && reason.contains(needle),
                "{tag}: {reason}"
            );
        }
        // Stored bytes, null and a bytearray need no codec.
        for (tag, bytes, value) in [
            ("bytes", vec![1, 2], json!([1, 2])),
            ("bytearray", vec![3], json!([3])),
            ("null", vec![], Value::Null),
        ] {
            assert_eq!(
                Decoded::of(&SerializedValue::new(tag, bytes)),
                Decoded::Value(value)
            );
        }
    }

    #[test]
    fn runtime_messages_are_shown_as_dicts() {
        let messages = vec![Message::human("hi")];
        let stored = Serde::default().dumps(&messages).unwrap();
        let shown = Decoded::of(&stored).to_json();
        assert_eq!(shown, serde_json::to_value(&messages).unwrap());
        assert!(shown[0].is_object(), "{shown}");
        // In LangGraph's encoding too.
        let stored = Serde::new(waypoint_checkpoint::Format::LangGraph)
            .dumps(&messages)
            .unwrap();
        assert_eq!(Decoded::of(&stored).to_json(), shown);
    }
}
