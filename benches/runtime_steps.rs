//! Runtime super-steps per second on every checkpointer: the 10-node linear graph of
//! `waypoint_workloads::runtime`, 200 invocations on distinct threads and 200 on one thread
//! (with the last-ten / first-ten slowdown printed), `get_state_history` of a 600-checkpoint
//! thread, and `update_state` forks from the middle of that thread and near its head.
//!
//! Allocations per super-step (a counting global allocator) are printed for each saver,
//! from one batch of the distinct-threads workload. `WAYPOINT_BENCH_PROFILE=<invocations>`
//! runs only that many distinct-thread invocations on the in-memory saver and prints
//! super-steps/s and allocations per step (a short run for `valgrind --tool=callgrind`).
//!
//! PostgreSQL runs when `WAYPOINT_BENCH_POSTGRES_URL` (or `WAYPOINT_TEST_POSTGRES_URL`) names
//! a server (twice: the default LangGraph-compatible mode, and `postgres-waypoint` with
//! Waypoint's own encoding and delta history), Redis likewise with
//! `WAYPOINT_BENCH_REDIS_URL`; each run uses fresh schemas or key prefixes. Durability is
//! per step (`Sync`) unless `WAYPOINT_BENCH_DURABILITY=async` or `exit`.
#![allow(missing_docs)] // criterion's macros and this harness's main need no docs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use waypoint_checkpoint::{CheckpointSaver, InMemorySaver, ListOptions};
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_runtime::{CompiledGraph, Durability, RunConfig};
use waypoint_workloads::runtime::{
    self, Chat, ChatUpdate, HISTORY_INVOCATIONS, INVOCATIONS, Msg, STEPS_PER_INVOCATION,
};
use waypoint_workloads::servers;

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn durability() -> Durability {
    match std::env::var("WAYPOINT_BENCH_DURABILITY").as_deref() {
        Ok("exit") => Durability::Exit,
        Ok("async") => Durability::Async,
        _ => Durability::Sync,
    }
}

fn savers(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
) -> Vec<(&'static str, Arc<dyn CheckpointSaver>)> {
    let mut out: Vec<(&'static str, Arc<dyn CheckpointSaver>)> =
        vec![("memory", Arc::new(InMemorySaver::new()))];
    let sqlite = rt
        .block_on(SqliteSaver::from_path(dir.join("runtime.db")))
        .expect("open SQLite");
    out.push(("sqlite", Arc::new(sqlite)));
    match servers::url("POSTGRES") {
        Some(url) => {
            let saver = rt
                .block_on(servers::postgres_saver(&url, 4))
                .expect("connect to PostgreSQL");
            out.push(("postgres", Arc::new(saver)));
            let config = waypoint_checkpoint_postgres::PostgresConfig::new(&url)
                .schema(format!("bench_{}", uuid::Uuid::new_v4().simple()))
                .max_connections(4)
                .langgraph_values(false);
            let saver = rt
                .block_on(waypoint_checkpoint_postgres::PostgresSaver::connect(config))
                .expect("connect to PostgreSQL");
            out.push(("postgres-waypoint", Arc::new(saver)));
        }
        None => eprintln!("PostgreSQL skipped: set WAYPOINT_BENCH_POSTGRES_URL"),
    }
    match servers::url("REDIS") {
        Some(url) => {
            let saver = rt
                .block_on(servers::redis_saver(&url))
                .expect("connect to Redis");
            out.push(("redis", Arc::new(saver)));
        }
        None => eprintln!("Redis skipped: set WAYPOINT_BENCH_REDIS_URL"),
    }
    out
}

fn config() -> RunConfig {
    RunConfig::thread(uuid::Uuid::new_v4().to_string()).durability(durability())
}

/// Runs `n` invocations on `config`'s thread; returns each one's duration.
async fn invoke_n(graph: &CompiledGraph<Chat>, config: &RunConfig, n: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        graph
            .invoke(Some(runtime::input()), config)
            .await
            .expect("invoke");
        times.push(start.elapsed());
    }
    times
}

