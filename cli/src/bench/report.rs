//! The results folder: `REPORT.md` (header, one table per group, skipped backends, chart
//! links), one SVG chart per workload, and `results.json` with every raw sample.

use std::fmt::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::Serialize;

use super::measure::{Better, Cell, Peer, Row, Table, number};
use super::peers::LANGGRAPH;
use super::{limits, svg};

/// Where and on what the run happened.
#[derive(Debug, Serialize)]
pub(crate) struct Header {
    /// UTC date and time of the start, `YYYY-MM-DD HH:MM UTC`.
    pub(crate) date: String,
    /// Logical cores.
    pub(crate) cores: usize,
    /// The CPU's model name, when Linux reports it.
    pub(crate) cpu: Option<String>,
    /// Total memory in bytes, when Linux reports it.
    pub(crate) memory_bytes: Option<u64>,
    /// `git rev-parse --short HEAD` (with `-dirty` for local changes), when in a checkout.
    pub(crate) commit: Option<String>,
    /// `full`, `quick` or `smoke`.
    pub(crate) mode: String,
    /// The backends measured.
    pub(crate) backends: Vec<String>,
    /// One line per skipped backend.
    pub(crate) skipped: Vec<String>,
    /// Seconds the whole run took.
    pub(crate) wall_seconds: f64,
    /// The command line that made this run (URL passwords hidden).
    pub(crate) command: String,
    /// The interpreter of LangGraph's side, when `--peers` ran it.
    pub(crate) peer_python: Option<String>,
    /// Why LangGraph has no figure, each with the `workload on backend` it holds for.
    pub(crate) peer_notes: Vec<(String, Vec<String>)>,
}

impl Header {
    /// The header of a run starting now, as far as this machine tells.
    pub(crate) fn now(mode: &str, backends: Vec<String>, skipped: Vec<String>) -> Header {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, name)| name.trim().to_owned());
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let line = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_owned();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map(|kib| kib * 1024);
        Header {
            date: utc_now(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            memory_bytes,
            commit: git_commit(),
            mode: mode.to_owned(),
            backends,
            skipped,
            wall_seconds: 0.0,
            command: String::new(),
            peer_python: None,
            peer_notes: Vec::new(),
        }
    }
}

/// Everything `results.json` holds.
#[derive(Serialize)]
struct Results<'a> {
    header: &'a Header,
    groups: &'a [Table],
}

/// Writes `REPORT.md`, the charts and `results.json` into `dir` (created if missing).
pub(crate) fn write(dir: &Path, header: &Header, tables: &[Table]) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the results folder {}", dir.display()))?;
    let limits = Limits::of(tables);
    let mut md = header_markdown(header);
    md.push_str(&summary_markdown(tables, &limits));
    for table in tables {
        md.push_str(&table_markdown_with(table, &limits));
        let mut links = Vec::new();
        for row in &table.rows {
            let file = format!("{}-{}.svg", table.group, slug(&row.workload));
            let bars = chart_row(&table.group, row, &limits);
            write_file(&dir.join(&file), &svg::chart(&table.group, &bars))?;
            links.push(format!("[{}]({file})", row.workload));
        }
        if !links.is_empty() {
            let _ = writeln!(md, "Charts: {}\n", links.join(" · "));
        }
    }
    write_file(&dir.join("REPORT.md"), &md)?;
    let json = serde_json::to_string_pretty(&Results {
        header,
        groups: tables,
    })
    .context("cannot encode the results")?;
    write_file(&dir.join("results.json"), &json)
}

