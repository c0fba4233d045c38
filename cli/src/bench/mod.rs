//! `waypoint bench`: the persistence benchmark workloads of `waypoint_benches` (serde,
//! checkpointers, store, HNSW, runtime) against every backend it can reach, as plain timed
//! loops (warm-up, repeated samples, medians), written to a folder as `REPORT.md`, SVG
//! charts and `results.json`.

mod checkpoint;
mod codec;
#[cfg(feature = "minilm")]
mod embed;
mod fork;
mod hnsw;
mod limits;
mod measure;
mod peers;
mod recall;
mod report;
mod runtime;
mod store;
mod svg;
mod targets;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use waypoint_workloads::ann::{self, AnnSize};
use waypoint_workloads::checkpoints;
use waypoint_workloads::payload::{MEDIUM, PayloadSize, SMALL};
use waypoint_workloads::runtime as runtime_workload;
use waypoint_workloads::store as store_workload;

use self::measure::Table;
use self::peers::Peers;
use self::targets::{Target, Targets};
use crate::one_line;

/// Options of `waypoint bench`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Folder for REPORT.md, the SVG charts and results.json (created if missing).
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    out: PathBuf,
    /// Smaller workloads, so the whole run takes under two minutes.
    #[arg(long)]
    quick: bool,
    /// PostgreSQL server to measure (fresh schemas on it) [default: $WAYPOINT_BENCH_POSTGRES_URL,
    /// else $WAYPOINT_TEST_POSTGRES_URL; skipped when none or unreachable].
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// Redis server to measure (fresh key prefixes on it) [default: $WAYPOINT_BENCH_REDIS_URL,
    /// else $WAYPOINT_TEST_REDIS_URL; skipped when none or unreachable].
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// Groups to run, comma-separated [default: all].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "GROUPS")]
    only: Vec<Group>,
    /// The all-MiniLM-L6-v2 folder the embed group measures [default:
    /// $WAYPOINT_TEST_MINILM_DIR; the group is left out without one unless named in --only].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Also run LangGraph's side of every workload that has one (the pinned venv:
    /// $WAYPOINT_TEST_PYTHON, else scripts/python.sh's), alternating with ours, and the
    /// limits group.
    #[arg(long)]
    peers: bool,
    /// Tiny workloads of a few iterations each, for tests of the command itself.
    #[arg(long, hide = true)]
    smoke: bool,
}

/// A group of workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Group {
    /// Encode/decode throughput per format.
    Serde,
    /// Checkpointer puts, gets and lists per backend.
    Checkpoint,
    /// Store puts, gets and searches per backend.
    Store,
    /// The vector index: build, queries/s, recall.
    Hnsw,
    /// Runtime super-steps and history per checkpointer.
    Runtime,
    /// `update_state` forks of a 300-checkpoint thread per checkpointer.
    Fork,
    /// The machine's and servers' limits: pgbench, redis-benchmark, bare SQLite, fdatasync,
    /// memcpy (run by default with --peers).
    Limits,
    /// The local MiniLM embedder: sentences/s and share of the matmul peak (feature minilm).
    Embed,
    /// Retrieval recall@1/@5 of the hashing and MiniLM embedders on LangGraph's guides.
    Recall,
}

/// Every group, in report order.
const GROUPS: [Group; 9] = [
    Group::Serde,
    Group::Checkpoint,
    Group::Store,
    Group::Hnsw,
    Group::Runtime,
    Group::Fork,
    Group::Limits,
    Group::Embed,
    Group::Recall,
];

/// The sizes of one run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scale {
    /// `full`, `quick` or `smoke`.
    name: &'static str,
    /// Samples of every rate (and of `list` and history reads).
    samples: usize,
    /// Calls timed for a latency percentile.
    latency_samples: usize,
    /// The serialization payload.
    payload: PayloadSize,
    /// How long one serialization sample repeats its operation.
    serde_window: Duration,
    /// Checkpoints per put sample.
    puts: usize,
    /// Checkpoints in the thread read by `get_tuple` and `list`.
    history: usize,
    /// Items per store put sample.
    store_puts: usize,
    /// Items in the store the reads run on.
    items: usize,
    /// Searches timed per search kind.
    searches: usize,
    /// The vector-index dataset.
    ann: AnnSize,
    /// Index builds timed.
    builds: usize,
    /// Invocations per runtime sample.
    invocations: usize,
    /// Invocations on the thread read by `get_state_history` (12 checkpoints each).
    history_invocations: usize,
    /// Invocations on the thread the fork group forks (12 checkpoints each).
    fork_invocations: usize,
    /// Forks per fork sample.
    forks: usize,
    /// Sentences per embed pass.
    #[cfg_attr(
        not(feature = "minilm"),
        expect(dead_code, reason = "read by the embed group")
    )]
    embed_texts: usize,
}

