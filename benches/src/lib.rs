//! Workloads shared by Waypoint's benchmarks (and the `waypoint bench` command): seeded,
//! sized as constants, defined once and run against every format or backend.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Seed of every generated workload.
pub const SEED: u64 = 42;

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

/// The checkpoint workload: five channels, one of which changes per step.
pub mod checkpoints {
    use std::collections::BTreeMap;

    use waypoint_checkpoint::{
        ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
        CheckpointSource, Result, Serde, SerializedValue,
    };

    use super::{SMALL, plain_conversation};

    /// The channels of every checkpoint.
    pub const CHANNELS: [&str; 5] = ["messages", "context", "plan", "scratch", "status"];
    /// Sequential puts in the put benchmark.
    pub const PUTS: usize = 2000;
    /// Checkpoints in the history read by `get_tuple` and `list`.
    pub const HISTORY: usize = 1000;
    /// `put_writes` calls in the writes benchmark (2 writes each).
    pub const WRITE_CALLS: usize = 2000;

    /// The value every channel holds: the small conversation, MessagePack-encoded (~2.6 KB).
    pub fn channel_value() -> SerializedValue {
        Serde::default()
            .dumps(&plain_conversation(SMALL))
            .expect("the payload encodes")
    }

    /// `steps` checkpoints ready to put: step 0 writes all channels, step i changes only
    /// `CHANNELS[i % 5]`. Each item is `(checkpoint, metadata, new_versions)`.
    pub fn history(
        steps: usize,
        value: &SerializedValue,
    ) -> Vec<(
        Checkpoint,
        CheckpointMetadata,
        BTreeMap<String, ChannelVersion>,
    )> {
        let mut versions: BTreeMap<String, ChannelVersion> = BTreeMap::new();
        (0..steps)
            .map(|step| {
                let changed: Vec<&str> = if step == 0 {
                    CHANNELS.to_vec()
                } else {
                    vec![CHANNELS[step % 5]]
                };
                let mut new_versions = BTreeMap::new();
                for channel in changed {
                    let next = ChannelVersion::next(versions.get(channel)).expect("versions parse");
                    versions.insert(channel.to_owned(), next.clone());
                    new_versions.insert(channel.to_owned(), next);
                }
                let mut cp = Checkpoint::new(step as i64);
                cp.channel_versions = versions.clone();
                for channel in CHANNELS {
                    cp.channel_values.insert(channel.to_owned(), value.clone());
                }
                (
                    cp,
                    CheckpointMetadata::new(CheckpointSource::Loop, step as i64),
                    new_versions,
                )
            })
            .collect()
    }

    /// Puts a prepared history as one chained thread; returns the checkpoint configs.
    pub async fn put_all(
        saver: &dyn CheckpointSaver,
        thread_id: &str,
        items: Vec<(
            Checkpoint,
            CheckpointMetadata,
            BTreeMap<String, ChannelVersion>,
        )>,
    ) -> Result<Vec<CheckpointConfig>> {
        let mut parent = CheckpointConfig::new(thread_id).with_ns("");
        let mut out = Vec::with_capacity(items.len());
        for (cp, meta, new_versions) in items {
            parent = saver.put(&parent, cp, meta, new_versions).await?;
            out.push(parent.clone());
        }
        Ok(out)
    }
}

/// The store workload: items shaped like small user memories, as in
/// `benches/peers/langgraph_store.py`.
pub mod store {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::{Map, Value, json};

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
}

/// The runtime workload (as `benches/peers/langgraph_runtime.py`): a 10-node linear graph
/// whose nodes each append one small message to `messages`.
pub mod runtime {
    use std::sync::Arc;

    use serde::{Deserialize, Serialize};
    use waypoint_checkpoint::CheckpointSaver;
    use waypoint_runtime::{
        CompileOptions, CompiledGraph, Context, END, NodeResult, START, State, StateGraph,
    };

    /// Nodes in the linear graph.
    pub const NODES: usize = 10;
    /// Invocations per measurement.
    pub const INVOCATIONS: usize = 200;
    /// Super-steps per invocation: the start step plus one per node.
    pub const STEPS_PER_INVOCATION: usize = NODES + 1;
    /// Invocations on the thread read by the history benchmark (12 checkpoints each: 600).
    pub const HISTORY_INVOCATIONS: usize = 50;

