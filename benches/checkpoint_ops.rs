//! Checkpointer operations, one workload run against every backend: sequential puts (five
//! channels, one changing per step), puts from 16 concurrent writers on distinct threads,
//! `put_writes`, `get_tuple` latest and by id (median via criterion, p50/p99 printed), `list`
//! of a 1,000-checkpoint history, `delta_channel_history` in the middle of a 600-checkpoint
//! chain (300 ancestors back to the snapshot), bytes on disk per checkpoint (memory for Redis),
//! and limit lines: plain rusqlite inserts of the same bytes for SQLite, `pgbench` single-row
//! inserts for PostgreSQL, `redis-benchmark`'s pipelined HSET for Redis.
//!
//! PostgreSQL runs when `WAYPOINT_BENCH_POSTGRES_URL` (or `WAYPOINT_TEST_POSTGRES_URL`) names
//! a server; each run uses fresh schemas on it. Redis runs when `WAYPOINT_BENCH_REDIS_URL` (or
//! `WAYPOINT_TEST_REDIS_URL`) names a server; each run uses fresh key prefixes on it.
#![allow(missing_docs)] // criterion's macros and this harness's main need no docs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use waypoint_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointSource, InMemorySaver, ListOptions, SerializedValue,
};
use waypoint_checkpoint_postgres::PostgresSaver;
use waypoint_checkpoint_redis::{RedisSaver, redis};
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_workloads::checkpoints::{self, CHANNELS, HISTORY, PUTS, WRITE_CALLS};
use waypoint_workloads::servers;

/// Concurrent writers in the concurrent put benchmark.
const WRITERS: usize = 16;

/// Checkpoints in the delta-history chain; the one read is in the middle.
const DELTA_CHAIN: usize = 600;

struct Backend {
    name: &'static str,
    saver: Arc<dyn CheckpointSaver>,
    /// Where the data lives, for the bytes-per-checkpoint figure.
    storage: Storage,
}

enum Storage {
    Memory,
    Sqlite,
    Postgres(String),
    Redis(String),
}

/// A saver on a fresh schema of the PostgreSQL server at `url`, set up.
async fn postgres_saver(url: &str) -> PostgresSaver {
    servers::postgres_saver(url, WRITERS as u32)
        .await
        .expect("connect to PostgreSQL")
}

/// A saver on a fresh key prefix of the Redis server at `url`.
async fn redis_saver(url: &str) -> RedisSaver {
    servers::redis_saver(url).await.expect("connect to Redis")
}

fn backends(rt: &tokio::runtime::Runtime, dir: &std::path::Path) -> Vec<Backend> {
    let sqlite_path = dir.join("bench.db");
    let sqlite = rt
        .block_on(SqliteSaver::from_path(&sqlite_path))
        .expect("open sqlite");
    let mut backends = vec![
        Backend {
            name: "memory",
            saver: Arc::new(InMemorySaver::new()),
            storage: Storage::Memory,
        },
        Backend {
            name: "sqlite",
            saver: Arc::new(sqlite),
            storage: Storage::Sqlite,
        },
    ];
    match servers::url("POSTGRES") {
        Some(url) => backends.push(Backend {
            name: "postgres",
            saver: Arc::new(rt.block_on(postgres_saver(&url))),
            storage: Storage::Postgres(url),
        }),
        None => eprintln!("PostgreSQL skipped: set WAYPOINT_BENCH_POSTGRES_URL"),
    }
    match servers::url("REDIS") {
        Some(url) => backends.push(Backend {
            name: "redis",
            saver: Arc::new(rt.block_on(redis_saver(&url))),
            storage: Storage::Redis(url),
        }),
        None => eprintln!("Redis skipped: set WAYPOINT_BENCH_REDIS_URL"),
    }
    backends
}

