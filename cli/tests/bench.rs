//! `waypoint bench` end to end: the real binary with the hidden `--smoke` sizes into a
//! temporary folder, against the test servers when they are set.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use waypoint_test_kit::{postgres_url, python, redis_url};

/// The groups a run without a model or `--peers` measures, in report order (`embed` needs a
/// model; `recall` then measures the hashing embedder alone; `limits` runs with `--peers`).
const GROUPS: [&str; 7] = [
    "serde",
    "checkpoint",
    "store",
    "hnsw",
    "runtime",
    "fork",
    "recall",
];

/// Runs `waypoint bench --smoke --out OUT ARGS...` with no server taken from the
/// environment: only the servers `args` name are measured.
fn bench(out: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_waypoint"));
    // LangGraph's side runs only with --peers: the runs without it must not need Python.
    command.env_remove("WAYPOINT_TEST_PYTHON");
    for kind in ["BENCH", "TEST"] {
        for server in ["POSTGRES", "REDIS"] {
            command.env_remove(format!("WAYPOINT_{kind}_{server}_URL"));
        }
    }
    // The model's groups embed hundreds of texts: the model's own tests cover them.
    command.env_remove("WAYPOINT_TEST_MINILM_DIR");
    command
        .args(["bench", "--smoke", "--out"])
        .arg(out)
        .args(args)
        .output()
        .expect("the binary runs")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn smoke_run_writes_every_table_chart_and_sample() {
    let out = tempfile::tempdir().expect("temp dir");
    let postgres = postgres_url();
    let redis = redis_url();
    let mut args = Vec::new();
    let mut backends = vec!["memory", "sqlite"];
    if let Some(url) = &postgres {
        args.extend(["--postgres", url.as_str()]);
        backends.push("postgres");
    }
    if let Some(url) = &redis {
        args.extend(["--redis", url.as_str()]);
        backends.push("redis");
    }
    let output = bench(out.path(), &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "stderr: {stderr}");

    let report = read(&out.path().join("REPORT.md"));
    assert!(report.contains("- Machine: "), "{report}");
    assert!(report.contains("- Mode: smoke"), "{report}");
    for group in GROUPS {
        assert!(
            report.contains(&format!("## {group}\n")),
            "no {group} in {report}"
        );
        assert!(
            stdout.contains(&format!("## {group}\n")),
            "no {group} in {stdout}"
        );
    }
    let header = format!("| workload | unit | {} |", backends.join(" | "));
    for group in ["checkpoint", "store", "runtime"] {
        let section = report
            .split(&format!("## {group}\n"))
            .nth(1)
            .expect("the section");
        assert!(
            section.contains(&header),
            "{group}: no `{header}` in {section}"
        );
    }
    assert!(
        report.contains("| json | msgpack | postcard | bincode |"),
        "{report}"
    );
    if postgres.is_none() {
        assert!(report.contains("postgres: skipped, no URL"), "{report}");
    }

    let results: Value =
        serde_json::from_str(&read(&out.path().join("results.json"))).expect("results.json parses");
    let groups = results["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), GROUPS.len());
    for group in groups {
        let name = group["group"].as_str().expect("group name");
        let rows = group["rows"].as_array().expect("rows");
        assert!(!rows.is_empty(), "{name} has no rows");
        for row in rows {
            for cell in row["cells"].as_array().expect("cells") {
                let samples = cell["samples"].as_array().expect("samples");
                assert!(!samples.is_empty(), "{name}: {cell}");
                assert!(cell["value"].as_f64().is_some_and(f64::is_finite), "{cell}");
            }
            let bars = if ["checkpoint", "store", "runtime"].contains(&name) {
                backends.len()
            } else {
                row["cells"].as_array().map_or(0, Vec::len)
            };
            let slug = row["workload"]
                .as_str()
                .expect("workload")
                .to_lowercase()
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join("-");
            let file = format!("{name}-{slug}.svg");
            assert!(report.contains(&format!("]({file})")), "no link to {file}");
            let svg = read(&out.path().join(&file));
            assert!(svg.starts_with("<svg"), "{file}");
            assert!(svg.trim_end().ends_with("</svg>"), "{file}");
            assert_eq!(svg.matches(r#"class="bar""#).count(), bars, "{file}: {svg}");
            assert_eq!(svg.matches('<').count(), svg.matches('>').count(), "{file}");
        }
    }
}

/// With `--peers`, LangGraph's side of each workload runs in the same process tree: every
/// peered table shows both sides and results.json keeps both sides' samples.
#[test]
fn smoke_peers_run_writes_both_sides() {
    let Some(python) = python() else {
        return;
    };
    let out = tempfile::tempdir().expect("temp dir");
    let postgres = postgres_url();
    let mut args = vec!["--peers", "--only", "serde,checkpoint,store,runtime,fork"];
    if let Some(url) = &postgres {
        args.extend(["--postgres", url.as_str()]);
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_waypoint"));
    for kind in ["BENCH", "TEST"] {
        for server in ["POSTGRES", "REDIS"] {
            command.env_remove(format!("WAYPOINT_{kind}_{server}_URL"));
        }
    }
    let output = command
        .env("WAYPOINT_TEST_PYTHON", &python)
        .args(["bench", "--smoke", "--out"])
        .arg(out.path())
        .args(&args)
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");

    let report = read(&out.path().join("REPORT.md"));
    assert!(
        report.contains("- Command: `waypoint bench --smoke"),
        "{report}"
    );
    assert!(report.contains("## Against LangGraph\n"), "{report}");
    // Every peered backend and workload: ours / LangGraph's (ratio).
    let mut backends = vec!["memory", "sqlite"];
    if postgres.is_some() {
        backends.push("postgres");
    }
    for workload in [
        "checkpoint put (sequential), puts/s",
        "checkpoint list 20 checkpoints, ms",
        "store get p50, ms",
        "runtime super-steps, steps/s",
        "runtime super-steps, vs LangGraph (messages), steps/s",
        "fork from the middle, ms",
        "fork near the head, vs LangGraph (messages), ms",
    ] {
        let line = report
            .lines()
            .find(|l| l.starts_with(&format!("| {workload} |")))
            .unwrap_or_else(|| panic!("no `{workload}` in {report}"));
        let cells: Vec<&str> = line.split(" | ").skip(1).collect();
        for (i, backend) in backends.iter().enumerate() {
            assert!(
                cells[i].contains(" / ") && (cells[i].contains("x)") || cells[i].contains("x**)")),
                "{workload} on {backend}: `{line}`"
            );
        }
    }
    assert!(report.contains("| encode | MB/s ↑ |"), "{report}");

    let results: Value =
        serde_json::from_str(&read(&out.path().join("results.json"))).expect("results.json parses");
    assert!(results["header"]["peer_python"].is_string());
    let mut peered = 0;
    for group in results["groups"].as_array().expect("groups") {
        for row in group["rows"].as_array().expect("rows") {
            for cell in row["cells"].as_array().expect("cells") {
                let Some(peers) = cell.get("peers").and_then(Value::as_array) else {
                    continue;
                };
                for peer in peers {
                    let samples = peer["samples"].as_array().expect("peer samples");
                    assert!(!samples.is_empty(), "{cell}");
                    assert!(peer["value"].as_f64().is_some_and(|v| v > 0.0), "{cell}");
                }
                assert!(!cell["samples"].as_array().expect("samples").is_empty());
                peered += 1;
            }
        }
    }
    // At least: serde's msgpack encode and decode; on memory and SQLite each, checkpoint's
    // sequential put, get_tuple p50 and p99 and list, store's put, batch put, get and filtered
    // search, runtime's two rows and fork's two; semantic search on memory.
    let least = 2 + 2 * (4 + 4 + 2 + 2) + 1;
    assert!(peered >= least, "{peered} peered cells, not {least}");
}

#[test]
fn unreachable_server_is_skipped_with_a_note() {
    let out = tempfile::tempdir().expect("temp dir");
    let output = bench(
        out.path(),
        &[
            "--only",
            "checkpoint",
            "--postgres",
            "postgres://127.0.0.1:1/x",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    let notes: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("postgres: skipped"))
        .collect();
    assert_eq!(notes.len(), 1, "{stderr}");
    let report = read(&out.path().join("REPORT.md"));
    assert!(report.contains("postgres: skipped, "), "{report}");
    assert!(report.contains("redis: skipped, no URL"), "{report}");
    assert!(
        report.contains("| workload | unit | memory | sqlite |\n"),
        "{report}"
    );
    assert!(report.contains("## checkpoint\n"), "{report}");
    assert!(
        !report.contains("## serde\n"),
        "--only was ignored: {report}"
    );
}

#[test]
fn unknown_group_is_a_usage_error() {
    let out = tempfile::tempdir().expect("temp dir");
    let output = bench(out.path(), &["--only", "checkpoint,disk"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(!out.path().join("REPORT.md").exists());
}
