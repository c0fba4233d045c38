//! Timed loops and the tables they fill: every figure is the median (or a percentile) of
//! repeated samples taken after a warm-up.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

/// Whether a larger figure is the better one (throughput) or the smaller (latency, time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Better {
    /// Throughput, recall.
    Higher,
    /// Latency, build time.
    Lower,
}

/// One figure of one column (a backend, a format, an index).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Cell {
    /// The column.
    pub(crate) column: String,
    /// The reported figure (median or percentile of `samples`).
    pub(crate) value: f64,
    /// Every raw sample, in the row's unit.
    pub(crate) samples: Vec<f64>,
    /// The same workload measured on LangGraph (`--peers`), in the same run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) peers: Vec<Peer>,
}

/// A peer's figure for a cell: LangGraph's side of the same workload on the same backend.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Peer {
    /// Who: `LangGraph`, `LangGraph (messages)`.
    pub(crate) name: String,
    /// The reported figure, the same statistic as the cell's.
    pub(crate) value: f64,
    /// Every raw sample.
    pub(crate) samples: Vec<f64>,
}

impl Peer {
    /// How many times faster ours (`value`) is than this peer's figure.
    pub(crate) fn ratio(&self, ours: f64, better: Better) -> f64 {
        match better {
            Better::Higher => ours / self.value,
            Better::Lower => self.value / ours,
        }
    }
}

/// One workload across the columns.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Row {
    /// What is measured, e.g. `put (sequential)`.
    pub(crate) workload: String,
    /// The unit of every figure, e.g. `puts/s`.
    pub(crate) unit: String,
    /// Which way is better.
    pub(crate) better: Better,
    /// The percentile (0..=1) each figure is of its samples.
    pub(crate) percentile: f64,
    /// The figures, in column order.
    pub(crate) cells: Vec<Cell>,
}

/// The results of one group: a table of workloads by columns.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Table {
    /// The group's name (`serde`, `checkpoint`, ...).
    pub(crate) group: String,
    /// A sentence saying what was measured and at which size.
    pub(crate) about: String,
    /// What the columns are (`backend`, `format`, `index`).
    pub(crate) column_kind: String,
    /// The columns, in order of first appearance.
    pub(crate) columns: Vec<String>,
    /// The workloads, in order of first appearance.
    pub(crate) rows: Vec<Row>,
    /// Backends that failed part-way, and why.
    pub(crate) notes: Vec<String>,
    /// Seconds the group took, LangGraph's side included.
    pub(crate) seconds: f64,
}

impl Table {
    /// An empty table.
    pub(crate) fn new(group: &str, column_kind: &str, about: String) -> Table {
        Table {
            group: group.to_owned(),
            about,
            column_kind: column_kind.to_owned(),
            columns: Vec::new(),
            rows: Vec::new(),
            notes: Vec::new(),
            seconds: 0.0,
        }
    }

    /// Records `value` (summarising `samples`) for `workload` in `column`.
    pub(crate) fn add(
        &mut self,
        workload: &str,
        unit: &str,
        better: Better,
        column: &str,
        value: f64,
        samples: Vec<f64>,
    ) {
        self.add_at(workload, unit, better, 0.5, column, value, samples);
    }

    /// [`add`](Self::add) of a figure that is the percentile `p` of its samples.
    #[expect(clippy::too_many_arguments, reason = "one row's every field")]
    fn add_at(
        &mut self,
        workload: &str,
        unit: &str,
        better: Better,
        p: f64,
        column: &str,
        value: f64,
        samples: Vec<f64>,
    ) {
        if !self.columns.iter().any(|c| c == column) {
            self.columns.push(column.to_owned());
        }
        let cell = Cell {
            column: column.to_owned(),
            value,
            samples,
            peers: Vec::new(),
        };
        match self.rows.iter_mut().find(|r| r.workload == workload) {
            Some(row) => row.cells.push(cell),
            None => self.rows.push(Row {
                workload: workload.to_owned(),
                unit: unit.to_owned(),
                better,
                percentile: p,
                cells: vec![cell],
            }),
        }
    }

    /// Records the median of rate samples (higher is better).
    pub(crate) fn rate(&mut self, workload: &str, unit: &str, column: &str, samples: Vec<f64>) {
        let value = median(&samples);
        self.add(workload, unit, Better::Higher, column, value, samples);
    }