/// The criterion benches' sizes: a few minutes with four backends on two cores.
const FULL: Scale = Scale {
    name: "full",
    samples: 10,
    latency_samples: 2000,
    payload: MEDIUM,
    serde_window: Duration::from_millis(300),
    puts: checkpoints::PUTS,
    history: checkpoints::HISTORY,
    store_puts: store_workload::PUTS,
    items: store_workload::ITEMS,
    searches: 500,
    ann: ann::FULL,
    builds: 3,
    invocations: runtime_workload::INVOCATIONS,
    history_invocations: runtime_workload::HISTORY_INVOCATIONS,
    fork_invocations: runtime_workload::FORK_INVOCATIONS,
    forks: 10,
    embed_texts: 512,
};

/// Under two minutes with four backends on two cores.
const QUICK: Scale = Scale {
    name: "quick",
    samples: 5,
    latency_samples: 1000,
    payload: MEDIUM,
    serde_window: Duration::from_millis(100),
    puts: 500,
    history: checkpoints::HISTORY,
    store_puts: 500,
    items: 5000,
    searches: 100,
    ann: AnnSize {
        vectors: 20_000,
        clusters: 200,
        queries: 200,
        ..ann::FULL
    },
    builds: 1,
    // LangGraph's side of the runtime workloads takes most of a `--quick --peers` run: a
    // 300-checkpoint history (as the fork's thread) and 20 invocations a sample keep it short.
    invocations: 20,
    history_invocations: runtime_workload::FORK_INVOCATIONS,
    fork_invocations: runtime_workload::FORK_INVOCATIONS,
    forks: 5,
    embed_texts: 128,
};

/// A few iterations of everything, for tests.
const SMOKE: Scale = Scale {
    name: "smoke",
    samples: 2,
    latency_samples: 20,
    payload: SMALL,
    serde_window: Duration::from_millis(2),
    puts: 16,
    history: 20,
    store_puts: 20,
    items: 200,
    searches: 10,
    ann: AnnSize {
        vectors: 500,
        dims: 16,
        clusters: 10,
        sigma: 1.5,
        queries: 20,
        k: 10,
    },
    builds: 1,
    invocations: 2,
    history_invocations: 2,
    fork_invocations: 2,
    forks: 2,
    embed_texts: 8,
};

/// Runs the chosen groups and writes the results folder.
pub(crate) async fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let scale = match (args.smoke, args.quick) {
        (true, _) => SMOKE,
        (false, true) => QUICK,
        (false, false) => FULL,
    };
    let model = args
        .model
        .or_else(|| std::env::var_os("WAYPOINT_TEST_MINILM_DIR").map(PathBuf::from))
        .filter(|dir| !dir.as_os_str().is_empty());
    // The embed group needs a model folder and the `minilm` feature: without them it runs
    // (and fails, saying why) only when named in --only.
    let embed_ready = cfg!(feature = "minilm") && model.is_some();
    let groups: Vec<Group> = GROUPS
        .into_iter()
        .filter(|g| args.only.is_empty() || args.only.contains(g))
        .filter(|g| *g != Group::Embed || embed_ready || args.only.contains(g))
        // The limits are the peers run's: alone they take a while and say little.
        .filter(|g| *g != Group::Limits || args.peers || args.only.contains(g))
        .collect();
    let url = |given: Option<String>, name| {
        given
            .or_else(|| waypoint_workloads::servers::url(name))
            .filter(|u| !u.is_empty())
    };
    let targets = Targets::probe(url(args.postgres, "POSTGRES"), url(args.redis, "REDIS")).await?;
    for line in &targets.skipped {
        eprintln!("waypoint bench: {line}");
    }
    let mut peers = if args.peers {
        let postgres = targets.list.iter().find_map(|t| match t {
            Target::Postgres(url) => Some(url.as_str()),
            _ => None,
        });
        Peers::start(targets.dir(), postgres).context("cannot start LangGraph's side")?
    } else {
        Peers::none()
    };

    let progress = MultiProgress::new();
    let bars: Vec<ProgressBar> = groups
        .iter()
        .map(|group| progress.add(bar(*group, &targets)))
        .collect();
    // What the groups made on the servers is dropped whether they succeed or not.
    let measured: Result<Vec<Table>> = async {
        let mut tables = Vec::new();
        for (group, bar) in groups.iter().zip(&bars) {
            let began = Instant::now();
            let table = match group {
                Group::Serde => codec::run(&scale, bar, &mut peers).await?,
                Group::Checkpoint => checkpoint::run(&targets, &scale, bar, &mut peers).await?,
                Group::Store => store::run(&targets, &scale, bar, &mut peers).await?,
                Group::Hnsw => {
                    let bar = bar.clone();
                    tokio::task::spawn_blocking(move || hnsw::run(&scale, &bar)).await??
                }
                Group::Runtime => runtime::run(&targets, &scale, bar, &mut peers).await?,
                Group::Fork => fork::run(&targets, &scale, bar, &mut peers).await?,
                Group::Limits => limits::run(&targets, &scale, bar).await?,
                Group::Embed => run_embed(scale, model.clone(), bar.clone()).await?,
                Group::Recall => recall::run(model.as_deref(), bar).await?,
            };
            let mut table = table;
            table.seconds = began.elapsed().as_secs_f64();
            bar.finish_with_message(format!("done in {:.1} s", table.seconds));
            tables.push(table);
        }
        Ok(tables)
    }
    .await;
    for line in targets::drop_created().await {
        eprintln!("waypoint bench: {line}");
    }
    let tables = measured?;

    let backends = targets.list.iter().map(|t| t.name().to_owned()).collect();
    let mut header = report::Header::now(scale.name, backends, targets.skipped.clone());
    header.wall_seconds = started.elapsed().as_secs_f64();
    header.command = command_line();
    header.peer_python = peers.python.clone();
    header.peer_notes = std::mem::take(&mut peers.notes);
    drop(peers);
    report::write(&args.out, &header, &tables)?;
    for table in &tables {
        print!("{}", report::table_markdown(table));
    }
    eprintln!(
        "waypoint bench: {} mode in {:.0} s; report in {}",
        scale.name,
        header.wall_seconds,
        args.out.join("REPORT.md").display()
    );
    Ok(())
}