/// Writes `text` to `path`, naming the path on failure.
fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The title and the run's description.
fn header_markdown(h: &Header) -> String {
    let mut md = String::from("# Waypoint persistence benchmarks\n\n");
    let memory = h.memory_bytes.map_or("unknown memory".to_owned(), |b| {
        format!("{:.1} GiB memory", b as f64 / (1u64 << 30) as f64)
    });
    let cpu = h
        .cpu
        .as_deref()
        .map_or(String::new(), |c| format!(" ({c})"));
    let _ = writeln!(md, "- Date: {}", h.date);
    let _ = writeln!(md, "- Machine: {} cores{cpu}, {memory}", h.cores);
    let _ = writeln!(
        md,
        "- Commit: {}",
        h.commit
            .as_deref()
            .unwrap_or("unknown (not a git checkout)")
    );
    let _ = writeln!(
        md,
        "- Mode: {} (`waypoint bench{}`)",
        h.mode,
        match h.mode.as_str() {
            "full" => "",
            "quick" => " --quick",
            _ => " --smoke",
        }
    );
    if !h.command.is_empty() {
        let _ = writeln!(md, "- Command: `{}`", h.command);
    }
    if let Some(python) = &h.peer_python {
        let _ = writeln!(
            md,
            "- LangGraph's side: `{python}` running `benches/peers/waypoint_peers.py`, one \
             sample of LangGraph's after each of ours"
        );
    }
    let _ = writeln!(md, "- Wall time: {:.0} s", h.wall_seconds);
    let _ = writeln!(md, "- Backends: {}", h.backends.join(", "));
    if h.skipped.is_empty() {
        md.push_str("- Skipped: none\n");
    } else {
        md.push_str("- Skipped:\n");
        for line in &h.skipped {
            let _ = writeln!(md, "  - {line}");
        }
    }
    md.push_str(
        "\nEvery figure is the median of repeated samples after a warm-up (p99 where named); \
         ↑ higher is better, ↓ lower is better. Raw samples are in `results.json`.\n\n",
    );
    if !h.peer_notes.is_empty() {
        md.push_str("Without a LangGraph figure:\n\n");
        for (why, what) in &h.peer_notes {
            let _ = writeln!(md, "- {why}: {}", what.join(", "));
        }
        md.push('\n');
    }
    md
}

/// The limit tables' figures by `(workload, column, unit)`: a cell of ours with the same
/// three is reported as a share of it.
struct Limits<'a> {
    cells: Vec<(&'a str, &'a str, &'a str, f64)>,
}

impl<'a> Limits<'a> {
    /// The cells of the `limits` group, if it ran.
    fn of(tables: &'a [Table]) -> Limits<'a> {
        let cells = tables
            .iter()
            .filter(|t| t.group == "limits")
            .flat_map(|t| &t.rows)
            .flat_map(|row| {
                row.cells.iter().map(move |c| {
                    let (w, u) = (row.workload.as_str(), row.unit.as_str());
                    (w, c.column.as_str(), u, c.value)
                })
            })
            .collect();
        Limits { cells }
    }

    /// The limit for `cell` of `row` in `group`, if one was measured.
    fn of_cell(&self, group: &str, row: &Row, cell: &Cell) -> Option<f64> {
        if group == "limits" {
            return None;
        }
        self.find(&row.workload, &cell.column, &row.unit)
            .filter(|v| *v > 0.0)
    }

    /// The share of its limit `cell` of `row` in `group` reaches: ours from the samples the
    /// limits group took in turns with the limit's when it did (the same moments of a
    /// machine whose speed swings), else the cell's own figure.
    fn share(&self, group: &str, row: &Row, cell: &Cell) -> Option<f64> {
        if group == "limits" {
            // The row of ours in turns, beside its limit's.
            let workload = row.workload.strip_suffix(limits::ALTERNATING)?;
            let limit = self.find(workload, &cell.column, &row.unit)?;
            return (limit > 0.0).then(|| cell.value / limit);
        }
        let limit = self.of_cell(group, row, cell)?;
        let alongside = format!("{}{}", row.workload, limits::ALTERNATING);
        let ours = self
            .find(&alongside, &cell.column, &row.unit)
            .unwrap_or(cell.value);
        Some(ours / limit)
    }

    /// The figure of `(workload, column, unit)`, if measured.
    fn find(&self, workload: &str, column: &str, unit: &str) -> Option<f64> {
        self.cells
            .iter()
            .find(|(w, c, u, _)| *w == workload && *c == column && *u == unit)
            .map(|l| l.3)
    }
}

/// `ours / theirs (ratio)`, or ours alone without a peer; `· N% of limit` when a `share` of a
/// limit applies.
fn cell_text(row: &Row, cell: &Cell, peer: Option<&Peer>, share: Option<f64>) -> String {
    let mut text = number(cell.value);
    if let Some(peer) = peer {
        let ratio = peer.ratio(cell.value, row.better);
        let shown = if ratio >= 10.0 {
            format!("{ratio:.0}x")
        } else {
            format!("{ratio:.1}x")
        };
        let shown = if ratio >= 1.5 {
            format!("**{shown}**")
        } else {
            shown
        };
        let _ = write!(text, " / {} ({shown})", number(peer.value));
    }
    if let Some(share) = share {
        let _ = write!(text, " · {:.0}% of limit", 100.0 * share);
    }
    text
}

/// The names of the peers in `row`, in order of first appearance.
fn peer_names(row: &Row) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for peer in row.cells.iter().flat_map(|c| &c.peers) {
        if !names.contains(&peer.name.as_str()) {
            names.push(&peer.name);
        }
    }
    names
}

