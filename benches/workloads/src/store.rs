//! The store workload: items shaped like small user memories, as in
//! `benches/peers/langgraph_store.py`, and its read side (a filled, indexed store and its
//! queries).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};
use waypoint_store::{IndexConfig, Op, PutOp, Store, StoreConfig};

/// Items written by the put benchmarks.
pub const PUTS: usize = 2_000;
/// Puts per batch in the batch-put benchmark.
pub const BATCH: usize = 100;
/// Items held by the read benchmarks.
pub const ITEMS: usize = 10_000;
/// Dimensions of the embedder in the semantic-search benchmark.
pub const DIMS: usize = 128;
/// Characters of text per item.
pub const TEXT_CHARS: usize = 200;

const VOCABULARY: [&str; 50] = [
    "agent",
    "memory",
    "graph",
    "node",
    "edge",
    "state",
    "thread",
    "user",
    "tool",
    "model",
    "prompt",
    "answer",
    "question",
    "plan",
    "step",
    "task",
    "note",
    "fact",
    "preference",
    "travel",
    "food",
    "music",
    "book",
    "city",
    "friend",
    "project",
    "deadline",
    "meeting",
    "email",
    "weather",
    "morning",
    "evening",
    "coffee",
    "tea",
    "garden",
    "river",
    "mountain",
    "ocean",
    "train",
    "flight",
    "hotel",
    "budget",
    "invoice",
    "report",
    "draft",
    "review",
    "summary",
    "reminder",
    "birthday",
    "holiday",
];

/// The namespace of item `i`: `("bench", "users", "u{i % 10}")`.
pub fn namespace(i: usize) -> [String; 3] {
    ["bench".into(), "users".into(), format!("u{}", i % 10)]
}

/// The key of item `i`.
pub fn key(i: usize) -> String {
    format!("k{i}")
}

/// `n` item values: `{"text", "kind": "k{i % 10}", "n": i}`, seeded.
pub fn values(n: usize) -> Vec<Map<String, Value>> {
    let mut rng = StdRng::seed_from_u64(crate::SEED);
    (0..n)
        .map(|i| {
            let mut text = String::with_capacity(TEXT_CHARS + 16);
            while text.len() < TEXT_CHARS {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(VOCABULARY[rng.random_range(0..VOCABULARY.len())]);
            }
            text.truncate(TEXT_CHARS);
            match json!({"text": text, "kind": format!("k{}", i % 10), "n": i}) {
                Value::Object(map) => map,
                _ => Map::new(),
            }
        })
        .collect()
}

/// The store config of the read benchmarks: a hashing embedder over `text`.
pub fn indexed() -> StoreConfig {
    StoreConfig::new().index(IndexConfig::hashing(DIMS).fields(["text"]))
}

/// Puts the first `n` workload items into `store`, 500 per batch.
pub async fn fill(store: &dyn Store, n: usize) -> waypoint_store::Result<()> {
    let ops: Vec<Op> = values(n)
        .into_iter()
        .enumerate()
        .map(|(i, v)| Op::Put(PutOp::new(namespace(i), key(i), v)))
        .collect();
    for chunk in ops.chunks(500) {
        store.batch(chunk.to_vec()).await?;
    }
    Ok(())
}

/// `count` semantic queries: the texts of items drawn (seeded) from the first `items`.
pub fn queries(items: usize, count: usize) -> Vec<String> {
    let all = values(items);
    let mut rng = StdRng::seed_from_u64(7);
    (0..count)
        .map(|_| {
            all[rng.random_range(0..items)]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}
