//! Linear-size history: a 1,000-turn chat on one thread, on every checkpointer. Prints the
//! bytes the saver stores against the raw bytes of the messages, and how much slower the
//! last ten turns are than the first ten (LangGraph without delta channels: quadratic bytes,
//! 14x slower).
//!
//! PostgreSQL runs when `WAYPOINT_BENCH_POSTGRES_URL` (or `WAYPOINT_TEST_POSTGRES_URL`) names
//! a server. `WAYPOINT_BENCH_TURNS` changes the number of turns.
#![allow(missing_docs)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use waypoint_benches::runtime::{Chat, ChatUpdate, Msg};
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, InMemorySaver, ListOptions};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, DeltaPolicy, END, NodeResult, RunConfig, START,
    StateGraph,
};

/// Characters of a user message and of a reply.
const USER_CHARS: usize = 120;
const REPLY_CHARS: usize = 600;

fn text(rng: &mut StdRng, chars: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "agent",
        "memory",
        "thread",
        "checkpoint",
        "graph",
        "state",
        "tool",
        "answer",
        "question",
        "persist",
        "resume",
        "history",
        "value",
        "user",
        "reply",
    ];
    let mut out = String::with_capacity(chars + 12);
    while out.len() < chars {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    out.truncate(chars);
    out
}

/// START -> chatbot -> END; the chatbot appends one reply per turn.
fn chatbot(saver: Arc<dyn CheckpointSaver>, delta: DeltaPolicy) -> CompiledGraph<Chat> {
    let mut graph = StateGraph::<Chat>::new();
    graph.add_node("chatbot", |state: Arc<Chat>, _ctx: Context| {
        // A deterministic reply whose text depends on the turn.
        let mut rng = StdRng::seed_from_u64(state.messages.len() as u64);
        let reply = Msg {
            role: "ai".into(),
            content: text(&mut rng, REPLY_CHARS),
        };
        std::future::ready(NodeResult::Ok(ChatUpdate::default().messages(vec![reply])))
    });
    graph.add_edge(START, "chatbot").add_edge("chatbot", END);
    let options = CompileOptions {
        delta,
        ..CompileOptions::default()
    };
    graph.compile(options.checkpointer(saver)).expect("compile")
}

/// Bytes the saver holds for a thread: every distinct stored value, every pending write and
/// every checkpoint's own JSON (versions, metadata), counted once.
async fn stored_bytes(saver: &dyn CheckpointSaver, thread: &str) -> u64 {
    let all = saver
        .list(
            Some(&CheckpointConfig::new(thread)),
            &ListOptions::default(),
        )
        .await
        .expect("list");
    let mut seen = BTreeSet::new();
    let mut total = 0u64;
    for tuple in &all {
        for (channel, value) in &tuple.checkpoint.channel_values {
            let version = tuple
                .checkpoint
                .channel_versions
                .get(channel)
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default();
            if seen.insert((channel.clone(), version)) {
                total += value.bytes.len() as u64;
            }
        }
        total += tuple
            .pending_writes
            .iter()
            .map(|w| w.value.bytes.len() as u64)
            .sum::<u64>();
        let mut head = tuple.checkpoint.clone();
        head.channel_values.clear();
        total += serde_json::to_vec(&head).map_or(0, |b| b.len() as u64);
        total += serde_json::to_vec(&tuple.metadata.to_json()).map_or(0, |b| b.len() as u64);
    }
    total
}

struct Row {
    saver: &'static str,
    delta: bool,
    turns: usize,
    raw: u64,
    stored: u64,
    first: Duration,
    last: Duration,
}

async fn measure(
    name: &'static str,
    saver: Arc<dyn CheckpointSaver>,
    delta: DeltaPolicy,
    turns: usize,
) -> Row {
    let graph = chatbot(Arc::clone(&saver), delta);
    let thread = uuid::Uuid::new_v4().to_string();
    let config = RunConfig::thread(thread.clone());
    let mut rng = StdRng::seed_from_u64(waypoint_benches::SEED);
    let mut times = Vec::with_capacity(turns);
    let mut last = None;
    for _ in 0..turns {
        let user = Msg {
            role: "user".into(),
            content: text(&mut rng, USER_CHARS),
        };
        let start = Instant::now();
        let out = graph
            .invoke(Some(ChatUpdate::default().messages(vec![user])), &config)
            .await
            .expect("invoke");
        times.push(start.elapsed());
        last = Some(out);
    }
    let messages = last
        .map(|out| out.values.messages.clone())
        .unwrap_or_default();
    assert_eq!(messages.len(), 2 * turns);
    let raw: u64 = messages
        .iter()
        .map(|m| serde_json::to_vec(m).map_or(0, |b| b.len() as u64))
        .sum();
    Row {
        saver: name,
        delta: delta.enabled,
        turns,
        raw,
        stored: stored_bytes(&*saver, &thread).await,
        first: times[..10].iter().sum(),
        last: times[times.len() - 10..].iter().sum(),
    }
}

fn main() {
    let turns: usize = std::env::var("WAYPOINT_BENCH_TURNS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let postgres = ["WAYPOINT_BENCH_POSTGRES_URL", "WAYPOINT_TEST_POSTGRES_URL"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|u| !u.is_empty()));
    let mut rows = Vec::new();
    for delta in [DeltaPolicy::default(), DeltaPolicy::off()] {
        let tag = if delta.enabled { "delta" } else { "full" };
        rows.push(rt.block_on(measure(
            "memory",
            Arc::new(InMemorySaver::new()),
            delta,
            turns,
        )));
        let sqlite = rt
            .block_on(SqliteSaver::from_path(dir.path().join(format!("{tag}.db"))))
            .expect("SQLite");
        rows.push(rt.block_on(measure("sqlite", Arc::new(sqlite), delta, turns)));
        if let Some(url) = &postgres {
            let schema = format!("bench_hist_{}", uuid::Uuid::new_v4().simple());
            let saver = rt
                .block_on(PostgresSaver::connect(
                    PostgresConfig::new(url).schema(schema),
                ))
                .expect("PostgreSQL");
            rt.block_on(saver.setup()).expect("setup");
            rows.push(rt.block_on(measure("postgres", Arc::new(saver), delta, turns)));
        }
    }
    println!(
        "\n{turns}-turn chat on one thread (user {USER_CHARS} chars, reply {REPLY_CHARS} chars)"
    );
    println!(
        "| saver | appending channels | raw message bytes | stored bytes | stored / raw | first 10 turns | last 10 turns | last / first |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {:.2} | {:.1} ms | {:.1} ms | {:.2} |",
            r.saver,
            if r.delta { "deltas" } else { "full values" },
            r.raw,
            r.stored,
            r.stored as f64 / r.raw as f64,
            r.first.as_secs_f64() * 1e3,
            r.last.as_secs_f64() * 1e3,
            r.last.as_secs_f64() / r.first.as_secs_f64(),
        );
        let _ = r.turns;
    }
}