/// Runs `invocations` invocations, each on a new thread; returns the wall time and the
/// allocations made per super-step (by every thread of the process, the saver's included).
fn distinct_threads(
    rt: &tokio::runtime::Runtime,
    graph: &CompiledGraph<Chat>,
    invocations: usize,
) -> (Duration, f64) {
    let configs: Vec<RunConfig> = (0..invocations).map(|_| config()).collect();
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    rt.block_on(async {
        for config in &configs {
            graph
                .invoke(Some(runtime::input()), config)
                .await
                .expect("invoke");
        }
    });
    let elapsed = start.elapsed();
    let allocations = region.change().allocations;
    let steps = (invocations * STEPS_PER_INVOCATION) as f64;
    (elapsed, allocations as f64 / steps)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(n) = std::env::var("WAYPOINT_BENCH_PROFILE") {
        let n: usize = n
            .parse()
            .expect("WAYPOINT_BENCH_PROFILE: a number of invocations");
        let graph = runtime::graph(Arc::new(InMemorySaver::new())).expect("graph");
        distinct_threads(&rt, &graph, 10);
        let (elapsed, per_step) = distinct_threads(&rt, &graph, n);
        let steps = (n * STEPS_PER_INVOCATION) as f64;
        println!(
            "memory, {:?} durability, {n} invocations: {:.0} super-steps/s, {per_step:.1} allocations per super-step",
            durability(),
            steps / elapsed.as_secs_f64()
        );
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let savers = savers(&rt, dir.path());
    let graphs: Vec<(&str, CompiledGraph<Chat>)> = savers
        .iter()
        .map(|(name, saver)| (*name, runtime::graph(Arc::clone(saver)).expect("graph")))
        .collect();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .sample_size(10)
        .configure_from_args();
    let steps = (INVOCATIONS * STEPS_PER_INVOCATION) as u64;

    let mut group = c.benchmark_group("runtime/distinct_threads");
    group.throughput(Throughput::Elements(steps));
    for (name, graph) in &graphs {
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    rt.block_on(async {
                        for _ in 0..INVOCATIONS {
                            let config = config();
                            let start = Instant::now();
                            graph
                                .invoke(Some(runtime::input()), &config)
                                .await
                                .expect("invoke");
                            total += start.elapsed();
                        }
                    });
                }
                total
            })
        });
    }
    group.finish();

    println!("\nallocations per super-step, {INVOCATIONS} invocations on distinct threads:");
    for (name, graph) in &graphs {
        let (_, per_step) = distinct_threads(&rt, graph, INVOCATIONS);
        println!("runtime/allocations/{name}: {per_step:.1} per super-step");
    }

    let mut slowdowns = Vec::new();
    let mut group = c.benchmark_group("runtime/one_thread");
    group.throughput(Throughput::Elements(steps));
    group.sample_size(10);
    for (name, graph) in &graphs {
        let mut last = None;
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let times = rt.block_on(invoke_n(graph, &config(), INVOCATIONS));
                    total += times.iter().sum::<Duration>();
                    last = Some(times);
                }
                total
            })
        });
        if let Some(times) = last {
            let first: Duration = times[..10].iter().sum();
            let tail: Duration = times[times.len() - 10..].iter().sum();
            slowdowns.push((*name, first, tail));
        }
    }
    group.finish();

    let mut group = c.benchmark_group("runtime/history_600");
    for (name, graph) in &graphs {
        let config = config();
        rt.block_on(invoke_n(graph, &config, HISTORY_INVOCATIONS));
        let count = rt
            .block_on(graph.get_state_history(&config, &ListOptions::default()))
            .expect("history")
            .len();
        assert_eq!(count, HISTORY_INVOCATIONS * (STEPS_PER_INVOCATION + 1));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                rt.block_on(graph.get_state_history(&config, &ListOptions::default()))
                    .expect("history")
            })
        });

        // The fork points: right after n4 of the middle invocation, and of the last one.
        let history = rt
            .block_on(graph.get_state_history(&config, &ListOptions::default()))
            .expect("history");
        let after_n4: Vec<&RunConfig> = history
            .iter()
            .filter(|s| s.next == ["n5"])
            .map(|s| &s.config)
            .collect();
        let update = ChatUpdate::default().messages(vec![Msg {
            role: "user".into(),
            content: "fork".into(),
        }]);
        let middle = after_n4[HISTORY_INVOCATIONS - HISTORY_INVOCATIONS / 2];
        c_fork(&rt, graph, name, "middle", middle, &update);
        c_fork(&rt, graph, name, "head", after_n4[0], &update);
    }
    group.finish();

    println!("\none thread, {INVOCATIONS} invocations: last ten / first ten");
    println!("| saver | first 10 | last 10 | ratio |");
    println!("|---|---:|---:|---:|");
    for (name, first, tail) in slowdowns {
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.2} |",
            first.as_secs_f64() * 1e3,
            tail.as_secs_f64() * 1e3,
            tail.as_secs_f64() / first.as_secs_f64()
        );
    }
    c.final_summary();
}

/// Times `update_state` forks from `at` (median of 50), printed beside criterion's groups.
fn c_fork(
    rt: &tokio::runtime::Runtime,
    graph: &CompiledGraph<Chat>,
    name: &str,
    label: &str,
    at: &RunConfig,
    update: &ChatUpdate,
) {
    let step = rt
        .block_on(graph.get_state(at))
        .expect("fork point")
        .metadata
        .step
        .unwrap_or(-1);
    let mut times: Vec<Duration> = (0..50)
        .map(|_| {
            let start = Instant::now();
            rt.block_on(graph.update_state(at, Some(update.clone()), Some("n4")))
                .expect("fork");
            start.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "runtime/fork/{name}/{label}: median {:.3} ms, min {:.3} ms (50 forks from step {step} of a 600-checkpoint thread)",
        times[25].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
    );
}
