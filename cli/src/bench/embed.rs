//! The local MiniLM embedder: sentences/s at batch 1 and batch 32 on memory-like sentences,
//! the FLOP rate that is (from the model's shapes and each sentence's token count), and its
//! share of this machine's peak f32 matrix-multiply rate, measured in the same run with a
//! large candle matmul on the same threads (and, for comparison, a matmul of the model's own
//! feed-forward shape at batch 32).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, Result};
use candle_core::{Device, Tensor};
use indicatif::ProgressBar;
use serde::Deserialize;
use waypoint_store::embed::{MINILM_BATCH, MiniLmEmbedder};

use super::Scale;
use super::measure::{Table, median};

/// Steps this group reports to its progress bar.
pub(crate) fn steps() -> u64 {
    5
}

/// The BERT shapes the FLOP count needs, from the model's config.json.
#[derive(Deserialize)]
struct Shapes {
    hidden_size: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
}

impl Shapes {
    /// Multiply-add FLOPs (2 per multiply-add) of the encoder on one sentence of `n` tokens:
    /// the Q, K, V and output projections, the feed-forward pair, and the attention products
    /// (embeddings, norms and softmax are left out: under 1% at these sizes).
    fn flops(&self, n: usize) -> f64 {
        let (n, h, i) = (
            n as f64,
            self.hidden_size as f64,
            self.intermediate_size as f64,
        );
        let layer = 8.0 * n * h * h + 4.0 * n * h * i + 4.0 * n * n * h;
        layer * self.num_hidden_layers as f64
    }
}

/// Side of the square f32 matrices multiplied for the peak rate.
const MATMUL_SIDE: usize = 1024;

/// Measures the model in `dir` and the matmul peak.
pub(crate) fn run(scale: &Scale, dir: &Path, bar: &ProgressBar) -> Result<Table> {
    let threads = candle_core::utils::get_num_threads();
    let texts = sentences(scale.embed_texts);
    let mut table = Table::new(
        "embed",
        "model",
        format!(
            "{} memory-like sentences embedded with MiniLmEmbedder (CPU, {threads} threads), at \
             batch 1 and batch {MINILM_BATCH}, median of {} passes; model GFLOP/s counts the \
             encoder's matmul FLOPs for each sentence's real tokens (the embedder packs a \
             batch's texts without padding, so these are all the tokens it computes); peak is \
             the median rate of a {MATMUL_SIDE}x{MATMUL_SIDE}x{MATMUL_SIDE} f32 candle matmul \
             on the same {threads} threads in the same run, and the model-shaped peak that of \
             one batch-{MINILM_BATCH} feed-forward product (tokens x hidden x intermediate).",
            texts.len(),
            scale.samples
        ),
    );
    bar.set_message("embed · load");
    let embedder = MiniLmEmbedder::open(dir)?;
    let config = std::fs::read(dir.join("config.json"))
        .with_context(|| format!("cannot read {}/config.json", dir.display()))?;
    let shapes: Shapes = serde_json::from_slice(&config).context("config.json has no shapes")?;
    let counts = embedder.token_counts(&texts)?;
    let flops: f64 = counts.iter().map(|&n| shapes.flops(n)).sum();
    let batch_tokens = counts.iter().sum::<usize>() * MINILM_BATCH / counts.len().max(1);
    let column = dir
        .file_name()
        .map_or_else(|| "minilm".to_owned(), |n| n.to_string_lossy().into_owned());
    bar.inc(1);

    bar.set_message("embed · matmul peak");
    let peak = matmul_gflops(MATMUL_SIDE, MATMUL_SIDE, MATMUL_SIDE, scale.samples)?;
    bar.inc(1);
    bar.set_message("embed · model-shaped peak");
    let shaped = matmul_gflops(
        batch_tokens.max(1),
        shapes.hidden_size,
        shapes.intermediate_size,
        scale.samples,
    )?;
    bar.inc(1);

    for batch in [1, MINILM_BATCH] {
        bar.set_message(format!("embed · batch {batch}"));
        embedder.embed_blocking(&texts[..texts.len().min(batch * 2)], batch)?;
        let mut seconds = Vec::with_capacity(scale.samples);
        for _ in 0..scale.samples {
            let start = Instant::now();
            embedder.embed_blocking(&texts, batch)?;
            seconds.push(start.elapsed().as_secs_f64());
        }
        let rates: Vec<f64> = seconds.iter().map(|s| texts.len() as f64 / s).collect();
        let gflops: Vec<f64> = seconds.iter().map(|s| flops / s / 1e9).collect();
        let share = median(&gflops) / median(&peak) * 100.0;
        let label = format!("batch {batch}");
        table.rate(&format!("embed ({label})"), "sentences/s", &column, rates);
        table.rate(
            &format!("model FLOP rate ({label})"),
            "GFLOP/s",
            &column,
            gflops,
        );
        table.rate(
            &format!("share of peak ({label})"),
            "%",
            &column,
            vec![share],
        );
        bar.inc(1);
    }
    table.rate("matmul peak (f32)", "GFLOP/s", &column, peak);
    table.rate(
        &format!(
            "model-shaped matmul ({batch_tokens}x{}x{})",
            shapes.hidden_size, shapes.intermediate_size
        ),
        "GFLOP/s",
        &column,
        shaped,
    );
    Ok(table)
}

/// GFLOP/s of `samples` timed products of random f32 `[m, k]` and `[k, n]` matrices (after a
/// warm-up).
fn matmul_gflops(m: usize, k: usize, n: usize, samples: usize) -> Result<Vec<f64>> {
    let a = Tensor::rand(-1f32, 1f32, (m, k), &Device::Cpu)?;
    let b = Tensor::rand(-1f32, 1f32, (k, n), &Device::Cpu)?;
    a.matmul(&b)?;
    let flops = 2.0 * (m * k * n) as f64;
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples.max(3) {
        let start = Instant::now();
        std::hint::black_box(a.matmul(&b)?);
        out.push(flops / start.elapsed().as_secs_f64() / 1e9);
    }
    Ok(out)
}

/// `count` distinct sentences like the facts an agent keeps about its users (9 to 25 tokens).
fn sentences(count: usize) -> Vec<String> {
    const WHO: [&str; 8] = [
        "Alice",
        "The user",
        "My sister",
        "Bob",
        "Our team",
        "The customer",
        "I",
        "She",
    ];
    const WHAT: [&str; 8] = [
        "loves hiking in",
        "wants to move to",
        "booked a hotel in",
        "has never been to",
        "writes about the food of",
        "is learning the language spoken in",
        "asked for a train ticket to",
        "prefers the winters in",
    ];
    const WHERE: [&str; 8] = [
        "the Alps",
        "Kyoto",
        "Lisbon",
        "the Dolomites",
        "Patagonia",
        "Reykjavik",
        "Cape Town",
        "Vancouver",
    ];
    (0..count)
        .map(|i| {
            let (who, what, place) = (WHO[i % 8], WHAT[i / 8 % 8], WHERE[i / 64 % 8]);
            match i % 3 {
                0 => format!("{who} {what} {place}."),
                1 => format!("{who} {what} {place}, mostly in early autumn with two friends."),
                _ => format!(
                    "{who} {what} {place} because the trails are quiet, the views are wide and \
                     the coffee is good."
                ),
            }
        })
        .collect()
}
