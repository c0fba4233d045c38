//! Stored values to JSON, for any writer: Waypoint's serializers and LangGraph's.
//!
//! LangGraph writes `null`, `bytes`, `bytearray`, `json` and `msgpack` (and `pickle` when
//! its pickle fallback is on). Its MessagePack holds Python objects as extension types
//! whose payload is `(module, class, arguments[, method])`. The inspector reads the two
//! LangGraph's own bookkeeping needs, `Interrupt` and `Send`, as plain JSON and reports
//! every other Python object as undecodable: turning an arbitrary class into JSON would
//! show something that is not what Python would load.

use serde_json::{Map, Number, Value, json};
use waypoint_checkpoint::serde::{TAG_BYTES, TAG_JSON, TAG_MSGPACK, TAG_NULL};
use waypoint_checkpoint::{Serde, SerializedValue};
use waypoint_runtime::Message;

/// LangGraph's tag for a `bytearray`, stored as its bytes.
const TAG_BYTEARRAY: &str = "bytearray";
/// Deepest nesting decoded; deeper input is reported, not followed (no stack overflow).
const MAX_DEPTH: usize = 128;

/// A stored value as the inspector shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Decoded {
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
    pub(crate) fn of(value: &SerializedValue) -> Decoded {
        let tag = value.type_tag.as_ref();
        let bytes = value.bytes.as_ref();
        let result = match tag {
            TAG_NULL => Ok(Value::Null),
            TAG_BYTES | TAG_BYTEARRAY => Ok(bytes_json(bytes)),
            TAG_JSON => serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}")),
            TAG_MSGPACK => msgpack(bytes).map(|v| runtime_messages(value, v)),
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
    pub(crate) fn value(&self) -> Option<&Value> {
        match self {
            Decoded::Value(value) => Some(value),
            Decoded::Undecodable { .. } => None,
        }
    }

    /// The JSON form: the value, or `{"undecodable": REASON, "type": TAG, "bytes": N}`.
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Decoded::Value(value) => value.clone(),
            Decoded::Undecodable { reason, tag, bytes } => {
                json!({"undecodable": reason, "type": tag, "bytes": bytes})
            }
        }
    }

    /// The one-line form for tables: compact JSON, or `<cannot decode: ...>`.
    pub(crate) fn display(&self) -> String {
        match self {
            Decoded::Value(value) => value.to_string(),
            Decoded::Undecodable { reason, tag, bytes } => {
                format!("<cannot decode: {reason} (type {tag}, {bytes} bytes)>")
            }
        }
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

/// Raw bytes as JSON: an array of byte values (lossless, and what MessagePack `bin` gives).
fn bytes_json(bytes: &[u8]) -> Value {
    Value::Array(bytes.iter().map(|b| Value::from(*b)).collect())
}

/// Decodes one MessagePack document to JSON.
pub(crate) fn msgpack(bytes: &[u8]) -> Result<Value, String> {
    let mut reader = Reader { bytes, at: 0 };
    let value = reader.value(0)?;
    if reader.at != bytes.len() {
        return Err(format!(
            "corrupt msgpack: {} trailing bytes",
            bytes.len() - reader.at
        ));
    }
    Ok(value)
}

/// A cursor over MessagePack bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len());
        let Some(end) = end else {
            return Err("corrupt msgpack: truncated".to_owned());
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    }

    fn int(&mut self, n: usize) -> Result<i64, String> {
        let raw = self.uint(n)?;
        let shift = 64 - 8 * n as u32;
        Ok(((raw << shift) as i64) >> shift)
    }

    fn len(&mut self, n: usize) -> Result<usize, String> {
        usize::try_from(self.uint(n)?).map_err(|_| "corrupt msgpack: length".to_owned())
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        let marker = self.take(1)?[0];
        Ok(match marker {
            0x00..=0x7f => Value::from(marker),
            0x80..=0x8f => self.map(usize::from(marker & 0x0f), depth)?,
            0x90..=0x9f => self.array(usize::from(marker & 0x0f), depth)?,
            0xa0..=0xbf => self.str(usize::from(marker & 0x1f))?,
            0xc0 => Value::Null,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 => {
                let n = self.len(1)?;
                bytes_json(self.take(n)?)
            }
            0xc5 => {
                let n = self.len(2)?;
                bytes_json(self.take(n)?)
            }
            0xc6 => {
                let n = self.len(4)?;
                bytes_json(self.take(n)?)
            }
            0xc7 => {
                let n = self.len(1)?;
                self.ext(n, depth)?
            }
            0xc8 => {
                let n = self.len(2)?;
                self.ext(n, depth)?
            }
            0xc9 => {
                let n = self.len(4)?;
                self.ext(n, depth)?
            }
            0xca => {
                let bits = self.uint(4)? as u32;
                float(f64::from(f32::from_bits(bits)))
            }
            0xcb => float(f64::from_bits(self.uint(8)?)),
            0xcc => Value::from(self.uint(1)?),
            0xcd => Value::from(self.uint(2)?),
            0xce => Value::from(self.uint(4)?),
            0xcf => Value::from(self.uint(8)?),
            0xd0 => Value::from(self.int(1)?),
            0xd1 => Value::from(self.int(2)?),
            0xd2 => Value::from(self.int(4)?),
            0xd3 => Value::from(self.int(8)?),
            0xd4 => self.ext(1, depth)?,
            0xd5 => self.ext(2, depth)?,
            0xd6 => self.ext(4, depth)?,
            0xd7 => self.ext(8, depth)?,
            0xd8 => self.ext(16, depth)?,
            0xd9 => {
                let n = self.len(1)?;
                self.str(n)?
            }
            0xda => {
                let n = self.len(2)?;
                self.str(n)?
            }
            0xdb => {
                let n = self.len(4)?;
                self.str(n)?
            }
            0xdc => {
                let n = self.len(2)?;
                self.array(n, depth)?
            }
            0xdd => {
                let n = self.len(4)?;
                self.array(n, depth)?
            }
            0xde => {
                let n = self.len(2)?;
                self.map(n, depth)?
            }
            0xdf => {
                let n = self.len(4)?;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::from(i64::from(marker as i8)),
            0xc1 => return Err("corrupt msgpack: reserved marker 0xc1".to_owned()),
        })
    }

    fn str(&mut self, n: usize) -> Result<Value, String> {
        let raw = self.take(n)?;
        std::str::from_utf8(raw)
            .map(|s| Value::String(s.to_owned()))
            .map_err(|_| "corrupt msgpack: string is not UTF-8".to_owned())
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, String> {
        // Each element takes at least one byte: a hostile length cannot reserve memory.
        let mut out = Vec::with_capacity(n.min(self.bytes.len() - self.at));
        for _ in 0..n {
            out.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(out))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, String> {
        let mut out = Map::new();
        for _ in 0..n {
            // LangGraph writes non-string keys too (OPT_NON_STR_KEYS); JSON keys are text.
            let key = match self.value(depth + 1)? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            out.insert(key, self.value(depth + 1)?);
        }
        Ok(Value::Object(out))
    }

    /// An extension value: LangGraph's Python objects, read only for its own types.
    fn ext(&mut self, n: usize, depth: usize) -> Result<Value, String> {
        let code = self.int(1)?;
        let payload = self.take(n)?;
        let mut inner = Reader {
            bytes: payload,
            at: 0,
        };
        // LangGraph's delta-channel snapshot wraps the channel value itself.
        if code == 7 {
            return inner.value(depth + 1);
        }
        let described = (0..=5)
            .contains(&code)
            .then(|| inner.value(depth + 1).ok())
            .flatten();
        let Some(Value::Array(parts)) = described else {
            return Err(format!("msgpack extension type {code}"));
        };
        let module = parts.first().and_then(Value::as_str).unwrap_or("?");
        let class = parts.get(1).and_then(Value::as_str).unwrap_or("?");
        match (module, class, parts.get(2)) {
            ("langgraph.types", "Interrupt", Some(Value::Object(fields))) => {
                Ok(Value::Object(fields.clone()))
            }
            ("langgraph.types", "Send", Some(Value::Array(args))) if args.len() >= 2 => {
                Ok(json!({"node": args[0], "arg": args[1]}))
            }
            _ => Err(format!(
                "Python object {module}.{class} (msgpack extension type {code})"
            )),
        }
    }
}

/// A float as JSON; JSON has no NaN or infinity, so those become their names.
fn float(f: f64) -> Value {
    Number::from_f64(f).map_or_else(|| Value::String(f.to_string()), Value::Number)
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

    #[test]
    fn python_objects_and_garbage_are_reported() {
        // ext 5 (pydantic v2) with payload ["m", "C", {}, "v"].
        let payload = [0x94, 0xa1, b'm', 0xa1, b'C', 0x80, 0xa1, b'v'];
        let mut bytes = vec![0xc7, payload.len() as u8, 5];
        bytes.extend_from_slice(&payload);
        let decoded = Decoded::of(&SerializedValue::new("msgpack", bytes));
        assert_eq!(
            decoded.display(),
            "<cannot decode: Python object m.C (msgpack extension type 5) (type msgpack, 11 bytes)>"
        );
        for (tag, bytes) in [
            ("msgpack", vec![0xdc, 0xff]),
            ("pickle", vec![1]),
            ("x", vec![]),
        ] {
            let decoded = Decoded::of(&SerializedValue::new(tag, bytes));
            assert!(decoded.value().is_none(), "{tag}");
            assert_eq!(decoded.to_json()["type"], tag);
        }
        let messages = vec![Message::human("hi")];
        let stored = Serde::default().dumps(&messages).unwrap();
        let shown = Decoded::of(&stored).to_json();
        assert_eq!(shown, serde_json::to_value(&messages).unwrap());
        assert!(shown[0].is_object(), "{shown}");
        let deep = vec![0x91; 1000];
        assert!(msgpack(&deep).is_err());
    }
}
