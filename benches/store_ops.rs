//! Store operations, one workload run against every backend: sequential single puts, puts in
//! batches of 100, gets, a filtered search and a semantic search over 10,000 items (hashing
//! embedder, 128 dims), and the time to reopen a store and rebuild its index from stored
//! vectors. Throughput via criterion; a Markdown table gives p50/p99 latencies.
//!
//! PostgreSQL runs when `WAYPOINT_BENCH_POSTGRES_URL` (or `WAYPOINT_TEST_POSTGRES_URL`) names a
//! server; each store uses a fresh schema. Redis runs when `WAYPOINT_BENCH_REDIS_URL` (or
//! `WAYPOINT_TEST_REDIS_URL`) names a server; each store uses a fresh key prefix. The peer is
//! `benches/peers/langgraph_store.py`.
#![allow(missing_docs)] // criterion's macros and this harness's main need no docs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use waypoint_checkpoint_sqlite::SqliteStore;
use waypoint_store::{InMemoryStore, Namespace, Op, PutOp, SearchOp, Store, StoreConfig, StoreExt};
use waypoint_workloads::servers;
use waypoint_workloads::store::{BATCH, ITEMS, PUTS, fill, indexed, key, namespace, values};

type Opened = Pin<Box<dyn Future<Output = Arc<dyn Store>>>>;

/// Opens a fresh, empty store of one backend with a config.
struct Backend {
    name: &'static str,
    open: Box<dyn Fn(StoreConfig) -> Opened>,
}

fn backends(dir: &std::path::Path) -> Vec<Backend> {
    let dir = dir.to_owned();
    let mut backends = vec![
        Backend {
            name: "memory",
            open: Box::new(|config| {
                Box::pin(async move {
                    Arc::new(InMemoryStore::with_config(config).expect("memory")) as Arc<dyn Store>
                })
            }),
        },
        Backend {
            name: "sqlite",
            open: Box::new(move |config| {
                let path = dir.join(format!("{}.db", uuid::Uuid::new_v4().simple()));
                Box::pin(async move {
                    Arc::new(SqliteStore::from_path(&path, config).await.expect("sqlite"))
                        as Arc<dyn Store>
                })
            }),
        },
    ];
    match servers::url("POSTGRES") {
        Some(url) => backends.push(Backend {
            name: "postgres",
            open: Box::new(move |config| {
                let url = url.clone();
                Box::pin(async move { postgres_store(&url, config).await })
            }),
        }),
        None => eprintln!("PostgreSQL skipped: set WAYPOINT_BENCH_POSTGRES_URL"),
    }
    match servers::url("REDIS") {
        Some(url) => backends.push(Backend {
            name: "redis",
            open: Box::new(move |config| {
                let url = url.clone();
                Box::pin(async move { redis_store(&url, config).await })
            }),
        }),
        None => eprintln!("Redis skipped: set WAYPOINT_BENCH_REDIS_URL"),
    }
    backends
}

async fn postgres_store(url: &str, config: StoreConfig) -> Arc<dyn Store> {
    let store = servers::postgres_store(url, config).await;
    Arc::new(store.expect("connect to PostgreSQL"))
}

async fn redis_store(url: &str, config: StoreConfig) -> Arc<dyn Store> {
    let store = servers::redis_store(url, config).await;
    Arc::new(store.expect("connect to Redis"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let backends = backends(dir.path());
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .configure_from_args();
    let items = values(PUTS);

    let mut group = c.benchmark_group("store/put");
    group.throughput(Throughput::Elements(PUTS as u64));
    for b in &backends {
        let store = rt.block_on((b.open)(StoreConfig::new()));
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        // Built before the clock starts: only the store's work is timed.
                        let run = uuid::Uuid::new_v4().simple().to_string();
                        let puts: Vec<_> = items
                            .iter()
                            .enumerate()
                            .map(|(i, v)| {
                                (
                                    Namespace::from(namespace(i)),
                                    format!("{run}{i}"),
                                    Value::Object(v.clone()),
                                )
                            })
                            .collect();
                        let start = Instant::now();
                        for (ns, key, value) in puts {
                            store.put(ns, &key, value).await.expect("put");
                        }
                        total += start.elapsed();
                    }
                    total
                })
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("store/put_batch_100");
    group.throughput(Throughput::Elements(PUTS as u64));
    for b in &backends {
        let store = rt.block_on((b.open)(StoreConfig::new()));
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let run = uuid::Uuid::new_v4().simple().to_string();
                        let batches: Vec<Vec<Op>> = items
                            .chunks(BATCH)
                            .enumerate()
                            .map(|(c, chunk)| {
                                chunk
                                    .iter()
                                    .enumerate()
                                    .map(|(j, v)| {
                                        let i = c * BATCH + j;
                                        Op::Put(PutOp::new(
                                            namespace(i),
                                            format!("{run}{i}"),
                                            v.clone(),
                                        ))
                                    })
                                    .collect()
                            })
                            .collect();
                        let start = Instant::now();
                        for batch in batches {
                            store.batch(batch).await.expect("batch");
                        }
                        total += start.elapsed();
                    }
                    total
                })
            })
        });
    }
    group.finish();

    // Read benchmarks: one indexed store of 10,000 items per backend.
    let mut stores = Vec::new();
    for b in &backends {
        let store = rt.block_on(async {
            let store = (b.open)(indexed()).await;
            fill(&*store, ITEMS).await.expect("fill");
            store
        });
        stores.push(store);
    }
    let all = values(ITEMS);
    let mut rng = StdRng::seed_from_u64(7);
    let queries: Vec<String> = (0..200)
        .map(|_| {
            all[rng.random_range(0..ITEMS)]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();

    let mut group = c.benchmark_group("store/semantic_search_10k");
    for (b, store) in backends.iter().zip(&stores) {
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            let mut next = 0;
            bench.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let q = &queries[next % queries.len()];
                        next += 1;
                        let hits = store
                            .search(SearchOp::new(["bench"]).query(q.as_str()).limit(10))
                            .await
                            .expect("search");
                        assert_eq!(hits.len(), 10);
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();

    println!(
        "\n| backend | get p50 | get p99 | filtered search p50 | semantic search p50 | semantic p99 |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (b, store) in backends.iter().zip(&stores) {
        let mut rng = StdRng::seed_from_u64(7);
        let (g50, g99) = rt.block_on(latencies(2000, |_| {
            let i = rng.random_range(0..ITEMS);
            let store = Arc::clone(store);
            async move {
                let item = store.get(namespace(i), &key(i)).await.expect("get");
                assert!(item.is_some());
            }
        }));
        let (f50, _) = rt.block_on(latencies(200, |_| {
            let store = Arc::clone(store);
            async move {
                let op = SearchOp::new(["bench"])
                    .filter(json!({"kind": "k3"}))
                    .limit(10);
                assert_eq!(store.search(op).await.expect("search").len(), 10);
            }
        }));
        let (s50, s99) = rt.block_on(latencies(200, |n| {
            let store = Arc::clone(store);
            let q = queries[n % queries.len()].clone();
            async move {
                let op = SearchOp::new(["bench"]).query(q).limit(10);
                assert_eq!(store.search(op).await.expect("search").len(), 10);
            }
        }));
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            b.name,
            ms(g50),
            ms(g99),
            ms(f50),
            ms(s50),
            ms(s99)
        );
    }
    c.final_summary();
}

/// p50 and p99 of `n` sequential calls.
async fn latencies<F, Fut>(n: usize, mut call: F) -> (Duration, Duration)
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let start = Instant::now();
        call(i).await;
        samples.push(start.elapsed());
    }
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}