    /// One chat message, as the Python peer's plain dicts.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Msg {
        /// `user` or `ai`.
        pub role: String,
        /// The text.
        pub content: String,
    }

    /// The benchmark's state: one appended list of messages.
    #[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
    pub struct Chat {
        /// The conversation.
        #[reducer(append)]
        pub messages: Vec<Msg>,
    }

    /// The input of one invocation: one user message.
    pub fn input() -> ChatUpdate {
        ChatUpdate::default().messages(vec![Msg {
            role: "user".into(),
            content: "hi".into(),
        }])
    }

    /// The 10-node graph on `saver`.
    pub fn graph(saver: Arc<dyn CheckpointSaver>) -> waypoint_runtime::Result<CompiledGraph<Chat>> {
        let mut graph = StateGraph::<Chat>::new();
        let names: Vec<String> = (0..NODES).map(|i| format!("n{i}")).collect();
        for name in &names {
            let content = name.clone();
            // Nodes share the state (`Arc`) rather than copy the growing message list.
            graph.add_node(name.clone(), move |_state: Arc<Chat>, _ctx: Context| {
                let message = Msg {
                    role: "ai".into(),
                    content: content.clone(),
                };
                std::future::ready(NodeResult::Ok(
                    ChatUpdate::default().messages(vec![message]),
                ))
            });
        }
        graph.add_edge(START, names[0].clone());
        for pair in names.windows(2) {
            graph.add_edge(pair[0].clone(), pair[1].clone());
        }
        graph.add_edge(names[NODES - 1].clone(), END);
        graph.compile(CompileOptions::default().checkpointer(saver))
    }
}

/// The servers a benchmark may measure and fresh, isolated handles on them: each saver or
/// store gets its own PostgreSQL schema or Redis key prefix, so runs never see each other.
pub mod servers {
    use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
    use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};
    use waypoint_store::{
        PostgresStore, PostgresStoreConfig, RedisStore, RedisStoreConfig, StoreConfig,
    };

    /// The URL `WAYPOINT_BENCH_<NAME>_URL`, or else `WAYPOINT_TEST_<NAME>_URL`, names
    /// (`name` is `POSTGRES` or `REDIS`); unset and empty mean none.
    pub fn url(name: &str) -> Option<String> {
        ["BENCH", "TEST"].iter().find_map(|kind| {
            std::env::var(format!("WAYPOINT_{kind}_{name}_URL"))
                .ok()
                .filter(|u| !u.is_empty())
        })
    }

    fn fresh(prefix: &str, separator: char) -> String {
        format!("{prefix}{separator}{}", uuid::Uuid::new_v4().simple())
    }

    /// A checkpointer on a fresh schema of the PostgreSQL server at `url`, set up.
    pub async fn postgres_saver(
        url: &str,
        max_connections: u32,
    ) -> waypoint_checkpoint::Result<PostgresSaver> {
        let config = PostgresConfig::new(url)
            .schema(fresh("bench", '_'))
            .max_connections(max_connections);
        let saver = PostgresSaver::connect(config).await?;
        saver.setup().await?;
        Ok(saver)
    }

    /// A checkpointer on a fresh key prefix of the Redis server at `url`.
    pub async fn redis_saver(url: &str) -> waypoint_checkpoint::Result<RedisSaver> {
        RedisSaver::connect(RedisConfig::new(url).prefix(fresh("bench", '-'))).await
    }

    /// A store on a fresh schema of the PostgreSQL server at `url`, set up.
    pub async fn postgres_store(
        url: &str,
        config: StoreConfig,
    ) -> waypoint_store::Result<PostgresStore> {
        let config = PostgresStoreConfig::new(url)
            .schema(fresh("bench", '_'))
            .store(config);
        let store = PostgresStore::connect(config).await?;
        store.setup().await?;
        Ok(store)
    }

    /// A store on a fresh key prefix of the Redis server at `url`.
    pub async fn redis_store(url: &str, config: StoreConfig) -> waypoint_store::Result<RedisStore> {
        let config = RedisStoreConfig::new(url)
            .prefix(fresh("bench", '-'))
            .store(config);
        RedisStore::connect(config).await
    }
}

/// The store workload's read side: a filled, indexed store and its queries.
pub mod store_reads {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use waypoint_store::{IndexConfig, Op, PutOp, Store, StoreConfig};

    use crate::store::{DIMS, key, namespace, values};

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
}