/// The lines of `row` in a table over `columns`: one per peer (`ours / theirs (ratio)`), or
/// one of ours alone; each as `(label suffix, cells)`.
fn row_lines(
    group: &str,
    row: &Row,
    columns: &[String],
    limits: &Limits,
) -> Vec<(String, Vec<String>)> {
    let names = peer_names(row);
    let lines: Vec<Option<&str>> = if names.is_empty() {
        vec![None]
    } else {
        names.into_iter().map(Some).collect()
    };
    lines
        .into_iter()
        .map(|name| {
            let label = match name {
                Some(n) if n != LANGGRAPH => format!(", vs {n}"),
                _ => String::new(),
            };
            let cells = columns
                .iter()
                .map(|column| {
                    let Some(cell) = row.cells.iter().find(|c| &c.column == column) else {
                        return "–".to_owned();
                    };
                    let peer = name.and_then(|n| cell.peers.iter().find(|p| p.name == n));
                    cell_text(row, cell, peer, limits.share(group, row, cell))
                })
                .collect();
            (label, cells)
        })
        .collect()
}

/// The ratios against LangGraph of every backend table in one table, laid out as README's
/// "Figures against LangGraph" (ours / LangGraph's (how many times faster ours is)); empty
/// when no peer ran.
fn summary_markdown(tables: &[Table], limits: &Limits) -> String {
    let peered: Vec<&Table> = tables
        .iter()
        .filter(|t| t.has_peers() && t.column_kind != "format")
        .collect();
    if peered.is_empty() {
        return String::new();
    }
    let mut columns: Vec<String> = Vec::new();
    for column in peered.iter().flat_map(|t| &t.columns) {
        if !columns.contains(column) {
            columns.push(column.clone());
        }
    }
    // Backends in their usual order, a mode beside its backend (`postgres (native)`).
    let order = ["memory", "sqlite", "postgres", "redis"];
    columns.sort_by_key(|c| {
        let base = c.split(' ').next().unwrap_or(c);
        order.iter().position(|o| *o == base).unwrap_or(order.len())
    });
    let mut md = String::from(
        "## Against LangGraph\n\nOurs / LangGraph's, same run, samples alternating, and how \
         many times faster ours is (bold from 1.5x); a figure alone: LangGraph has no such \
         saver or store here; `N% of limit`: ours as a share of the `limits` group's figure, \
         ours from that group's samples taken in turns with the limit's where it has them.\n\n",
    );
    let _ = writeln!(md, "| workload | {} |", columns.join(" | "));
    let _ = writeln!(md, "|---|{}", "---|".repeat(columns.len()));
    for table in peered {
        for row in &table.rows {
            for (label, cells) in row_lines(&table.group, row, &columns, limits) {
                let _ = writeln!(
                    md,
                    "| {} {}{label}, {} | {} |",
                    table.group,
                    row.workload,
                    row.unit,
                    cells.join(" | ")
                );
            }
        }
    }
    md.push('\n');
    md
}

