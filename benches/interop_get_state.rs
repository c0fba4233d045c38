//! `get_state` of a Python LangGraph thread of 200 LangChain messages: Python's own against
//! Waypoint's, back to back on one PostgreSQL database and one thread (issue 18's figure).
//!
//! `peers/langgraph_interop_get_state.py build` writes the thread with the real LangGraph
//! (50 runs of a `MessagesState` tool-calling graph, 4 messages each: human, AI with a tool
//! call, tool result, AI answer, with usage and response metadata) into a fresh database and
//! prints its messages. Waypoint then reads it through the same graph declared on its own
//! runtime (`MessagesState`, nodes `agent` and `tools`) on a default-config `PostgresSaver`,
//! and the bench checks that it sees the same 200 messages (class, module and every field of
//! `model_dump()`) at the same checkpoint. Then, for [`ROUNDS`] rounds, Python times its
//! `graph.get_state(config)` (`... time`, a new process each round) and Waypoint times its
//! `graph.get_state(&config)`, both calibrated to ~0.5 s per repeat, [`REPEATS`] repeats each.
//! The table gives each round's medians and the medians of all repeats, and their ratio.
//!
//! Then where Waypoint's time goes and what the compatible encoding costs: the saver's
//! `get_tuple` alone, and the 200 messages (as Waypoint read them) encoded and decoded in
//! LangGraph's encoding (Python's stored bytes, and Waypoint's own writing of them) and in
//! Waypoint's positional msgpack (`Format::MsgPack`): bytes, encode and decode time.
//!
//! Needs `WAYPOINT_TEST_POSTGRES_URL` (or `WAYPOINT_BENCH_POSTGRES_URL`: a role that may
//! create databases) and `WAYPOINT_TEST_PYTHON` (the pinned LangGraph venv); skips with a
//! message without them. The database is dropped at the end.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, Format, Serde, SerializedValue};
use waypoint_checkpoint_postgres::PostgresSaver;
use waypoint_runtime::{
    BoxError, CompileOptions, CompiledGraph, Context, END, Message, MessagesState,
    MessagesStateUpdate, RunConfig, START, StateGraph,
};
use waypoint_workloads::servers;

type Result<T, E = BoxError> = std::result::Result<T, E>;

/// Messages in the thread (the script's `N_MESSAGES`).
const MESSAGES: usize = 200;
/// Rounds, each a Python measurement then a Waypoint one.
const ROUNDS: usize = 3;
/// Timed repeats per measurement.
const REPEATS: usize = 5;
/// Seconds per repeat the calibration aims at.
const TARGET_SECS: f64 = 0.5;

fn main() {
    if let Err(e) = run() {
        eprintln!("interop_get_state: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let Some(server) = servers::url("POSTGRES") else {
        eprintln!("interop_get_state skipped: set WAYPOINT_TEST_POSTGRES_URL");
        return Ok(());
    };
    let Some(python) = std::env::var("WAYPOINT_TEST_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        eprintln!(
            "interop_get_state skipped: set WAYPOINT_TEST_PYTHON (the pinned LangGraph venv)"
        );
        return Ok(());
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let name = format!("bench_interop_{}", uuid::Uuid::new_v4().simple());
    rt.block_on(admin(&server, &format!("CREATE DATABASE {name}")))?;
    let outcome = database_url(&server, &name).and_then(|url| bench(&rt, &python, &url));
    let dropped = rt.block_on(admin(
        &server,
        &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    ));
    outcome?;
    dropped
}

/// Runs `statement` on the server's own database.
async fn admin(server: &str, statement: &str) -> Result<()> {
    let pool = sqlx::PgPool::connect(server).await?;
    sqlx::query(statement).execute(&pool).await?;
    pool.close().await;
    Ok(())
}

/// The server URL with its database replaced by `name`.
fn database_url(server: &str, name: &str) -> Result<String> {
    let (address, query) = match server.split_once('?') {
        Some((address, query)) => (address, Some(query)),
        None => (server, None),
    };
    let (base, _) = address
        .rsplit_once('/')
        .ok_or("the PostgreSQL URL names no database")?;
    Ok(match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    })
}

