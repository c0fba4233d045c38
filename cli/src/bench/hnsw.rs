//! The store's vector index on the `waypoint_workloads::ann` workload: the time to load and
//! build the HNSW graph, then single-thread queries/s and recall@k of the graph (at the
//! store's default `ef_search`) beside the exact scan.

use std::time::Instant;

use anyhow::Result;
use indicatif::ProgressBar;
use waypoint_store::index::VectorIndex;
use waypoint_store::{AnnConfig, Distance};
use waypoint_workloads::ann::{self, EF_CONSTRUCTION, M};

use super::Scale;
use super::measure::{Better, Table, median};

/// Steps this group reports to its progress bar.
pub(crate) fn steps() -> u64 {
    4
}

/// Builds the index and measures its searches.
pub(crate) fn run(scale: &Scale, bar: &ProgressBar) -> Result<Table> {
    let size = scale.ann;
    let ef = AnnConfig::default().ef_search;
    let graph = format!("hnsw (ef_search {ef})");
    let mut table = Table::new(
        "hnsw",
        "index",
        format!(
            "{} vectors of {} dimensions in {} Gaussian clusters, {} queries, L2; M {M}, \
             ef_construction {EF_CONSTRUCTION}, built on every core; searches on one thread, \
             median of {} passes.",
            size.vectors, size.dims, size.clusters, size.queries, scale.samples
        ),
    );

    bar.set_message(format!("hnsw · dataset of {} vectors", size.vectors));
    let (vectors, queries) = ann::dataset(size);
    let config = AnnConfig {
        m: M,
        ef_construction: EF_CONSTRUCTION,
        // The graph answers at every size, so a small run still measures it.
        flat_threshold: 0,
        ..AnnConfig::default()
    };
    bar.inc(1);

    bar.set_message("hnsw · build");
    let mut builds = Vec::new();
    let mut index = None;
    for _ in 0..scale.builds {
        let fresh = VectorIndex::new(size.dims, Distance::L2, config);
        let items = ann::items(&vectors);
        let start = Instant::now();
        fresh.load(items);
        builds.push(start.elapsed().as_secs_f64());
        index = Some(fresh);
    }
    let Some(index) = index else {
        anyhow::bail!("no build was run");
    };
    let value = median(&builds);
    table.add("build", "s", Better::Lower, &graph, value, builds);
    bar.inc(1);

    bar.set_message("hnsw · exact scan");
    let mut exact_rates = Vec::new();
    let mut truth = Vec::new();
    for _ in 0..scale.samples {
        let start = Instant::now();
        truth = ann::exact(&index, &queries, size.k);
        exact_rates.push(queries.len() as f64 / start.elapsed().as_secs_f64());
    }
    bar.inc(1);

    bar.set_message("hnsw · search");
    ann::pass(&index, &queries, &truth, size.k, ef);
    let (mut rates, mut recalls) = (Vec::new(), Vec::new());
    for _ in 0..scale.samples {
        let (qps, recall) = ann::pass(&index, &queries, &truth, size.k, ef);
        rates.push(qps);
        recalls.push(recall);
    }
    table.rate("queries/s (1 thread)", "queries/s", &graph, rates);
    table.rate(
        "queries/s (1 thread)",
        "queries/s",
        "exact scan",
        exact_rates,
    );
    let recall_row = format!("recall@{}", size.k);
    table.rate(&recall_row, "share", &graph, recalls);
    table.rate(&recall_row, "share", "exact scan", vec![1.0]);
    bar.inc(1);
    Ok(table)
}