/// `row` as chart bars: each column's figure, then its peers' and its limit.
fn chart_row(group: &str, row: &Row, limits: &Limits) -> Row {
    let mut cells = Vec::new();
    let bar = |column: String, value: f64| Cell {
        column,
        value,
        samples: Vec::new(),
        peers: Vec::new(),
    };
    for cell in &row.cells {
        cells.push(bar(cell.column.clone(), cell.value));
        for peer in &cell.peers {
            cells.push(bar(format!("{} · {}", cell.column, peer.name), peer.value));
        }
        if let Some(limit) = limits.of_cell(group, row, cell) {
            cells.push(bar(format!("{} · limit", cell.column), limit));
        }
    }
    Row {
        cells,
        ..row.clone()
    }
}

/// One group's section: heading, description, table and notes.
pub(crate) fn table_markdown(table: &Table) -> String {
    table_markdown_with(table, &Limits { cells: Vec::new() })
}

/// [`table_markdown`] with shares of `limits`.
fn table_markdown_with(table: &Table, limits: &Limits) -> String {
    let mut md = format!("## {}\n\n{}", table.group, table.about);
    if table.seconds > 0.0 {
        let _ = write!(md, " ({:.0} s)", table.seconds);
    }
    md.push_str("\n\n");
    if table.has_peers() {
        md.push_str(
            "With LangGraph: ours / LangGraph's (how many times faster ours is), same run.\n\n",
        );
    }
    let _ = writeln!(md, "| workload | unit | {} |", table.columns.join(" | "));
    let _ = writeln!(md, "|---|---|{}", "---:|".repeat(table.columns.len()));
    for row in &table.rows {
        let arrow = match row.better {
            Better::Higher => "↑",
            Better::Lower => "↓",
        };
        for (label, cells) in row_lines(&table.group, row, &table.columns, limits) {
            let _ = writeln!(
                md,
                "| {}{label} | {} {arrow} | {} |",
                row.workload,
                row.unit,
                cells.join(" | ")
            );
        }
    }
    md.push('\n');
    for note in &table.notes {
        let _ = writeln!(md, "Note: {note}\n");
    }
    md
}

/// `text` as a file-name part: lower-case letters and digits joined by single dashes.
fn slug(text: &str) -> String {
    let lowered = text.to_lowercase();
    let words: Vec<&str> = lowered
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words.join("-")
}

/// The checkout's commit, `-dirty` when it has local changes; `None` outside git.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}

/// The current UTC time as `YYYY-MM-DD HH:MM UTC`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_slugs() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(slug("put (16 writers)"), "put-16-writers");
    }

    /// A share of a limit is ours in turns with it where the limits group has such samples,
    /// else the cell's own figure; the limits table shows the share on that row.
    #[test]
    fn shares_come_from_samples_taken_in_turns_with_the_limit() {
        let mut ours = Table::new("checkpoint", "backend", String::new());
        ours.rate("put (sequential)", "puts/s", "sqlite", vec![70.0]);
        ours.rate("put (sequential)", "puts/s", "redis", vec![50.0]);
        let mut limit = Table::new("limits", "backend", String::new());
        limit.rate("put (sequential)", "puts/s", "sqlite", vec![100.0]);
        limit.rate("put (sequential)", "puts/s", "redis", vec![200.0]);
        let turns = format!("put (sequential){}", limits::ALTERNATING);
        limit.rate(&turns, "puts/s", "sqlite", vec![90.0]);
        let tables = [ours, limit];
        let shares = Limits::of(&tables);
        let row = &tables[0].rows[0];
        let share = |table: usize, row: &Row, column: &str| {
            let cell = row.cells.iter().find(|c| c.column == column);
            shares.share(&tables[table].group, row, cell.expect("a cell"))
        };
        assert_eq!(share(0, row, "sqlite"), Some(0.9));
        assert_eq!(share(0, row, "redis"), Some(0.25));
        let in_turns = &tables[1].rows[1];
        assert_eq!(share(1, in_turns, "sqlite"), Some(0.9));
        assert_eq!(share(1, &tables[1].rows[0], "sqlite"), None);
        let md = table_markdown_with(&tables[0], &shares);
        assert!(md.contains("70.0 · 90% of limit"), "{md}");
    }
}
