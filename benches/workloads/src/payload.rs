//! The serialization workload: a seeded chat conversation (LangChain-shaped messages plus
//! an optional nested map) in three sizes, also the value every checkpoint channel holds.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::SEED;

/// A payload size of the serialization benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PayloadSize {
    /// Name used in benchmark ids (`small`, `medium`, `large`).
    pub name: &'static str,
    /// Number of chat messages.
    pub messages: usize,
    /// Characters of content per message.
    pub content_chars: usize,
    /// Entries of the nested `data` map (ints, floats and strings in turn).
    pub data_entries: usize,
}

/// 10 messages of 200 characters (~3 KB).
pub const SMALL: PayloadSize = PayloadSize {
    name: "small",
    messages: 10,
    content_chars: 200,
    data_entries: 0,
};
/// 200 messages of 200 characters plus a 1,000-entry map (~70 KB).
pub const MEDIUM: PayloadSize = PayloadSize {
    name: "medium",
    messages: 200,
    content_chars: 200,
    data_entries: 1000,
};
/// 2,000 messages of 460 characters (~1 MB).
pub const LARGE: PayloadSize = PayloadSize {
    name: "large",
    messages: 2000,
    content_chars: 460,
    data_entries: 0,
};
/// Every payload size, smallest first.
pub const SIZES: [PayloadSize; 3] = [SMALL, MEDIUM, LARGE];

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageKind {
    /// The user.
    Human,
    /// The model.
    Ai,
}

/// A chat message shaped like LangChain's (`model_dump()` fields): the "message object".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `human` or `ai`.
    #[serde(rename = "type")]
    pub kind: MessageKind,
    /// The text.
    pub content: String,
    /// A uuid.
    pub id: String,
    /// Optional author name.
    pub name: Option<String>,
    /// Provider extras (empty here).
    pub additional_kwargs: BTreeMap<String, String>,
    /// Response metadata (empty here).
    pub response_metadata: BTreeMap<String, String>,
}

/// The same message as a plain `{type, content, id}` record: the "plain dict".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlainMessage {
    /// `human` or `ai`.
    #[serde(rename = "type")]
    pub kind: MessageKind,
    /// The text.
    pub content: String,
    /// A uuid.
    pub id: String,
}

/// A scalar of the nested map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Scalar {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A short string.
    Str(String),
}

/// A conversation state: messages plus an optional nested map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Conversation<M> {
    /// The messages, alternating human and ai.
    pub messages: Vec<M>,
    /// The nested map of the medium payload.
    pub data: Option<BTreeMap<String, Scalar>>,
}

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";

fn text(rng: &mut StdRng, n: usize) -> String {
    (0..n)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn uuid4(rng: &mut StdRng) -> String {
    let v: u128 = rng.random();
    let v = (v & !(0xF000u128 << 64) | (4u128 << 76)) & !(0xC000u128 << 48) | (0x8000u128 << 48);
    let h = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The seeded conversation of `size`, with LangChain-shaped messages.
pub fn conversation(size: PayloadSize) -> Conversation<ChatMessage> {
    let mut rng = StdRng::seed_from_u64(SEED);
    let messages = (0..size.messages)
        .map(|i| ChatMessage {
            kind: if i % 2 == 0 {
                MessageKind::Human
            } else {
                MessageKind::Ai
            },
            content: text(&mut rng, size.content_chars),
            id: uuid4(&mut rng),
            name: None,
            additional_kwargs: BTreeMap::new(),
            response_metadata: BTreeMap::new(),
        })
        .collect();
    let data = (size.data_entries > 0).then(|| {
        (0..size.data_entries)
            .map(|i| {
                let v = match i % 3 {
                    0 => Scalar::Int(rng.random_range(-1_000_000_000..=1_000_000_000)),
                    1 => Scalar::Float(rng.random::<f64>() * 1e6),
                    _ => Scalar::Str(text(&mut rng, 16)),
                };
                (format!("k{i}"), v)
            })
            .collect()
    });
    Conversation { messages, data }
}

/// The same conversation as the runtime's [`waypoint_runtime::Message`] values (the state
/// `MessagesState` holds), with its nested map left out.
pub fn runtime_conversation(size: PayloadSize) -> Vec<waypoint_runtime::Message> {
    conversation(size)
        .messages
        .into_iter()
        .map(|m| {
            let message = match m.kind {
                MessageKind::Human => waypoint_runtime::Message::human(m.content),
                MessageKind::Ai => waypoint_runtime::Message::ai(m.content),
            };
            message.with_id(m.id)
        })
        .collect()
}

/// The same conversation with plain `{type, content, id}` messages.
pub fn plain_conversation(size: PayloadSize) -> Conversation<PlainMessage> {
    let c = conversation(size);
    Conversation {
        messages: c
            .messages
            .into_iter()
            .map(|m| PlainMessage {
                kind: m.kind,
                content: m.content,
                id: m.id,
            })
            .collect(),
        data: c.data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_seeded_and_sized() {
        assert_eq!(conversation(SMALL), conversation(SMALL));
        let large = conversation(LARGE);
        assert_eq!(large.messages.len(), 2000);
        assert!(
            large
                .messages
                .iter()
                .all(|m| m.content.len() == 460 && m.id.len() == 36)
        );
        assert_eq!(conversation(MEDIUM).data.map(|d| d.len()), Some(1000));
    }
}