/// The progress bar of `group`, one step per workload and backend.
fn bar(group: Group, targets: &Targets) -> ProgressBar {
    let steps = match group {
        Group::Serde => codec::steps(),
        Group::Checkpoint => checkpoint::steps(targets),
        Group::Store => store::steps(targets),
        Group::Hnsw => hnsw::steps(),
        Group::Runtime => runtime::steps(targets),
        Group::Fork => fork::steps(targets),
        Group::Limits => limits::steps(targets),
        #[cfg(feature = "minilm")]
        Group::Embed => embed::steps(),
        #[cfg(not(feature = "minilm"))]
        Group::Embed => 0,
        Group::Recall => recall::steps(),
    };
    let style = ProgressStyle::with_template(
        "{prefix:>10} [{bar:24.cyan/blue}] {pos}/{len} {elapsed:>4} {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    let name = format!("{group:?}").to_lowercase();
    ProgressBar::new(steps)
        .with_style(style)
        .with_prefix(name)
        .with_message("waiting")
}

/// The command line of this run, with its URLs' passwords hidden.
fn command_line() -> String {
    let words: Vec<String> = std::env::args()
        .enumerate()
        .map(|(i, word)| match i {
            0 => "waypoint".to_owned(),
            _ if word.contains("://") => crate::secrets::redact(&word),
            _ => word,
        })
        .collect();
    words.join(" ")
}

/// Runs the embed group on the blocking pool.
#[cfg(feature = "minilm")]
async fn run_embed(scale: Scale, model: Option<PathBuf>, bar: ProgressBar) -> Result<Table> {
    let Some(model) = model else {
        anyhow::bail!("the embed group needs a model: pass --model DIR");
    };
    tokio::task::spawn_blocking(move || embed::run(&scale, &model, &bar)).await?
}

/// Without the model code: an error saying how to get it.
#[cfg(not(feature = "minilm"))]
async fn run_embed(_: Scale, _: Option<PathBuf>, _: ProgressBar) -> Result<Table> {
    anyhow::bail!(
        "this waypoint was built without the `minilm` feature: build it with --features minilm"
    )
}

/// Keeps a run going when a server backend fails part-way (noting it in the table and on
/// stderr); a failure of memory or SQLite ends the run.
fn settle(table: &mut Table, target: &Target, done: Result<()>) -> Result<()> {
    match done {
        Ok(()) => Ok(()),
        Err(e) if target.is_server() => {
            let note = format!(
                "{}: {} stopped, {}",
                target.name(),
                table.group,
                one_line(&e)
            );
            eprintln!("waypoint bench: {note}");
            table.notes.push(note);
            Ok(())
        }
        Err(e) => Err(e.context(format!(
            "{} {} benchmark failed",
            target.name(),
            table.group
        ))),
    }
}