fn fresh_thread() -> String {
    format!("bench-{}", uuid::Uuid::new_v4())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let value = checkpoints::channel_value();
    let backends = backends(&rt, dir.path());
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .configure_from_args();

    // Each backend gets one 1,000-checkpoint thread for the read benchmarks.
    let histories: Vec<(String, Vec<CheckpointConfig>)> = backends
        .iter()
        .map(|b| {
            let thread = fresh_thread();
            let configs = rt
                .block_on(checkpoints::put_all(
                    &*b.saver,
                    &thread,
                    checkpoints::history(HISTORY, &value),
                ))
                .expect("history");
            (thread, configs)
        })
        .collect();

    let mut group = c.benchmark_group("checkpoint/put");
    group.throughput(Throughput::Elements(PUTS as u64));
    for b in &backends {
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let items = checkpoints::history(PUTS, &value);
                    let thread = fresh_thread();
                    let start = Instant::now();
                    rt.block_on(checkpoints::put_all(&*b.saver, &thread, items))
                        .expect("puts");
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("checkpoint/put_16_writers");
    group.throughput(Throughput::Elements(PUTS as u64));
    for b in &backends {
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let work: Vec<_> = (0..WRITERS)
                        .map(|_| (fresh_thread(), checkpoints::history(PUTS / WRITERS, &value)))
                        .collect();
                    let start = Instant::now();
                    rt.block_on(async {
                        let writers: Vec<_> = work
                            .into_iter()
                            .map(|(thread, items)| {
                                let saver = b.saver.clone();
                                tokio::spawn(async move {
                                    checkpoints::put_all(&*saver, &thread, items).await
                                })
                            })
                            .collect();
                        for w in writers {
                            w.await.expect("writer").expect("puts");
                        }
                    });
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("checkpoint/put_writes");
    group.throughput(Throughput::Elements(WRITE_CALLS as u64));
    for b in &backends {
        // Writes go to a thread of their own, so the read benchmarks see no extra writes.
        let thread = fresh_thread();
        let target = rt
            .block_on(checkpoints::put_all(
                &*b.saver,
                &thread,
                checkpoints::history(1, &value),
            ))
            .expect("target")
            .remove(0);
        let message = SerializedValue::new("json", &br#"{"type":"ai","content":"done"}"#[..]);
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let tasks: Vec<String> = (0..WRITE_CALLS)
                        .map(|_| uuid::Uuid::new_v4().to_string())
                        .collect();
                    let start = Instant::now();
                    rt.block_on(async {
                        for task in &tasks {
                            let writes = vec![
                                ("messages".to_owned(), message.clone()),
                                ("status".to_owned(), message.clone()),
                            ];
                            b.saver
                                .put_writes(&target, writes, task, "")
                                .await
                                .expect("writes");
                        }
                    });
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();

    // Calls are awaited inside the runtime, as an async application makes them; entering
    // `block_on` from outside for every call would add this thread's park/unpark to each one.
    let mut group = c.benchmark_group("checkpoint/get_tuple");
    for (b, (thread, configs)) in backends.iter().zip(&histories) {
        let latest = CheckpointConfig::new(thread.as_str()).with_ns("");
        group.bench_function(BenchmarkId::new("latest", b.name), |bench| {
            bench.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        b.saver
                            .get_tuple(&latest)
                            .await
                            .expect("get")
                            .expect("found");
                    }
                    start.elapsed()
                })
            })
        });
        group.bench_function(BenchmarkId::new("by_id", b.name), |bench| {
            bench.iter_custom(|iters| {
                let mut rng = StdRng::seed_from_u64(7);
                let picks: Vec<&CheckpointConfig> = (0..iters)
                    .map(|_| &configs[rng.random_range(0..configs.len())])
                    .collect();
                rt.block_on(async {
                    let start = Instant::now();
                    for c in picks {
                        b.saver.get_tuple(c).await.expect("get").expect("found");
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("checkpoint/list");
    group.throughput(Throughput::Elements(HISTORY as u64));
    for (b, (thread, _)) in backends.iter().zip(&histories) {
        let config = CheckpointConfig::new(thread.as_str());
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.iter(|| {
                let all = rt
                    .block_on(b.saver.list(Some(&config), &ListOptions::default()))
                    .expect("list");
                assert_eq!(all.len(), HISTORY);
                all
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("checkpoint/delta_history");
    for b in &backends {
        let configs = rt
            .block_on(delta_chain(&*b.saver, &fresh_thread(), &value))
            .expect("delta chain");
        let target = &configs[DELTA_CHAIN / 2];
        let channels = ["messages".to_owned()];
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let history = b
                            .saver
                            .delta_channel_history(target, &channels)
                            .await
                            .expect("delta history");
                        assert_eq!(history["messages"].writes.len(), DELTA_CHAIN / 2);
                        assert!(history["messages"].seed.is_some());
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();

    println!(
        "\n| backend | get_tuple latest p50 | p99 | get_tuple by id p50 | p99 | bytes on disk per checkpoint |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (b, (thread, configs)) in backends.iter().zip(&histories) {
        let latest = CheckpointConfig::new(thread.as_str()).with_ns("");
        let mut rng = StdRng::seed_from_u64(7);
        let mut time = |config: &dyn Fn(&mut StdRng) -> CheckpointConfig| {
            let mut samples: Vec<Duration> = (0..2000)
                .map(|_| {
                    let c = config(&mut rng);
                    let start = Instant::now();
                    rt.block_on(b.saver.get_tuple(&c))
                        .expect("get")
                        .expect("found");
                    start.elapsed()
                })
                .collect();
            samples.sort();
            (percentile(&samples, 0.5), percentile(&samples, 0.99))
        };
        let (l50, l99) = time(&|_| latest.clone());
        let (i50, i99) = time(&|rng| configs[rng.random_range(0..configs.len())].clone());
        let bytes = match &b.storage {
            Storage::Memory => 0,
            Storage::Sqlite => bytes_per_checkpoint(&rt, &value),
            Storage::Postgres(url) => postgres_bytes_per_checkpoint(&rt, url, &value),
            Storage::Redis(url) => redis_bytes_per_checkpoint(&rt, url, &value),
        };
        let ms = |d: Duration| format!("{:.4} ms", d.as_secs_f64() * 1e3);
        let bytes = if bytes > 0 {
            bytes.to_string()
        } else {
            "-".into()
        };
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            b.name,
            ms(l50),
            ms(l99),
            ms(i50),
            ms(i99),
            bytes
        );
    }
    rusqlite_limit(dir.path(), &value);
    if let Some(url) = servers::url("POSTGRES") {
        pgbench_limit(&rt, &url, &value);
    }
    if let Some(url) = servers::url("REDIS") {
        redis_benchmark_limit(&url);
    }
    c.final_summary();
}

/// A thread shaped as the runtime stores an appending channel: `messages` has a snapshot at
/// step 0 only and one small write per step after it (a new version without a value each
/// step), `status` a small stored value per step.
async fn delta_chain(
    saver: &dyn CheckpointSaver,
    thread: &str,
    snapshot: &SerializedValue,
) -> waypoint_checkpoint::Result<Vec<CheckpointConfig>> {
    let message = SerializedValue::new("json", &br#"{"type":"ai","content":"a line"}"#[..]);
    let status = SerializedValue::new("json", &br#""running""#[..]);
    let mut versions = ChannelVersions::new();
    let mut parent = CheckpointConfig::new(thread).with_ns("");
    let mut out = Vec::with_capacity(DELTA_CHAIN);
    for step in 0..DELTA_CHAIN {
        let mut cp = Checkpoint::new(step as i64);
        let mut new_versions = ChannelVersions::new();
        for channel in ["messages", "status"] {
            let next = ChannelVersion::next(versions.get(channel))?;
            versions.insert(channel.to_owned(), next.clone());
            new_versions.insert(channel.to_owned(), next);
        }
        cp.channel_versions = versions.clone();
        if step == 0 {
            cp.channel_values
                .insert("messages".to_owned(), snapshot.clone());
        }
        cp.channel_values
            .insert("status".to_owned(), status.clone());
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64);
        parent = saver.put(&parent, cp, meta, new_versions).await?;
        let writes = vec![("messages".to_owned(), message.clone())];
        saver.put_writes(&parent, writes, "task", "").await?;
        out.push(parent.clone());
    }
    Ok(out)
}

/// Bytes on disk per checkpoint of a fresh database holding one 1,000-checkpoint thread.
fn bytes_per_checkpoint(rt: &tokio::runtime::Runtime, value: &SerializedValue) -> u64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("size.db");
    rt.block_on(async {
        let saver = SqliteSaver::from_path(&path).await.expect("open");
        checkpoints::put_all(&saver, "size", checkpoints::history(HISTORY, value))
            .await
            .expect("history");
    });
    let conn = rusqlite::Connection::open(&path).expect("open raw");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint wal");
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .expect("pages");
    let size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .expect("page size");
    (pages * size) as u64 / HISTORY as u64
}

/// The physical limit: plain rusqlite inserts of the bytes one put stores (the checkpoint JSON
/// and one changed value), one transaction per row, in the same WAL/NORMAL mode.
fn rusqlite_limit(dir: &std::path::Path, value: &SerializedValue) {
    let conn = rusqlite::Connection::open(dir.join("limit.db")).expect("open");
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
         CREATE TABLE t (id TEXT PRIMARY KEY, checkpoint TEXT NOT NULL, blob BLOB NOT NULL);",
    )
    .expect("schema");
    let items = checkpoints::history(PUTS, value);
    let rows: Vec<(String, String)> = items
        .iter()
        .map(|(cp, _, _)| {
            let mut bare = cp.clone();
            bare.channel_values.clear();
            (cp.id.clone(), serde_json::to_string(&bare).expect("json"))
        })
        .collect();
    let start = Instant::now();
    for (id, json) in &rows {
        conn.execute("BEGIN", []).expect("begin");
        conn.prepare_cached("INSERT INTO t VALUES (?1, ?2, ?3)")
            .expect("prepare")
            .execute(rusqlite::params![id, json, &value.bytes[..]])
            .expect("insert");
        conn.execute("COMMIT", []).expect("commit");
    }
    let per_sec = PUTS as f64 / start.elapsed().as_secs_f64();
    println!(
        "\nrusqlite limit line: {per_sec:.0} single-row transactions/s ({} channels, one changes per put)",
        CHANNELS.len()
    );
}

/// Bytes per checkpoint of a fresh PostgreSQL schema holding one 1,000-checkpoint thread:
/// the three tables with their indexes and TOAST.
fn postgres_bytes_per_checkpoint(
    rt: &tokio::runtime::Runtime,
    url: &str,
    value: &SerializedValue,
) -> u64 {
    rt.block_on(async {
        let saver = postgres_saver(url).await;
        checkpoints::put_all(&saver, "size", checkpoints::history(HISTORY, value))
            .await
            .expect("history");
        let bytes: i64 = sqlx::query_scalar(
            "SELECT pg_total_relation_size('checkpoints') + pg_total_relation_size('checkpoint_blobs')
                + pg_total_relation_size('checkpoint_writes')",
        )
        .fetch_one(saver.pool())
        .await
        .expect("sizes");
        bytes as u64 / HISTORY as u64
    })
}

/// The physical limit: `pgbench` inserting one row per transaction (the checkpoint JSON and
/// one changed value, as one put stores) into a bare table on the same server, with one
/// client and with 16.
fn pgbench_limit(rt: &tokio::runtime::Runtime, url: &str, value: &SerializedValue) {
    let schema = format!("pgbench_{}", uuid::Uuid::new_v4().simple());
    let checkpoint = {
        let (cp, _, _) = checkpoints::history(1, value).remove(0);
        let mut bare = cp;
        bare.channel_values.clear();
        serde_json::to_string(&bare).expect("json")
    };
    rt.block_on(async {
        let saver = PostgresSaver::from_url(url).await.expect("connect");
        sqlx::raw_sql(&format!(
            "CREATE SCHEMA {schema};
             CREATE TABLE {schema}.t (id bigserial PRIMARY KEY, checkpoint jsonb NOT NULL, blob bytea NOT NULL);
             CREATE TABLE {schema}.one (checkpoint jsonb NOT NULL, blob bytea NOT NULL);"
        ))
        .execute(saver.pool())
        .await
        .expect("limit tables");
        sqlx::query(&format!("INSERT INTO {schema}.one VALUES ($1::jsonb, $2)"))
            .bind(&checkpoint)
            .bind(value.bytes.as_ref())
            .execute(saver.pool())
            .await
            .expect("limit row");
    });
    let script = std::env::temp_dir().join(format!("{schema}.sql"));
    std::fs::write(
        &script,
        format!(
            "INSERT INTO {schema}.t (checkpoint, blob) SELECT checkpoint, blob FROM {schema}.one;\n"
        ),
    )
    .expect("script");
    for clients in [1, WRITERS] {
        let out = std::process::Command::new("pgbench")
            .args([
                "-n",
                "-T",
                "5",
                "-M",
                "prepared",
                "-c",
                &clients.to_string(),
            ])
            .args(["-j", "2", "-f"])
            .arg(&script)
            .arg(url)
            .output();
        match out {
            Ok(out) if out.status.success() => {
                let text = String::from_utf8_lossy(&out.stdout);
                let tps = text
                    .lines()
                    .find(|l| l.starts_with("tps"))
                    .unwrap_or("tps = ?");
                println!("pgbench limit line, {clients} client(s): {tps}");
            }
            Ok(out) => eprintln!("pgbench failed: {}", String::from_utf8_lossy(&out.stderr)),
            Err(e) => eprintln!("pgbench not run: {e}"),
        }
    }
    let _ = std::fs::remove_file(&script);
}

/// Bytes of server memory per checkpoint (`MEMORY USAGE` of every key) of a fresh prefix
/// holding one 1,000-checkpoint thread.
fn redis_bytes_per_checkpoint(
    rt: &tokio::runtime::Runtime,
    url: &str,
    value: &SerializedValue,
) -> u64 {
    rt.block_on(async {
        let saver = redis_saver(url).await;
        checkpoints::put_all(&saver, "size", checkpoints::history(HISTORY, value))
            .await
            .expect("history");
        let mut conn = saver.connection();
        let pattern = format!("{}:*", saver.config().prefix);
        let (mut cursor, mut bytes) = (0u64, 0u64);
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .expect("scan");
            for key in keys {
                let used: Option<u64> = redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(&key)
                    .arg("SAMPLES")
                    .arg(0)
                    .query_async(&mut conn)
                    .await
                    .expect("memory usage");
                bytes += used.unwrap_or(0);
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        bytes / HISTORY as u64
    })
}

/// The physical limit: `redis-benchmark`'s HSET with 16 commands per pipeline, on the same
/// server.
fn redis_benchmark_limit(url: &str) {
    // redis://host:port/... (the benchmark tool takes host and port apart).
    let authority = url
        .trim_start_matches("redis://")
        .split('/')
        .next()
        .unwrap_or("")
        .rsplit('@')
        .next()
        .unwrap_or("");
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "6379"));
    let out = std::process::Command::new("redis-benchmark")
        .args([
            "-h", host, "-p", port, "-t", "hset", "-P", "16", "-n", "200000", "-q",
        ])
        .output();
    match out {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text
                .split(['\r', '\n'])
                .rfind(|l| l.contains("requests per second"))
                .unwrap_or("?");
            println!(
                "redis-benchmark limit line (HSET, pipeline 16): {}",
                line.trim()
            );
        }
        Ok(out) => eprintln!(
            "redis-benchmark failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("redis-benchmark not run: {e}"),
    }
}
