//! Open time, first-search latency, resident memory and recall@10 of a SQLite store's
//! in-process vector index, reopened with a full rebuild (no snapshot) and with the graph
//! restored from its saved snapshot. Each open runs in a fresh child process, so that its peak
//! memory (VmHWM) is its own.
//!
//! ```text
//! cargo run --release -p waypoint-checkpoint-sqlite --example index_restart [-- ITEMS [DIMS]]
//! ```
//!
//! Defaults: 100,000 items of 384 dimensions, clustered like text embeddings (200 centres
//! plus noise, unit length, cosine). The database is written once, directly, under the
//! system's temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use waypoint_checkpoint_sqlite::SqliteStore;
use waypoint_store::conformance::clustered_vector;
use waypoint_store::raw::{async_trait, encode_vector};
use waypoint_store::{
    AnnConfig, Embedder, IndexConfig, Namespace, Result, SearchOp, StoreConfig, StoreExt,
};

/// Queries whose top 10 are compared with the exact scan.
const QUERIES: u64 = 100;

/// Vectors from seeds: `d:N` for items, `q:N` for queries.
#[derive(Debug)]
struct Seeded {
    dims: usize,
}

#[async_trait]
impl Embedder for Seeded {
    fn dims(&self) -> usize {
        self.dims
    }

    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let seed = t
                    .split(':')
                    .nth(1)
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let salt = if t.starts_with("q:") { 1 << 40 } else { 0 };
                clustered_vector(seed + salt, self.dims)
            })
            .collect())
    }
}

fn config(dims: usize, exact: bool) -> StoreConfig {
    let mut ann = AnnConfig::default();
    if exact {
        ann.flat_threshold = usize::MAX;
    }
    StoreConfig::new().index(IndexConfig::new(Arc::new(Seeded { dims })).ann(ann))
}

fn ns() -> Namespace {
    Namespace::from(vec!["bench".to_owned()])
}

/// VmRSS and VmHWM of this process, in MiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Writes `items` items with their vectors straight into the tables.
async fn prepare(db: &Path, items: u64, dims: usize) -> Result<()> {
    drop(SqliteStore::from_path(db, config(dims, true)).await?);
    let mut conn = rusqlite::Connection::open(db).expect("open raw");
    let tx = conn.transaction().expect("transaction");
    {
        let mut item = tx
            .prepare(
                "INSERT INTO store (prefix, key, value, created_at, updated_at)
                 VALUES ('bench', ?1, ?2, '2026-01-01 00:00:00.000000+00:00',
                         '2026-01-01 00:00:00.000000+00:00')",
            )
            .expect("prepare");
        let mut vectors = tx
            .prepare(
                "INSERT INTO waypoint_store_vectors (prefix, key, field_name, embedding)
                 VALUES ('bench', ?1, '$', ?2)",
            )
            .expect("prepare");
        for i in 0..items {
            let key = format!("k{i}");
            item.execute(rusqlite::params![key, format!("{{\"i\":{i}}}")])
                .expect("insert item");
            vectors
                .execute(rusqlite::params![
                    key,
                    encode_vector(&clustered_vector(i, dims))
                ])
                .expect("insert vector");
        }
    }
    tx.commit().expect("commit");
    Ok(())
}

/// Top-10 keys of every query.
async fn answers(store: &SqliteStore) -> Result<Vec<Vec<String>>> {
    let mut all = Vec::new();
    for q in 0..QUERIES {
        let found = store
            .search(SearchOp::new(ns()).query(format!("q:{q}")).limit(10))
            .await?;
        all.push(found.into_iter().map(|s| s.item.key).collect());
    }
    Ok(all)
}

fn snapshot_saved(db: &Path) -> bool {
    let conn = rusqlite::Connection::open(db).expect("open raw");
    conn.query_row(
        "SELECT COUNT(*) FROM waypoint_store_index_snapshot",
        [],
        |r| r.get::<_, i64>(0),
    )
    .expect("count")
        > 0
}

/// One open in this (child) process: prints its figures and answers.
async fn child(mode: &str, db: &Path, dims: usize) -> Result<()> {
    if mode == "rebuild" {
        let conn = rusqlite::Connection::open(db).expect("open raw");
        conn.execute("DELETE FROM waypoint_store_index_snapshot", [])
            .expect("drop snapshot");
    }
    let started = Instant::now();
    let store = SqliteStore::from_path(db, config(dims, false)).await?;
    let opened = started.elapsed();
    let first = Instant::now();
    store
        .search(SearchOp::new(ns()).query("q:999999").limit(10))
        .await?;
    let first = first.elapsed();
    let (rss, hwm) = memory();
    let stats = store.index_stats().expect("an index");
    println!(
        "RESULT {mode}: open {:.2} s, first search {:.1} ms, open + first search {:.2} s, \
         VmRSS {rss} MiB, VmHWM {hwm} MiB, restored {} nodes",
        opened.as_secs_f64(),
        first.as_secs_f64() * 1e3,
        (opened + first).as_secs_f64(),
        stats.restored
    );
    for keys in answers(&store).await? {
        println!("ANSWER {}", keys.join(" "));
    }
    // Until the background work is done: the snapshot saved (rebuild) or the insertable
    // graph rebuilt (restore).
    let waited = Instant::now();
    loop {
        let stats = store.index_stats().expect("an index");
        if !stats.building && (mode == "restore" || snapshot_saved(db)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (rss, hwm) = memory();
    println!(
        "RESULT {mode}: background work done {:.1} s after the first search, VmRSS {rss} MiB, \
         VmHWM {hwm} MiB",
        waited.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs a child and returns its RESULT lines and answers.
fn run_child(mode: &str, db: &Path, dims: usize) -> (Vec<String>, Vec<Vec<String>>) {
    let out = Command::new(std::env::current_exe().expect("own path"))
        .args([mode, &db.display().to_string(), &dims.to_string()])
        .output()
        .expect("run child");
    assert!(
        out.status.success(),
        "{mode} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let results = text
        .lines()
        .filter(|l| l.starts_with("RESULT"))
        .map(str::to_owned)
        .collect();
    let answers = text
        .lines()
        .filter_map(|l| l.strip_prefix("ANSWER"))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    (results, answers)
}

fn recall(got: &[Vec<String>], exact: &[Vec<String>]) -> f64 {
    let hits: usize = got
        .iter()
        .zip(exact)
        .map(|(g, e)| g.iter().filter(|k| e.contains(k)).count())
        .sum();
    hits as f64 / exact.iter().map(Vec::len).sum::<usize>().max(1) as f64
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, db, dims] = args.as_slice()
        && (mode == "rebuild" || mode == "restore")
    {
        return child(mode, Path::new(db), dims.parse().expect("dims")).await;
    }
    let items: u64 = args.first().map_or(100_000, |n| n.parse().expect("ITEMS"));
    let dims: usize = args.get(1).map_or(384, |n| n.parse().expect("DIMS"));
    let dir: PathBuf = std::env::temp_dir().join(format!("waypoint-index-restart-{items}x{dims}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let db = dir.join("store.db");
    if !db.exists() {
        let started = Instant::now();
        prepare(&db, items, dims).await?;
        println!(
            "wrote {items} x {dims} in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let exact = {
        let store = SqliteStore::from_path(&db, config(dims, true)).await?;
        answers(&store).await?
    };
    for mode in ["rebuild", "restore"] {
        let (results, got) = run_child(mode, &db, dims);
        for line in results {
            println!("{}", line.trim_start_matches("RESULT "));
        }
        println!("{mode}: recall@10 vs exact {:.4}", recall(&got, &exact));
    }
    Ok(())
}
