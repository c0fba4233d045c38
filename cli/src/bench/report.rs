//! The results folder: `REPORT.md` (header, one table per group, skipped backends, chart
//! links), one SVG chart per workload, and `results.json` with every raw sample.

use std::fmt::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::Serialize;

use super::measure::{Better, Table, number};
use super::svg;

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
    let mut md = header_markdown(header);
    for table in tables {
        md.push_str(&table_markdown(table));
        let mut links = Vec::new();
        for row in &table.rows {
            let file = format!("{}-{}.svg", table.group, slug(&row.workload));
            write_file(&dir.join(&file), &svg::chart(&table.group, row))?;
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
    md
}

/// One group's section: heading, description, table and notes.
pub(crate) fn table_markdown(table: &Table) -> String {
    let mut md = format!("## {}\n\n{}\n\n", table.group, table.about);
    let _ = writeln!(md, "| workload | unit | {} |", table.columns.join(" | "));
    let _ = writeln!(md, "|---|---|{}", "---:|".repeat(table.columns.len()));
    for row in &table.rows {
        let arrow = match row.better {
            Better::Higher => "↑",
            Better::Lower => "↓",
        };
        let cells: Vec<String> = table
            .columns
            .iter()
            .map(|column| {
                row.cells
                    .iter()
                    .find(|c| &c.column == column)
                    .map_or("–".to_owned(), |c| number(c.value))
            })
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} {arrow} | {} |",
            row.workload,
            row.unit,
            cells.join(" | ")
        );
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
}