/// The vector-index workload: Gaussian clusters of vectors and queries drawn the same way,
/// seeded, with recall@k measured against the exact scan.
pub mod ann {
    use std::collections::HashSet;
    use std::time::Instant;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use waypoint_store::ItemKey;
    use waypoint_store::index::VectorIndex;

    /// Neighbours per node (hnswlib's usual setting, which the peer script uses too).
    pub const M: usize = 16;
    /// Candidate list size while building (hnswlib's usual setting).
    pub const EF_CONSTRUCTION: usize = 200;

    /// The size of one dataset.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct AnnSize {
        /// Vectors indexed.
        pub vectors: usize,
        /// Dimensions per vector.
        pub dims: usize,
        /// Cluster centres, drawn from N(0, 1) per coordinate.
        pub clusters: usize,
        /// Standard deviation of points around their centre.
        pub sigma: f32,
        /// Queries, drawn like the vectors.
        pub queries: usize,
        /// Neighbours asked for and compared (recall@k).
        pub k: usize,
    }

    /// 100,000 vectors of 128 dimensions in 1,000 clusters, 1,000 queries, recall@10.
    pub const FULL: AnnSize = AnnSize {
        vectors: 100_000,
        dims: 128,
        clusters: 1_000,
        sigma: 1.5,
        queries: 1_000,
        k: 10,
    };

    /// One standard normal draw (Box-Muller).
    fn normal(rng: &mut StdRng) -> f32 {
        let u1: f32 = rng.random::<f32>().max(f32::MIN_POSITIVE);
        let u2: f32 = rng.random();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    }

    /// The vectors and the queries of `size`.
    pub fn dataset(size: AnnSize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let mut rng = StdRng::seed_from_u64(crate::SEED);
        let centres: Vec<Vec<f32>> = (0..size.clusters)
            .map(|_| (0..size.dims).map(|_| normal(&mut rng)).collect())
            .collect();
        let point = |rng: &mut StdRng| -> Vec<f32> {
            let c = &centres[rng.random_range(0..size.clusters)];
            c.iter().map(|x| x + size.sigma * normal(rng)).collect()
        };
        let vectors = (0..size.vectors).map(|_| point(&mut rng)).collect();
        let queries = (0..size.queries).map(|_| point(&mut rng)).collect();
        (vectors, queries)
    }

    /// The index key of vector `i`.
    pub fn key(i: usize) -> ItemKey {
        ItemKey::new(["bench"], format!("{i:06}"))
    }

    /// The vector number of a key made by [`key`].
    pub fn id(key: &ItemKey) -> Option<usize> {
        key.key.parse().ok()
    }

    fn all(_: &ItemKey) -> bool {
        true
    }

    /// The index items of `vectors`, ready to `load`.
    pub fn items(vectors: &[Vec<f32>]) -> Vec<(ItemKey, Vec<Vec<f32>>)> {
        vectors
            .iter()
            .enumerate()
            .map(|(i, v)| (key(i), vec![v.clone()]))
            .collect()
    }

    /// The exact `k` nearest vector numbers of each query (the flat scan).
    pub fn exact(index: &VectorIndex, queries: &[Vec<f32>], k: usize) -> Vec<Vec<usize>> {
        queries
            .iter()
            .map(|q| {
                index
                    .search_exact(q, k, &all)
                    .iter()
                    .filter_map(|(key, _)| id(key))
                    .collect()
            })
            .collect()
    }

    /// One single-thread pass over the queries at `ef`: queries/s and mean recall@k against
    /// `truth`.
    pub fn pass(
        index: &VectorIndex,
        queries: &[Vec<f32>],
        truth: &[Vec<usize>],
        k: usize,
        ef: usize,
    ) -> (f64, f64) {
        let start = Instant::now();
        let results: Vec<_> = queries
            .iter()
            .map(|q| index.search_with_ef(q, k, ef, &all))
            .collect();
        let qps = queries.len() as f64 / start.elapsed().as_secs_f64();
        let hits: usize = results
            .iter()
            .zip(truth)
            .map(|(r, t)| {
                let t: HashSet<usize> = t.iter().copied().collect();
                r.iter()
                    .filter(|(key, _)| id(key).is_some_and(|i| t.contains(&i)))
                    .count()
            })
            .sum();
        (qps, hits as f64 / (k * queries.len()).max(1) as f64)
    }
}
