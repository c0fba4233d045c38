//! PostgresStore's two vector modes on the same data: the in-process HNSW index (default
//! mode) and pgvector (HNSW inside PostgreSQL). For N unit vectors of 384 dimensions clustered like
//! text embeddings (`clustered_vector`)
//! (default 100,000), put in batches of 500: put throughput, then search p50 and throughput
//! and recall@10 against an exact scan; the in-process side is timed once its graph is
//! built (not while searches still scan exactly), the pgvector side at several
//! `hnsw.ef_search` floors ([`PostgresConfig::pgvector_ef_search`]).
//!
//! ```text
//! WAYPOINT_BENCH_PGVECTOR_URL=postgres://... cargo run --release -p waypoint-checkpoint-postgres \
//!     --features store --example pgvector_bench -- [N] [QUERIES]
//! ```
//!
//! Each item's value is `{"v": "<seed>"}`; the embedder turns a seed into its vector, so both
//! stores hold exactly the same vectors and the exact answer is computed here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresStore};
use waypoint_store::conformance::clustered_vector;
use waypoint_store::{
    Embedder, IndexConfig, Op, PutOp, Result, SearchOp, Store, StoreConfig, StoreExt,
};

const DIMS: usize = 384;

/// Embeds a text holding a seed as that seed's vector.
#[derive(Debug)]
struct SeedEmbedder;

#[async_trait]
impl Embedder for SeedEmbedder {
    fn dims(&self) -> usize {
        DIMS
    }

    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| clustered_vector(t.parse().unwrap_or(0), DIMS))
            .collect())
    }
}

fn index() -> StoreConfig {
    StoreConfig::new().index(IndexConfig::new(Arc::new(SeedEmbedder)).fields(["v"]))
}

/// Puts `n` items in batches; returns items per second.
async fn load(store: &dyn Store, n: u64) -> Result<f64> {
    let started = Instant::now();
    let mut seed = 0;
    while seed < n {
        let ops: Vec<Op> = (seed..(seed + 500).min(n))
            .map(|s| {
                Op::Put(PutOp::new(
                    ["bench"],
                    format!("k{s}"),
                    json!({"v": s.to_string()})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                ))
            })
            .collect();
        seed += ops.len() as u64;
        store.batch(ops).await?;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// The time of one search.
async fn first_search(store: &dyn Store) -> Result<Duration> {
    let started = Instant::now();
    store
        .search(SearchOp::new(["bench"]).query("0").limit(10))
        .await?;
    Ok(started.elapsed())
}

/// Runs the queries; returns (p50, queries per second, recall@10), after printing the slowest
/// search's time.
async fn measure(
    store: &dyn Store,
    queries: &[(u64, Vec<String>)],
) -> Result<(Duration, f64, f64)> {
    let mut times = Vec::new();
    let mut found = 0;
    let started = Instant::now();
    for (seed, exact) in queries {
        let t = Instant::now();
        let hits = store
            .search(SearchOp::new(["bench"]).query(seed.to_string()).limit(10))
            .await?;
        times.push(t.elapsed());
        found += hits.iter().filter(|h| exact.contains(&h.item.key)).count();
    }
    let qps = queries.len() as f64 / started.elapsed().as_secs_f64();
    times.sort();
    if let Some(max) = times.last() {
        println!("  slowest search {:.2} ms", max.as_secs_f64() * 1000.0);
    }
    let recall = found as f64 / (queries.len() * 10) as f64;
    Ok((times[times.len() / 2], qps, recall))
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let q: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let url = std::env::var("WAYPOINT_BENCH_PGVECTOR_URL")
        .expect("WAYPOINT_BENCH_PGVECTOR_URL: a PostgreSQL server with pgvector");
    // The exact top 10 of each query, by a scan over every vector.
    let all: Vec<Vec<f32>> = (0..n).map(|i| clustered_vector(i, DIMS)).collect();
    let queries: Vec<(u64, Vec<String>)> = (0..q)
        .map(|i| {
            let seed = 1_000_000_000 + i;
            let v = clustered_vector(seed, DIMS);
            let mut scored: Vec<(f32, u64)> = all
                .iter()
                .enumerate()
                .map(|(j, d)| (v.iter().zip(d).map(|(a, b)| a * b).sum(), j as u64))
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0));
            (
                seed,
                scored[..10].iter().map(|(_, j)| format!("k{j}")).collect(),
            )
        })
        .collect();
    let schema = format!("wp_bench_{}", std::process::id());
    let config = |pgvector: bool| {
        let mode = if pgvector { "pgv" } else { "mem" };
        PostgresConfig::new(&url)
            .schema(format!("{schema}_{mode}"))
            .pgvector(pgvector)
    };
    println!("{n} clustered unit vectors of {DIMS} dimensions, {q} queries, limit 10");

    let pgvector = PostgresStore::connect(config(true), index()).await?;
    let puts = load(&pgvector, n).await?;
    let first = first_search(&pgvector).await?;
    println!(
        "pgvector mode: puts {puts:.0}/s, first search {:.0} ms",
        first.as_secs_f64() * 1000.0
    );
    for ef_search in [40, 100, 200, 400] {
        let store =
            PostgresStore::connect(config(true).pgvector_ef_search(ef_search), index()).await?;
        let (p50, qps, recall) = measure(&store, &queries).await?;
        println!(
            "pgvector mode, hnsw.ef_search {ef_search}: search p50 {:.2} ms, {qps:.0} searches/s \
             (one at a time), recall@10 {recall:.3}",
            p50.as_secs_f64() * 1000.0
        );
    }
    let writer = PostgresStore::connect(config(false), index()).await?;
    let puts = load(&writer, n).await?;
    // Searched through a store opened after the load, which builds its graph from the table
    // (the writer's first search would catch up with its own writes one by one first).
    let started = Instant::now();
    let memory = PostgresStore::connect(config(false), index()).await?;
    let opened = started.elapsed();
    let started = Instant::now();
    loop {
        let stats = memory.index_stats().unwrap_or_default();
        if stats.approximate && !stats.building && stats.pending == 0 {
            break;
        }
        if started.elapsed() > Duration::from_secs(900) {
            println!("the graph is still not built, timing anyway: {stats:?}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let built = started.elapsed();
    let (p50, qps, recall) = measure(&memory, &queries).await?;
    println!(
        "default mode (in-process HNSW): puts {puts:.0}/s, a new store opened in {:.1} s, its \
         graph built {:.1} s later; search p50 {:.2} ms, {qps:.0} searches/s (one at a time), \
         recall@10 {recall:.3}",
        opened.as_secs_f64(),
        built.as_secs_f64(),
        p50.as_secs_f64() * 1000.0
    );

    for mode in ["mem", "pgv"] {
        sqlx::query(&format!("DROP SCHEMA \"{schema}_{mode}\" CASCADE"))
            .execute(pgvector.pool())
            .await
            .ok();
    }
    Ok(())
}