/// Runs the peer script with `args`; its one JSON answer.
fn python_call(python: &str, args: &[&str]) -> Result<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/langgraph_interop_get_state.py");
    let output = Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{} {} failed ({}):\n{}",
            script.display(),
            args.first().copied().unwrap_or_default(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "the peer script answered no JSON ({e}):\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
        .into()
    })
}

/// The Python graph's shape on Waypoint's runtime. The nodes never run here: `get_state`
/// only needs the graph's channels and edges.
fn graph(
    saver: Arc<dyn CheckpointSaver>,
) -> waypoint_runtime::Result<CompiledGraph<MessagesState>> {
    let mut graph = StateGraph::<MessagesState>::new();
    let idle = |_: Arc<MessagesState>, _: Context| async {
        Ok::<_, BoxError>(MessagesStateUpdate::default())
    };
    graph.add_node("agent", idle).add_node("tools", idle);
    graph
        .add_edge(START, "agent")
        .add_conditional_edges(
            "agent",
            |state: &MessagesState| match state.messages.last() {
                Some(m) if !m.tool_calls().is_empty() => "tools",
                _ => END,
            },
            [("tools", "tools"), (END, END)],
        )
        .add_edge("tools", "agent");
    graph.compile(CompileOptions::default().checkpointer(saver))
}

/// A message as the peer script shows one: `{"module", "class", "dump": model_dump()}`.
fn view(message: &Message) -> Value {
    json!({
        "module": message.module(),
        "class": message.class_name(),
        "dump": message.model_dump(),
    })
}

/// Checks that Waypoint reads the thread Python built: same checkpoint, nothing next, and
/// the same messages in the same order, field by field.
async fn check_same_thread(
    graph: &CompiledGraph<MessagesState>,
    config: &RunConfig,
    built: &Value,
) -> Result<Vec<Message>> {
    let state = graph.get_state(config).await?;
    let python: &[Value] = built["messages"]
        .as_array()
        .ok_or("build gave no messages")?;
    let ours: Vec<Value> = state.values.messages.iter().map(view).collect();
    if python.len() != MESSAGES || ours.len() != MESSAGES {
        return Err(format!(
            "Python shows {} messages, Waypoint {}; {MESSAGES} expected",
            python.len(),
            ours.len()
        )
        .into());
    }
    let diffs: Vec<String> = python
        .iter()
        .zip(&ours)
        .enumerate()
        .filter(|(_, (p, w))| p != w)
        .map(|(i, (p, w))| format!("messages[{i}]:\n  python   {p}\n  waypoint {w}"))
        .collect();
    if !diffs.is_empty() {
        return Err(format!(
            "{} of {MESSAGES} messages differ; the first:\n{}",
            diffs.len(),
            diffs[..diffs.len().min(3)].join("\n")
        )
        .into());
    }
    let checkpoint = state.config.checkpoint_id.as_deref();
    if checkpoint != built["checkpoint_id"].as_str() {
        return Err(format!(
            "Waypoint reads checkpoint {checkpoint:?}, Python {}",
            built["checkpoint_id"]
        )
        .into());
    }
    if !state.next.is_empty() {
        return Err(format!("Waypoint sees next = {:?}, Python none", state.next).into());
    }
    Ok(state.values.messages)
}

/// `call` timed as the script times Python's `get_state`: one warm-up call, calls per repeat
/// calibrated to [`TARGET_SECS`], [`REPEATS`] repeats; the per-call seconds of each repeat.
async fn time_calls<F, Fut>(call: F) -> Result<Vec<f64>>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let timed = |iterations: u32| {
        let call = &call;
        async move {
            let start = Instant::now();
            for _ in 0..iterations {
                call().await?;
            }
            Ok::<Duration, BoxError>(start.elapsed())
        }
    };
    timed(1).await?;
    let mut iterations = 1u32;
    let elapsed = loop {
        let elapsed = timed(iterations).await?;
        if elapsed >= Duration::from_millis(200) {
            break elapsed;
        }
        iterations *= 2;
    };
    let scaled = f64::from(iterations) * TARGET_SECS / elapsed.as_secs_f64();
    let iterations = (scaled.round() as u32).max(1);
    let mut per_call = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        per_call.push(timed(iterations).await?.as_secs_f64() / f64::from(iterations));
    }
    Ok(per_call)
}

