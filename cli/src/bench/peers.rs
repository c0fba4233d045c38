//! LangGraph's side of `waypoint bench --peers`: the Python driver of `benches/peers/`
//! (built into the binary, written to a temporary folder) run by the pinned LangGraph venv,
//! asked for one sample at a time so that its samples alternate with ours.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::measure::Table;

/// The column suffix of LangGraph's figures: plain-dict states.
pub(crate) const LANGGRAPH: &str = "LangGraph";
/// LangGraph's figures with LangChain message objects under `add_messages`.
pub(crate) const LANGGRAPH_MESSAGES: &str = "LangGraph (messages)";

/// The peer scripts, as `(file name, text)`: the driver and the scripts it imports.
const SCRIPTS: [(&str, &str); 6] = [
    (
        "waypoint_peers.py",
        include_str!("../../../benches/peers/waypoint_peers.py"),
    ),
    (
        "langgraph_runtime.py",
        include_str!("../../../benches/peers/langgraph_runtime.py"),
    ),
    (
        "langgraph_sqlite.py",
        include_str!("../../../benches/peers/langgraph_sqlite.py"),
    ),
    (
        "langgraph_postgres.py",
        include_str!("../../../benches/peers/langgraph_postgres.py"),
    ),
    (
        "langgraph_store.py",
        include_str!("../../../benches/peers/langgraph_store.py"),
    ),
    (
        "langgraph_serde.py",
        include_str!("../../../benches/peers/langgraph_serde.py"),
    ),
];

