//! What a connection path costs: `put` and `get_tuple` latency (p50, p99) and sequential
//! throughput against each URL given (any backend `waypoint_runtime::connect` opens: direct,
//! through a pooler, over TLS, on a cluster), measured in interleaved rounds (A, B, C, A, B,
//! C, ...) so that the machine's noise falls on every URL alike, with ratios to the first.
//!
//! ```text
//! cargo run --release -p waypoint-runtime --features postgres,redis --example connections -- \
//!     postgres://u@127.0.0.1:5432/db \
//!     'postgres://u@127.0.0.1:6432/db?transaction_pooler=true' \
//!     'postgres://u@localhost:5433/db?sslmode=verify-full&sslrootcert=ca.pem'
//! ```
//!
//! Each URL gets a thread of its own (deleted at the end) whose checkpoints each carry a
//! 1 KiB channel value; `get_tuple` reads the thread's newest.

use std::sync::Arc;
use std::time::{Duration, Instant};

use waypoint_runtime::checkpoint::raw::redact_url;
use waypoint_runtime::checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Result, SerializedValue,
};

/// Measured rounds per URL (after one warm-up round).
const ROUNDS: usize = 10;
/// Operations of each kind per URL and round.
const PER_ROUND: usize = 300;

/// One URL's saver, its thread, the config its next put extends, and its latencies.
struct Target {
    url: String,
    thread: String,
    saver: Arc<dyn CheckpointSaver>,
    head: CheckpointConfig,
    step: i64,
    puts: Vec<Duration>,
    gets: Vec<Duration>,
}

impl Target {
    async fn open(
        url: &str,
        index: usize,
    ) -> std::result::Result<Self, Box<dyn std::error::Error>> {
        let thread = format!("bench-connections-{}-{index}", std::process::id());
        Ok(Target {
            url: redact_url(url),
            head: CheckpointConfig::new(&thread),
            thread,
            saver: waypoint_runtime::connect(url).await?.checkpointer,
            step: 0,
            puts: Vec::new(),
            gets: Vec::new(),
        })
    }

    /// One round: `PER_ROUND` puts, then as many reads of the newest; kept unless warming up.
    async fn round(&mut self, keep: bool) -> Result<()> {
        let value = SerializedValue::new("bytes", vec![7u8; 1024]);
        for _ in 0..PER_ROUND {
            self.step += 1;
            let mut checkpoint = Checkpoint::new(self.step);
            let version = ChannelVersion::new(format!("{:032}", self.step));
            checkpoint
                .channel_values
                .insert("messages".into(), value.clone());
            checkpoint
                .channel_versions
                .insert("messages".into(), version.clone());
            let new_versions = [("messages".to_owned(), version)].into();
            let metadata = CheckpointMetadata::new(CheckpointSource::Loop, self.step);
            let start = Instant::now();
            self.head = self
                .saver
                .put(&self.head, checkpoint, metadata, new_versions)
                .await?;
            if keep {
                self.puts.push(start.elapsed());
            }
        }
        let latest = CheckpointConfig::new(&self.thread);
        for _ in 0..PER_ROUND {
            let start = Instant::now();
            let tuple = self.saver.get_tuple(&latest).await?;
            if keep {
                self.gets.push(start.elapsed());
            }
            assert!(tuple.is_some(), "the thread has checkpoints");
        }
        Ok(())
    }

    /// Deletes the thread made for the measurement.
    async fn delete(&self) {
        if let Err(e) = self.saver.delete_thread(&self.thread).await {
            eprintln!("could not delete thread {}: {e}", self.thread);
        }
    }
}

/// p50, p99 (microseconds) and operations per second of sequential calls.
fn figures(samples: &mut [Duration]) -> (f64, f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 * q) as usize).min(samples.len() - 1);
        samples[i].as_secs_f64() * 1e6
    };
    let total: f64 = samples.iter().map(Duration::as_secs_f64).sum();
    (at(0.50), at(0.99), samples.len() as f64 / total)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        eprintln!("usage: connections <url>...  (the first is the baseline)");
        std::process::exit(2);
    }
    let mut targets = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        targets.push(Target::open(url, i).await?);
    }
    for round in 0..=ROUNDS {
        for target in &mut targets {
            target.round(round > 0).await?;
        }
    }
    for target in &targets {
        target.delete().await;
    }

    println!(
        "{ROUNDS} rounds x {PER_ROUND} sequential ops per URL, interleaved; latencies in µs, \
         ratios to A"
    );
    println!(
        "{:<3} {:>8} {:>8} {:>8} {:>7} | {:>8} {:>8} {:>8} {:>7}",
        "", "put p50", "put p99", "put/s", "x A", "get p50", "get p99", "get/s", "x A"
    );
    let mut base = None;
    for (i, target) in targets.iter_mut().enumerate() {
        let put = figures(&mut target.puts);
        let get = figures(&mut target.gets);
        let (base_put, base_get) = *base.get_or_insert((put.0, get.0));
        println!(
            "{:<3} {:>8.0} {:>8.0} {:>8.0} {:>7.2} | {:>8.0} {:>8.0} {:>8.0} {:>7.2}",
            char::from(b'A' + (i % 26) as u8),
            put.0,
            put.1,
            put.2,
            put.0 / base_put,
            get.0,
            get.1,
            get.2,
            get.0 / base_get,
        );
    }
    for (i, target) in targets.iter().enumerate() {
        println!("{}: {}", char::from(b'A' + (i % 26) as u8), target.url);
    }
    Ok(())
}