/// Waypoint's `graph.get_state(config)`, timed by [`time_calls`].
async fn time_waypoint(
    graph: &CompiledGraph<MessagesState>,
    config: &RunConfig,
) -> Result<Vec<f64>> {
    time_calls(|| async {
        let state = graph.get_state(config).await?;
        if state.values.messages.len() != MESSAGES {
            return Err("the thread lost messages".into());
        }
        std::hint::black_box(state);
        Ok(())
    })
    .await
}

/// The saver's `get_tuple` alone (one query; values still encoded), timed by
/// [`time_calls`], and the `messages` value it reads: Python's bytes.
async fn time_get_tuple(
    saver: &Arc<dyn CheckpointSaver>,
    thread: &str,
) -> Result<(Vec<f64>, SerializedValue)> {
    let config = CheckpointConfig::new(thread);
    let tuple = saver
        .get_tuple(&config)
        .await?
        .ok_or("the thread has no checkpoint")?;
    let value = tuple
        .checkpoint
        .channel_values
        .get("messages")
        .ok_or("the checkpoint holds no messages value")?
        .clone();
    let times = time_calls(|| async {
        std::hint::black_box(saver.get_tuple(&config).await?);
        Ok(())
    })
    .await?;
    Ok((times, value))
}

/// One row of the encoding table: bytes, and encode and decode seconds per call (no encode
/// for Python's bytes).
struct Cost {
    name: &'static str,
    bytes: usize,
    encode: Option<Vec<f64>>,
    decode: Vec<f64>,
}

