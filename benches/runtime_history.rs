//! Linear-size history: a 1,000-turn chat on one thread, on every checkpointer. Prints the
//! bytes the saver stores against the raw bytes of the messages, and how much slower the
//! last ten turns are than the first ten (LangGraph without delta channels: quadratic bytes,
//! 14x slower).
//!
//! PostgreSQL runs when `WAYPOINT_BENCH_POSTGRES_URL` (or `WAYPOINT_TEST_POSTGRES_URL`) names
//! a server, Redis likewise (`..._REDIS_URL`). `WAYPOINT_BENCH_TURNS` changes the number of
//! turns, `WAYPOINT_BENCH_FULL_TURNS` those of the full-values rows (0: none).
//!
//! Bookkeeping is each checkpoint's own record as the saver stores it: the compact record
//! (`waypoint_checkpoint::serde::record`) on the savers that own their format (memory,
//! SQLite, Redis), the JSON of LangGraph's layout on PostgreSQL; the JSON form is shown
//! beside it for every saver.
#![allow(missing_docs)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use waypoint_checkpoint::serde::record;
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, InMemorySaver, ListOptions};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, DeltaPolicy, END, NodeResult, RunConfig, START,
    StateGraph,
};
use waypoint_workloads::runtime::{Chat, ChatUpdate, Msg};
use waypoint_workloads::servers;

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

/// Bytes the saver holds for a thread: the state's (every distinct stored value and every
/// pending write, counted once), and the bookkeeping's (each checkpoint's own record: ids,
/// channel versions, versions seen, metadata) as the saver stores it (`compact`: the compact
/// record) and as JSON.
async fn stored_bytes(saver: &dyn CheckpointSaver, thread: &str, compact: bool) -> (u64, u64, u64) {
    let all = saver
        .list(
            Some(&CheckpointConfig::new(thread)),
            &ListOptions::default(),
        )
        .await
        .expect("list");
    let mut seen = BTreeSet::new();
    let (mut total, mut bookkeeping, mut json) = (0u64, 0u64, 0u64);
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
        let as_json = serde_json::to_vec(&head).map_or(0, |b| b.len() as u64)
            + serde_json::to_vec(&tuple.metadata.to_json()).map_or(0, |b| b.len() as u64);
        json += as_json;
        bookkeeping += if compact {
            record::encoded_len(&head, &tuple.metadata) as u64
        } else {
            as_json
        };
    }
    (total, bookkeeping, json)
}

struct Row {
    saver: &'static str,
    delta: bool,
    turns: usize,
    raw: u64,
    values: u64,
    bookkeeping: u64,
    json: u64,
    checkpoints: usize,
    first: Duration,
    last: Duration,
}

async fn measure(
    name: &'static str,
    compact: bool,
    saver: Arc<dyn CheckpointSaver>,
    delta: DeltaPolicy,
    turns: usize,
) -> Row {
    let graph = chatbot(Arc::clone(&saver), delta);
    let thread = uuid::Uuid::new_v4().to_string();
    let config = RunConfig::thread(thread.clone());
    let mut rng = StdRng::seed_from_u64(waypoint_workloads::SEED);
    let mut times = Vec::with_capacity(turns);
    let mut last = None;
    for _ in 0..turns {
        let user = Msg {
            role: "user".into(),
            content: text(&mut rng, USER_CHARS),
        };
        // Holding the previous outcome would share (and so copy) the state the next turn
        // changes; a caller keeps what it needs from it instead.
        drop(last.take());
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
    let (values, bookkeeping, json) = stored_bytes(&*saver, &thread, compact).await;
    let checkpoints = saver
        .list(
            Some(&CheckpointConfig::new(thread)),
            &ListOptions::default(),
        )
        .await
        .map_or(0, |l| l.len());
    Row {
        saver: name,
        delta: delta.enabled,
        turns,
        raw,
        values,
        bookkeeping,
        json,
        checkpoints,
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
    let postgres = servers::url("POSTGRES");
    let redis = servers::url("REDIS");
    let mut rows = Vec::new();
    // Full values grow quadratically (that is the point), so they get a shorter chat.
    let full_turns: usize = std::env::var("WAYPOINT_BENCH_FULL_TURNS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(200.min(turns));
    for (delta, turns) in [
        (DeltaPolicy::default(), turns),
        (DeltaPolicy::off(), full_turns),
    ] {
        if turns < 10 {
            continue;
        }
        let tag = if delta.enabled { "delta" } else { "full" };
        rows.push(rt.block_on(measure(
            "memory",
            true,
            Arc::new(InMemorySaver::new()),
            delta,
            turns,
        )));
        let sqlite = rt
            .block_on(SqliteSaver::from_path(dir.path().join(format!("{tag}.db"))))
            .expect("SQLite");
        rows.push(rt.block_on(measure("sqlite", true, Arc::new(sqlite), delta, turns)));
        if let Some(url) = &redis {
            let saver = rt.block_on(servers::redis_saver(url)).expect("Redis");
            rows.push(rt.block_on(measure("redis", true, Arc::new(saver), delta, turns)));
        }
        if let Some(url) = &postgres {
            let schema = format!("bench_hist_{}", uuid::Uuid::new_v4().simple());
            let saver = rt
                .block_on(PostgresSaver::connect(
                    PostgresConfig::new(url).schema(schema),
                ))
                .expect("PostgreSQL");
            rt.block_on(saver.setup()).expect("setup");
            rows.push(rt.block_on(measure("postgres", false, Arc::new(saver), delta, turns)));
        }
    }
    println!("\nA chat on one thread (user {USER_CHARS} chars, reply {REPLY_CHARS} chars)");
    println!(
        "| saver | appending channels | turns | raw message bytes | state bytes (/ raw) | with bookkeeping (/ raw) | record bytes a checkpoint (as JSON) | checkpoints | first 10 turns | last 10 turns | last / first |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let total = r.values + r.bookkeeping;
        println!(
            "| {} | {} | {} | {} | {} ({:.2}) | {} ({:.2}) | {} ({}) | {} | {:.1} ms | {:.1} ms | {:.2} |",
            r.saver,
            if r.delta { "deltas" } else { "full values" },
            r.turns,
            r.raw,
            r.values,
            r.values as f64 / r.raw as f64,
            total,
            total as f64 / r.raw as f64,
            r.bookkeeping / r.checkpoints.max(1) as u64,
            r.json / r.checkpoints.max(1) as u64,
            r.checkpoints,
            r.first.as_secs_f64() * 1e3,
            r.last.as_secs_f64() * 1e3,
            r.last.as_secs_f64() / r.first.as_secs_f64(),
        );
    }
}