/// LangGraph's samples of a workload, per variant (`LangGraph`, `LangGraph (messages)`).
pub(crate) type Theirs = Vec<(&'static str, Vec<f64>)>;

/// The running driver, or none when `--peers` was not given.
pub(crate) struct Peers {
    driver: Option<Driver>,
    /// Why LangGraph has no figure, each with the `workload on backend` it holds for.
    pub(crate) notes: Vec<(String, Vec<String>)>,
    /// The interpreter used, for the report's header.
    pub(crate) python: Option<String>,
}

/// The Python process and its pipes.
struct Driver {
    child: Child,
    /// Taken (closed) when the driver is dropped.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Closing stdin ends the serve loop; the driver then drops its database.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

impl Peers {
    /// No peer: every workload measures ours alone.
    pub(crate) fn none() -> Peers {
        Peers {
            driver: None,
            notes: Vec::new(),
            python: None,
        }
    }

    /// Starts the driver with the pinned venv's interpreter; SQLite files go to `dir`.
    pub(crate) fn start(dir: &Path, postgres: Option<&str>) -> Result<Peers> {
        let python = python()?;
        let scripts = dir.join("peers");
        std::fs::create_dir_all(&scripts)
            .with_context(|| format!("cannot create {}", scripts.display()))?;
        for (name, text) in SCRIPTS {
            std::fs::write(scripts.join(name), text)
                .with_context(|| format!("cannot write {name}"))?;
        }
        let mut command = Command::new(&python);
        command
            .arg(scripts.join("waypoint_peers.py"))
            .arg("--serve")
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(url) = postgres {
            command.arg("--postgres").arg(url);
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", python.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("the peer driver has no pipes");
        };
        Ok(Peers {
            driver: Some(Driver {
                child,
                stdin: Some(stdin),
                stdout: BufReader::new(stdout),
            }),
            notes: Vec::new(),
            python: Some(python.display().to_string()),
        })
    }

    /// One LangGraph sample of `workload` on `backend`: `Ok(None)` when LangGraph has no
    /// counterpart there.
    fn sample(&mut self, workload: &str, backend: &str, args: &Value) -> Result<Option<Vec<f64>>> {
        let Some(driver) = self.driver.as_mut() else {
            return Ok(None);
        };
        let request = json!({"workload": workload, "backend": backend, "args": args});
        let answer = tokio::task::block_in_place(|| -> Result<Value> {
            let stdin = driver.stdin.as_mut().context("the peer driver is closed")?;
            writeln!(stdin, "{request}")?;
            stdin.flush()?;
            let mut line = String::new();
            if driver.stdout.read_line(&mut line)? == 0 {
                bail!("the peer driver stopped (its stderr is above)");
            }
            serde_json::from_str(&line).with_context(|| format!("bad peer answer `{line}`"))
        });
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                // The process is gone: no later workload can ask it.
                self.driver = None;
                return Err(e);
            }
        };
        if let Some(why) = answer.get("none").and_then(Value::as_str) {
            self.note(why, workload, backend);
            return Ok(None);
        }
        if let Some(error) = answer.get("error").and_then(Value::as_str) {
            bail!("LangGraph's {workload} on {backend} failed: {error}");
        }
        let samples = answer
            .get("samples")
            .and_then(Value::as_array)
            .context("the peer answer has no samples")?;
        Ok(Some(samples.iter().filter_map(Value::as_f64).collect()))
    }

    /// Ours and LangGraph's samples, alternating: a warm-up of each, then `rounds` rounds of
    /// one of ours (`ours` returns a batch of samples) and one of LangGraph's `workload` on
    /// `backend` with `args`. LangGraph's are left out without a peer, without a
    /// counterpart, or when LangGraph's side failed (noted).
    pub(crate) async fn pair(
        &mut self,
        rounds: usize,
        workload: &str,
        backend: &str,
        args: Value,
        ours: impl AsyncFnMut() -> Result<Vec<f64>>,
    ) -> Result<(Vec<f64>, Theirs)> {
        self.pairs(rounds, workload, backend, &[(LANGGRAPH, args)], ours)
            .await
    }

    /// [`pair`](Self::pair) with several LangGraph variants (named, with their `args`),
    /// each sampled once per round after ours.
    pub(crate) async fn pairs(
        &mut self,
        rounds: usize,
        workload: &str,
        backend: &str,
        variants: &[(&'static str, Value)],
        mut ours: impl AsyncFnMut() -> Result<Vec<f64>>,
    ) -> Result<(Vec<f64>, Theirs)> {
        ours().await?;
        let mut theirs: Vec<Option<Vec<f64>>> = variants
            .iter()
            .map(|(_, args)| self.theirs(workload, backend, args).map(|_| Vec::new()))
            .collect();
        let mut mine = Vec::new();
        for _ in 0..rounds {
            mine.extend(ours().await?);
            for ((_, args), samples) in variants.iter().zip(theirs.iter_mut()) {
                if samples.is_some() {
                    let more = self.theirs(workload, backend, args);
                    match (samples.as_mut(), more) {
                        (Some(samples), Some(more)) => samples.extend(more),
                        _ => *samples = None,
                    }
                }
            }
        }
        let theirs = variants
            .iter()
            .zip(theirs)
            .filter_map(|((name, _), samples)| Some((*name, samples?)))
            .collect();
        Ok((mine, theirs))
    }

    /// One sample of LangGraph's, with failures noted rather than raised.
    fn theirs(&mut self, workload: &str, backend: &str, args: &Value) -> Option<Vec<f64>> {
        match self.sample(workload, backend, args) {
            Ok(samples) => samples,
            Err(e) => {
                let why = crate::one_line(&e);
                eprintln!("waypoint bench: LangGraph's {workload} on {backend}: {why}");
                self.note(&why, workload, backend);
                None
            }
        }
    }

    /// Notes that LangGraph has no figure of `workload` on `backend`, and `why`.
    fn note(&mut self, why: &str, workload: &str, backend: &str) {
        let what = format!("{workload} on {backend}");
        match self.notes.iter_mut().find(|(w, _)| w == why) {
            Some((_, list)) if list.contains(&what) => {}
            Some((_, list)) => list.push(what),
            None => self.notes.push((why.to_owned(), vec![what])),
        }
    }
}

/// Records ours with `add`, then LangGraph's samples (if any) beside them.
pub(crate) fn record(
    table: &mut Table,
    workload: &str,
    column: &str,
    ours: Vec<f64>,
    theirs: Theirs,
    add: impl FnOnce(&mut Table, &str, &str, Vec<f64>),
) {
    add(table, workload, column, ours);
    for (name, samples) in theirs {
        table.peer(workload, column, name, samples);
    }
}

/// The pinned LangGraph venv's interpreter: `$WAYPOINT_TEST_PYTHON`, else the checkout's
/// `target/venv-langgraph` (created by `scripts/python.sh` when this binary was built from a
/// checkout that has it).
fn python() -> Result<PathBuf> {
    if let Some(python) = std::env::var_os("WAYPOINT_TEST_PYTHON").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(python));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = root.join("target/venv-langgraph/bin/python");
    if venv.exists() {
        return Ok(venv);
    }
    if root.join("scripts/python.sh").exists() {
        eprintln!("waypoint bench: creating the pinned LangGraph venv (scripts/python.sh)");
        let made = Command::new("bash")
            .arg("-c")
            .arg("source scripts/python.sh && langgraph_venv >&2 && printf %s \"$WAYPOINT_TEST_PYTHON\"")
            .current_dir(&root)
            .stderr(Stdio::inherit())
            .output()
            .context("cannot run bash to create the LangGraph venv")?;
        let path = String::from_utf8_lossy(&made.stdout).trim().to_owned();
        if made.status.success() && !path.is_empty() {
            return Ok(PathBuf::from(path));
        }
    }
    bail!(
        "--peers needs the pinned LangGraph venv: set WAYPOINT_TEST_PYTHON to its python, or run \
         `source scripts/python.sh && langgraph_venv` in a Waypoint checkout"
    )
}