/// The 200 messages in LangGraph's encoding (Python's bytes, then Waypoint's) and in the
/// positional msgpack: size, encode and decode time, each decode checked against `messages`.
async fn encoding_costs(messages: &[Message], python: &SerializedValue) -> Result<Vec<Cost>> {
    let mut out = Vec::new();
    let langgraph = Serde::new(Format::LangGraph);
    let decode = |serde: &Serde, value: &SerializedValue| -> Result<()> {
        let back: Vec<Message> = serde.loads(value)?;
        std::hint::black_box(back);
        Ok(())
    };
    if langgraph.loads::<Vec<Message>>(python)? != messages {
        return Err("Python's bytes decode to other messages".into());
    }
    out.push(Cost {
        name: "LangGraph's, Python's bytes (what `get_state` decodes)",
        bytes: python.bytes.len(),
        encode: None,
        decode: time_calls(|| async { decode(&langgraph, python) }).await?,
    });
    for (name, serde) in [
        ("LangGraph's, written by Waypoint", langgraph.clone()),
        (
            "positional msgpack (`Format::MsgPack`)",
            Serde::new(Format::MsgPack),
        ),
    ] {
        let stored = serde.dumps(messages)?;
        if serde.format() == Format::LangGraph {
            let first_difference = stored
                .bytes
                .iter()
                .zip(python.bytes.iter())
                .position(|(a, b)| a != b);
            match first_difference {
                None if stored.bytes.len() == python.bytes.len() => {
                    println!(
                        "- Waypoint's LangGraph encoding of the messages: Python's bytes exactly"
                    )
                }
                at => println!(
                    "- Waypoint's LangGraph encoding of the messages: {} bytes, Python's {}, \
                     first difference at byte {}",
                    stored.bytes.len(),
                    python.bytes.len(),
                    at.unwrap_or(stored.bytes.len().min(python.bytes.len()))
                ),
            }
        }
        if serde.loads::<Vec<Message>>(&stored)? != messages {
            return Err(format!("{name}: the messages do not round-trip").into());
        }
        let encode = time_calls(|| async {
            std::hint::black_box(serde.dumps(messages)?);
            Ok(())
        })
        .await?;
        out.push(Cost {
            name,
            bytes: stored.bytes.len(),
            encode: Some(encode),
            decode: time_calls(|| async { decode(&serde, &stored) }).await?,
        });
    }
    Ok(out)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn best(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn ms(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

fn bench(rt: &tokio::runtime::Runtime, python: &str, url: &str) -> Result<()> {
    let built = python_call(python, &["build", "--url", url])?;
    let thread = built["thread_id"]
        .as_str()
        .ok_or("build gave no thread id")?
        .to_owned();
    let saver = rt.block_on(async {
        let saver = PostgresSaver::from_url(url).await?;
        saver.setup().await?;
        Ok::<_, BoxError>(saver)
    })?;
    let saver: Arc<dyn CheckpointSaver> = Arc::new(saver);
    let graph = graph(Arc::clone(&saver))?;
    let config = RunConfig::thread(thread.clone());
    let messages = rt.block_on(check_same_thread(&graph, &config, &built))?;

    println!(
        "# get_state of a Python LangGraph thread of {MESSAGES} messages: LangGraph vs Waypoint\n"
    );
    for (package, version) in built["versions"].as_object().into_iter().flatten() {
        println!("- {package}: {}", version.as_str().unwrap_or_default());
    }
    println!(
        "- thread written by LangGraph in {:.1} s; Waypoint reads the same {MESSAGES} messages \
         (class and model_dump() of each) at checkpoint {}",
        built["build_s"].as_f64().unwrap_or_default(),
        built["checkpoint_id"].as_str().unwrap_or_default()
    );
    println!(
        "- each measurement: 1 warm-up call, calls calibrated to ~{TARGET_SECS} s per repeat, \
         {REPEATS} repeats; {ROUNDS} rounds, Python then Waypoint\n"
    );

    let repeats = REPEATS.to_string();
    let target = TARGET_SECS.to_string();
    let (mut py_all, mut wp_all) = (Vec::new(), Vec::new());
    let mut rows = Vec::new();
    for round in 1..=ROUNDS {
        let timed = python_call(
            python,
            &[
                "time",
                "--url",
                url,
                "--thread",
                &thread,
                "--repeats",
                &repeats,
                "--target",
                &target,
            ],
        )?;
        if timed["n_messages"].as_u64() != Some(MESSAGES as u64)
            || timed["checkpoint_id"] != built["checkpoint_id"]
        {
            return Err(format!("Python timed another state: {timed}").into());
        }
        let py: Vec<f64> = timed["per_call_s"]
            .as_array()
            .ok_or("time gave no per_call_s")?
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        let wp = rt.block_on(time_waypoint(&graph, &config))?;
        rows.push(format!(
            "| {round} | {} (best {}) | {} (best {}) | {:.1}x |",
            ms(median(&py)),
            ms(best(&py)),
            ms(median(&wp)),
            ms(best(&wp)),
            median(&py) / median(&wp)
        ));
        py_all.extend(py);
        wp_all.extend(wp);
    }
    let ratio = median(&py_all) / median(&wp_all);
    println!(
        "| round | Python get_state, median | Waypoint get_state, median | Python / Waypoint |"
    );
    println!("|---|---:|---:|---:|");
    for row in rows {
        println!("{row}");
    }
    println!(
        "| all {} repeats | {} (best {}) | {} (best {}) | **{ratio:.1}x** |",
        py_all.len(),
        ms(median(&py_all)),
        ms(best(&py_all)),
        ms(median(&wp_all)),
        ms(best(&wp_all)),
    );
    let (get_tuple, python_value) = rt.block_on(time_get_tuple(&saver, &thread))?;
    println!(
        "\n- of Waypoint's get_state: saver.get_tuple alone (one query, values still encoded) \
         {} (best {}); decoding the messages is the first row below",
        ms(median(&get_tuple)),
        ms(best(&get_tuple)),
    );
    let costs = rt.block_on(encoding_costs(&messages, &python_value))?;
    println!(
        "\nThe same {MESSAGES} messages, `Vec<Message>`, per encoding (medians of {REPEATS} repeats):\n"
    );
    println!("| encoding | bytes | encode | decode |");
    println!("|---|---:|---:|---:|");
    for cost in &costs {
        println!(
            "| {} | {} | {} | {} |",
            cost.name,
            cost.bytes,
            cost.encode
                .as_deref()
                .map_or("-".to_owned(), |e| ms(median(e))),
            ms(median(&cost.decode)),
        );
    }
    println!(
        "\nissue 18's figure (at least 5x): {}",
        if ratio >= 5.0 { "met" } else { "NOT met" }
    );
    Ok(())
}