    /// Records the percentile `p` (0..=1) of latency samples in milliseconds.
    pub(crate) fn latency(&mut self, workload: &str, column: &str, p: f64, samples: Vec<f64>) {
        let value = percentile(&samples, p);
        self.add_at(workload, "ms", Better::Lower, p, column, value, samples);
    }

    /// Records a peer's samples of `workload` in `column` (recorded before), summarised as
    /// the row's own figures are.
    pub(crate) fn peer(&mut self, workload: &str, column: &str, name: &str, samples: Vec<f64>) {
        let Some(row) = self.rows.iter_mut().find(|r| r.workload == workload) else {
            return;
        };
        let value = percentile(&samples, row.percentile);
        if let Some(cell) = row.cells.iter_mut().find(|c| c.column == column) {
            cell.peers.push(Peer {
                name: name.to_owned(),
                value,
                samples,
            });
        }
    }

    /// Whether any cell holds a peer's figure.
    pub(crate) fn has_peers(&self) -> bool {
        self.rows
            .iter()
            .any(|r| r.cells.iter().any(|c| !c.peers.is_empty()))
    }
}

/// The median of `samples` (0 when empty).
pub(crate) fn median(samples: &[f64]) -> f64 {
    percentile(samples, 0.5)
}

/// The nearest-rank percentile `p` (0..=1) of `samples` (0 when empty).
pub(crate) fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (sorted.len() as f64 * p).ceil() as usize;
    match sorted.len() {
        0 => 0.0,
        n => sorted[rank.clamp(1, n) - 1],
    }
}

/// `units` done in `took`, per second.
pub(crate) fn per_second(units: usize, took: Duration) -> f64 {
    units as f64 / took.as_secs_f64().max(1e-9)
}

/// Milliseconds each of `samples` calls of `call` (given the call's number) takes, after
/// `warmup` calls.
pub(crate) async fn latencies(
    warmup: usize,
    samples: usize,
    mut call: impl AsyncFnMut(usize) -> Result<()>,
) -> Result<Vec<f64>> {
    for i in 0..warmup {
        call(i).await?;
    }
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        let start = Instant::now();
        call(i).await?;
        out.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(out)
}

/// Units per second of a fast synchronous `op` (returning the units it did), as `samples`
/// samples each repeating `op` for at least `window`, after one warm-up window.
pub(crate) fn throughput(
    window: Duration,
    samples: usize,
    mut op: impl FnMut() -> Result<usize>,
) -> Result<Vec<f64>> {
    let mut sample = || -> Result<f64> {
        let start = Instant::now();
        let mut units = 0usize;
        while start.elapsed() < window {
            units += std::hint::black_box(op()?);
        }
        Ok(units as f64 / start.elapsed().as_secs_f64())
    };
    sample()?;
    (0..samples).map(|_| sample()).collect()
}

/// A figure with as many digits as it needs: `12,345`, `123`, `12.3`, `1.23`, `0.0123`.
pub(crate) fn number(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    if value.abs() >= 1000.0 {
        let digits = format!("{:.0}", value.abs());
        let mut grouped = String::new();
        for (i, d) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(d);
        }
        let sign = if value < 0.0 { "-" } else { "" };
        return format!("{sign}{grouped}");
    }
    let decimals = match value.abs() {
        v if v >= 100.0 => 0,
        v if v >= 10.0 => 1,
        v if v >= 1.0 || v == 0.0 => 2,
        v => (2 - v.log10().floor() as i32).max(2) as usize,
    };
    format!("{value:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_significant_digits() {
        assert_eq!(number(1_234_567.4), "1,234,567");
        assert_eq!(number(123.4), "123");
        assert_eq!(number(12.34), "12.3");
        assert_eq!(number(1.234), "1.23");
        assert_eq!(number(0.01234), "0.0123");
        assert_eq!(number(0.0), "0.00");
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(median(&samples), 50.0);
        assert_eq!(percentile(&samples, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn rows_and_columns_keep_their_first_order() {
        let mut table = Table::new("g", "backend", String::new());
        table.rate("put", "puts/s", "memory", vec![1.0, 3.0, 2.0]);
        table.rate("put", "puts/s", "sqlite", vec![1.0]);
        table.latency("get p50", "memory", 0.5, vec![0.5]);
        assert_eq!(table.columns, ["memory", "sqlite"]);
        assert_eq!(table.rows.len(), 2);
        assert_eq!(table.rows[0].cells[0].value, 2.0);
    }
}
