//! The store's vector index on one workload: 100,000 vectors of 128 dimensions from 1,000
//! Gaussian clusters (centres drawn from N(0, 1) per coordinate, points at sigma 1.5 around a
//! random centre), and 1,000 queries drawn the same way. Fixed seed.
//!
//! Prints the time to `load` the vectors (the graph is built on every core, as at open; set
//! `RAYON_NUM_THREADS=1` for one), then for each `ef_search` single-thread queries/s and
//! recall@10 against the exact scan, as a Markdown table; criterion measures the same
//! searches. Writes the dataset and the exact neighbours to `target/hnsw_ann/dataset.bin`
//! for `benches/peers/hnswlib_ann.py`, which runs hnswlib on the same data.
#![allow(missing_docs)] // criterion's harness needs no docs.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use waypoint_store::index::VectorIndex;
use waypoint_store::{AnnConfig, Distance, ItemKey};
use waypoint_workloads::ann::{self, EF_CONSTRUCTION, M};

const VECTORS: usize = ann::FULL.vectors;
const DIMS: usize = ann::FULL.dims;
const QUERIES: usize = ann::FULL.queries;
const K: usize = ann::FULL.k;
const EF_SWEEP: [usize; 9] = [10, 16, 24, 32, 48, 64, 96, 128, 256];

fn all(_: &ItemKey) -> bool {
    true
}

/// Where the dataset goes: `<target dir>/hnsw_ann/dataset.bin`.
fn dataset_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("hnsw_ann").join("dataset.bin")
}

/// `WPANN001`, then n, dims, queries, k as u32 LE, the vectors and the queries as f32 LE,
/// and the exact neighbours of each query as u32 LE ids.
fn write_dataset(vectors: &[Vec<f32>], queries: &[Vec<f32>], truth: &[Vec<usize>]) {
    let path = dataset_path();
    std::fs::create_dir_all(path.parent().expect("parent")).expect("create dir");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("create file"));
    out.write_all(b"WPANN001").expect("write");
    for n in [VECTORS, DIMS, QUERIES, K] {
        out.write_all(&(n as u32).to_le_bytes()).expect("write");
    }
    for x in vectors.iter().chain(queries).flatten() {
        out.write_all(&x.to_le_bytes()).expect("write");
    }
    for i in truth.iter().flatten() {
        out.write_all(&(*i as u32).to_le_bytes()).expect("write");
    }
    out.flush().expect("flush");
    eprintln!("dataset written to {}", path.display());
}

fn main() {
    let ef_construction = std::env::var("WAYPOINT_BENCH_ANN_EF_CONSTRUCTION")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(EF_CONSTRUCTION);
    let (vectors, queries) = ann::dataset(ann::FULL);
    let index = VectorIndex::new(
        DIMS,
        Distance::L2,
        AnnConfig {
            m: M,
            ef_construction,
            ..AnnConfig::default()
        },
    );
    let items = ann::items(&vectors);
    let threads = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .map(|n| n.to_string())
        })
        .unwrap_or_default();
    let start = Instant::now();
    index.load(items);
    let load = start.elapsed();
    let stats = index.stats();
    assert!(
        stats.approximate && stats.graph_nodes == VECTORS,
        "{stats:?}"
    );
    eprintln!(
        "load of {VECTORS} x {DIMS} (M {M}, ef_construction {ef_construction}, {threads} threads): {load:.2?}"
    );

    let start = Instant::now();
    let truth = ann::exact(&index, &queries, K);
    let exact_qps = QUERIES as f64 / start.elapsed().as_secs_f64();
    write_dataset(&vectors, &queries, &truth);

    // Best of three passes per ef: the machine is shared, the fastest pass is the least
    // disturbed one.
    let mut rows = Vec::new();
    for ef in EF_SWEEP {
        let mut best = (0.0f64, 0.0f64);
        for _ in 0..3 {
            let (qps, recall) = ann::pass(&index, &queries, &truth, K, ef);
            best = (best.0.max(qps), recall);
        }
        rows.push((ef, best.0, best.1));
    }

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .configure_from_args();
    let mut group = c.benchmark_group("hnsw_ann/search_k10");
    group.throughput(Throughput::Elements(QUERIES as u64));
    for ef in EF_SWEEP {
        group.bench_function(BenchmarkId::new("ef", ef), |b| {
            b.iter(|| {
                for q in &queries {
                    std::hint::black_box(index.search_with_ef(q, K, ef, &all));
                }
            })
        });
    }
    group.finish();
    c.final_summary();

    println!();
    println!("| ef_search | queries/s (1 thread) | recall@10 |");
    println!("|---:|---:|---:|");
    for (ef, qps, recall) in rows {
        println!("| {ef} | {qps:.0} | {recall:.4} |");
    }
    println!("| exact scan | {exact_qps:.0} | 1.0000 |");
    println!();
    println!("load: {load:.2?} (M {M}, ef_construction {ef_construction}, {threads} threads)");
    if let Some(peak) = peak_memory() {
        println!("peak resident memory: {peak} (dataset copies included)");
    }
}

/// The process's peak resident set, as Linux reports it.
fn peak_memory() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.trim_start_matches("VmHWM:").trim().to_owned())
}
