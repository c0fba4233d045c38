//! A real Python LangGraph app (`tests/interop/app.py`, langgraph from the pinned venv) and
//! Waypoint share threads on one PostgreSQL database, both ways (issue 18, item 7).
//!
//! Each scenario plays a script of hops (a new input, or a resume of the pending interrupt),
//! each hop on the side it names, on one thread; after every hop both sides read the thread
//! and must agree field by field (message classes, ids, tool calls, usage, additional_kwargs,
//! response_metadata; the pydantic model and the dataclass keep their class and Python's
//! `==`; the inline str/int fields are there), and the thread must hold what the same script
//! gives when Python plays every hop (a reference thread, played alongside). The last test
//! runs Python and Waypoint writers on one thread at once: every Waypoint run commits or is
//! refused with `Conflict`, and none forks the thread silently. One more carries values of many
//! Python types (datetimes, UUID, Decimal, sets, enums, a namedtuple, bytes, NaN and infinite
//! floats, dicts keyed by ints and tuples…) through a Waypoint node that rewrites them.
//!
//! Skipped (with the reason printed) without `WAYPOINT_TEST_POSTGRES_URL` and
//! `WAYPOINT_TEST_PYTHON` (`WAYPOINT_TEST_PYTHON_06` for langgraph 0.6); a failure instead when
//! `WAYPOINT_REQUIRE_BACKENDS=1`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use waypoint_runtime::{Error, RunConfig};
use waypoint_test_kit::{env_or_skip, postgres_url};
use waypoint_tests::interop::{
    PyApp, Waypoint, assert_same_history, assert_same_state, counter_graph, drop_database,
    fresh_database, input, masked, message_classes, run_once, types_graph,
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type TestResult = Result<(), BoxError>;

/// Who plays a hop.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    Python,
    Waypoint,
}
use Side::{Python as Py, Waypoint as Wp};

/// One hop: a new input, or a resume of the pending interrupt.
#[derive(Clone, Debug)]
enum Step {
    Input(Value),
    Resume(Value),
}

/// The first turn: a question that the model answers with two tool calls, then the research
/// subgraph asks (`check`), then the parent asks (`review`).
fn turn_one() -> [Step; 3] {
    [
        Step::Input(input(
            "rust",
            "human-1",
            json!({"topic": "ferris", "profile": {"name": "ada", "tier": 1, "tags": ["x"]}}),
        )),
        Step::Resume(json!("yes")),
        Step::Resume(json!("ship it")),
    ]
}

/// The second turn, on the same thread.
fn turn_two() -> [Step; 3] {
    [
        Step::Input(input("and crabs?", "human-2", json!({"topic": "crabs"}))),
        Step::Resume(json!("ok")),
        Step::Resume(json!("done")),
    ]
}

/// A test's two sides on its own database.
struct Session {
    py: PyApp,
    wp: Waypoint,
    url: String,
    server: String,
}

impl Session {
    /// Ends the Python app and drops the database (kept when the test failed before this).
    async fn finish(self) {
        let Session {
            py,
            wp,
            url,
            server,
        } = self;
        drop((py, wp));
        drop_database(&server, &url).await;
    }
}

/// Python's app and Waypoint's graphs on a fresh database (set up by Python first, as a
/// LangGraph service's database would be), or `None` when a server or interpreter is missing.
async fn open(python_var: &str) -> Result<Option<Session>, BoxError> {
    let Some(server) = postgres_url() else {
        return Ok(None);
    };
    let Some(python) = env_or_skip(python_var) else {
        return Ok(None);
    };
    let url = fresh_database(&server).await?;
    let mut py = PyApp::start(&python, &url)?;
    py.setup()?;
    let wp = Waypoint::open(&url).await?;
    Ok(Some(Session {
        py,
        wp,
        url,
        server,
    }))
}

/// Plays one hop on `side`. After Waypoint's, the interrupts its run returned are the ones
/// Python finds pending.
async fn hop(py: &mut PyApp, wp: &Waypoint, side: Side, thread: &str, step: &Step) -> TestResult {
    let outcome = match (side, step) {
        (Py, Step::Input(spec)) => return py.invoke(thread, spec).map(drop),
        (Py, Step::Resume(value)) => return py.resume(thread, value).map(drop),
        (Wp, Step::Input(spec)) => wp.invoke(thread, spec).await?,
        (Wp, Step::Resume(value)) => wp.resume(thread, value).await?,
    };
    let returned: Vec<Value> = outcome
        .interrupts
        .iter()
        .map(|i| json!({"id": i.id, "value": i.value}))
        .collect();
    assert_eq!(
        Value::Array(returned),
        py.interrupts(thread)?,
        "the interrupts Waypoint's run returned are those Python finds pending"
    );
    assert_eq!(outcome.interrupted, !outcome.interrupts.is_empty());
    Ok(())
}

/// The profile and note `==` Python must find equal to what it read: the kwargs Waypoint
/// reads for them.
fn expectations(waypoint: &Value) -> Value {
    let mut expect = json!({});
    for key in ["profile", "note"] {
        if let Some(dump) = waypoint["values"][key].get("dump") {
            expect[key] = dump.clone();
        }
    }
    expect
}

/// Both sides' views of `thread`, compared; Python's `==` of its profile and note against
/// Waypoint's reading holds.
async fn compare(
    py: &mut PyApp,
    wp: &Waypoint,
    thread: &str,
    at: &str,
) -> Result<(Value, Value), BoxError> {
    let ours = wp.get_state(thread).await?;
    let theirs = py.get_state(thread, Some(&expectations(&ours)))?;
    assert_same_state(at, &theirs, &ours);
    for key in ["profile", "note"] {
        let view = &theirs["values"][key];
        if !view.is_null() {
            assert_eq!(
                (view["module"].as_str(), view["class"].as_str()),
                (
                    Some("app"),
                    Some(if key == "profile" { "Profile" } else { "Note" })
                ),
                "{at}: Python revives {key} as its class"
            );
            assert_eq!(
                theirs["equal"][key],
                json!(true),
                "{at}: Python's == on {key}: {view}"
            );
        }
    }
    Ok((theirs, ours))
}

/// Plays `script` on `thread`, each hop on its side, and after every hop: both sides agree
/// on the thread (and on its whole history when `history`), and the thread matches a
/// reference thread (`{thread}-reference`) on which Python plays the same hops. Returns the
/// last views (Python's, Waypoint's).
async fn play_on(
    py: &mut PyApp,
    wp: &Waypoint,
    thread: &str,
    script: &[(Side, Step)],
    history: bool,
) -> Result<(Value, Value), BoxError> {
    let thread = thread.to_owned();
    let reference = format!("{thread}-reference");
    let mut last = (Value::Null, Value::Null);
    for (i, (side, step)) in script.iter().enumerate() {
        let at = format!("hop {i} ({side:?}: {step:?})");
        hop(py, wp, *side, &thread, step).await?;
        hop(py, wp, Py, &reference, step).await?;
        let (theirs, ours) = compare(py, wp, &thread, &at).await?;
        if history {
            let python_history = py.history(&thread)?;
            let waypoint_history = wp.history(&thread).await?;
            assert_same_history(&at, &python_history, &waypoint_history);
        }
        let expected = py.get_state(&reference, None)?;
        assert_eq!(
            masked(&ours["values"]),
            masked(&expected["values"]),
            "{at}: the thread holds what Python alone gives"
        );
        assert_eq!(
            ours["next"], expected["next"],
            "{at}: next, as Python alone"
        );
        let values = |v: &Value| -> Vec<Value> {
            v["interrupts"]
                .as_array()
                .map(|l| l.iter().map(|i| i["value"].clone()).collect())
                .unwrap_or_default()
        };
        assert_eq!(
            values(&ours),
            values(&expected),
            "{at}: the pending questions, as Python alone"
        );
        last = (theirs, ours);
    }
    Ok(last)
}

/// [`play_on`] a new thread; returns the thread and the last views.
async fn play(
    py: &mut PyApp,
    wp: &Waypoint,
    script: &[(Side, Step)],
    history: bool,
) -> Result<(String, Value, Value), BoxError> {
    let thread = uuid::Uuid::new_v4().to_string();
    let (theirs, ours) = play_on(py, wp, &thread, script, history).await?;
    Ok((thread, theirs, ours))
}

/// Sides for a script: `sides[i]` plays hop `i`.
fn script(steps: impl IntoIterator<Item = Step>, sides: &[Side]) -> Vec<(Side, Step)> {
    sides.iter().copied().zip(steps).collect()
}

fn both_turns() -> Vec<Step> {
    turn_one().into_iter().chain(turn_two()).collect()
}

// ---------------------------------------------------------------------------------------
// Python writes, Waypoint reads, continues, resumes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waypoint_reads_a_python_thread_state_and_history() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let (py, wp) = (&mut s.py, &s.wp);
    let (_, theirs, ours) = play(py, wp, &script(turn_one(), &[Py, Py, Py]), true).await?;
    assert_eq!(
        message_classes(&ours["values"]),
        [
            "HumanMessage",
            "AIMessage",
            "ToolMessage",
            "ToolMessage",
            "AIMessage"
        ]
    );
    for key in ["topic", "turns", "approved", "verdict"] {
        assert!(
            ours["values"].get(key).is_some(),
            "Waypoint reads the inline primitive `{key}`: {}",
            ours["values"]
        );
    }
    assert_eq!(theirs["values"]["turns"], json!(1));
    s.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waypoint_continues_a_python_thread_with_a_new_input() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let (py, wp) = (&mut s.py, &s.wp);
    let sides = [Py, Py, Py, Wp, Wp, Wp];
    let (thread, _, ours) = play(py, wp, &script(both_turns(), &sides), false).await?;
    assert_eq!(ours["values"]["turns"], json!(2));
    assert_eq!(
        ours["values"]["messages"].as_array().map(Vec::len),
        Some(10)
    );
    assert_same_history(
        "the end",
        &py.history(&thread)?,
        &wp.history(&thread).await?,
    );
    s.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waypoint_resumes_an_interrupt_in_a_python_subgraph() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let (py, wp) = (&mut s.py, &s.wp);
    let (thread, _, ours) = play(py, wp, &script(turn_one(), &[Py, Wp, Py]), false).await?;
    assert_eq!(ours["values"]["approved"], json!("yes"));
    assert_same_history(
        "the end",
        &py.history(&thread)?,
        &wp.history(&thread).await?,
    );
    s.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waypoint_resumes_an_interrupt_in_a_python_parent_graph() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let (py, wp) = (&mut s.py, &s.wp);
    let (thread, _, ours) = play(py, wp, &script(turn_one(), &[Py, Py, Wp]), false).await?;
    assert_eq!(ours["values"]["verdict"], json!("ship it"));
    assert_same_history(
        "the end",
        &py.history(&thread)?,
        &wp.history(&thread).await?,
    );
    s.finish().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Waypoint writes, Python reads, continues, resumes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_reads_a_waypoint_thread_state_and_history() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let (py, wp) = (&mut s.py, &s.wp);
    let (_, theirs, _) = play(py, wp, &script(turn_one(), &[Wp, Wp, Wp]), true).await?;
    assert_eq!(
        message_classes(&theirs["values"]),
        [
            "HumanMessage",
            "AIMessage",
            "ToolMessage",
            "ToolMessage",
            "AIMessage"
        ]
    );
    s.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_continues_a_waypoint_thread_with_a_new_input() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let (py, wp) = (&mut s.py, &s.wp);
    let sides = [Wp, Wp, Wp, Py, Py, Py];
    let (thread, theirs, _) = play(py, wp, &script(both_turns(), &sides), false).await?;
    assert_eq!(theirs["values"]["turns"], json!(2));
    assert_same_history(
        "the end",
        &py.history(&thread)?,
        &wp.history(&thread).await?,
    );
    s.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_resumes_an_interrupt_in_a_waypoint_subgraph() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let (py, wp) = (&mut s.py, &s.wp);
    let (thread, theirs, _) = play(py, wp, &script(turn_one(), &[Wp, Py, Wp]), false).await?;
    assert_eq!(theirs["values"]["approved"], json!("yes"));
    assert_same_history(
        "the end",
        &py.history(&thread)?,
        &wp.history(&thread).await?,
    );
    s.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_resumes_an_interrupt_in_a_waypoint_parent_graph() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let (py, wp) = (&mut s.py, &s.wp);
    let (thread, theirs, _) = play(py, wp, &script(turn_one(), &[Wp, Wp, Py]), false).await?;
    assert_eq!(theirs["values"]["verdict"], json!("ship it"));
    assert_same_history(
        "the end",
        &py.history(&thread)?,
        &wp.history(&thread).await?,
    );
    s.finish().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// langgraph 0.6.11 with langgraph-checkpoint-postgres 2.0.25

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langgraph_06_reads_and_continues_a_waypoint_thread() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON_06").await? else {
        return Ok(());
    };
    let (py, wp) = (&mut s.py, &s.wp);
    // Waypoint plays the first turn; langgraph 0.6 reads it (the messages are there, not
    // `[]`), plays the second, and Waypoint reads the result whole.
    let thread = uuid::Uuid::new_v4().to_string();
    let (theirs, _) = play_on(py, wp, &thread, &script(turn_one(), &[Wp, Wp, Wp]), false).await?;
    assert_eq!(
        message_classes(&theirs["values"]),
        [
            "HumanMessage",
            "AIMessage",
            "ToolMessage",
            "ToolMessage",
            "AIMessage"
        ],
        "langgraph 0.6 reads Waypoint's conversation"
    );
    let (theirs, ours) =
        play_on(py, wp, &thread, &script(turn_two(), &[Py, Py, Py]), false).await?;
    assert_eq!(
        message_classes(&theirs["values"]).len(),
        10,
        "langgraph 0.6 holds both turns"
    );
    assert_eq!(
        message_classes(&ours["values"]).len(),
        10,
        "Waypoint reads both turns"
    );
    assert_eq!(ours["values"]["turns"], json!(2));
    assert_eq!(
        ours["values"]["log"],
        json!(["agent", "agent", "review", "agent", "agent", "review"])
    );
    assert_same_history(
        "the end",
        &py.history(&thread)?,
        &wp.history(&thread).await?,
    );
    s.finish().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Values of many Python types through a Waypoint node

/// What the app's `types_check` answers for `thread`.
fn types_check(py: &mut PyApp, thread: &str) -> Result<Value, BoxError> {
    py.call(json!({"cmd": "types_check", "graph": "types", "thread": thread}))
}

/// LangGraph's `builtins.float` form, in which a value read as JSON carries `arg`.
fn float_form(arg: &str) -> Value {
    json!({"lc": 2, "type": "constructor", "id": ["builtins", "float"], "ext": null,
        "method": null, "args": [arg], "kwargs": {}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_values_of_many_types_survive_a_waypoint_node_that_rewrites_them() -> TestResult {
    let Some(mut s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let thread = uuid::Uuid::new_v4().to_string();
    let py = &mut s.py;
    py.call(json!({"cmd": "invoke", "graph": "types", "thread": thread, "input": {"fill": true}}))?;
    let theirs = types_check(py, &thread)?;
    assert_eq!(theirs["changed"], json!({}), "Python's own round trip");
    let kinds = theirs["same"].as_array().map_or(0, Vec::len);
    assert!(kinds >= 29, "every kind of value is stored: {theirs}");

    // Waypoint's node reads `misc` as JSON and writes it back with one key more.
    let graph = types_graph(&s.wp.saver)?;
    let config = RunConfig::thread(thread.as_str());
    let mut input = serde_json::Map::new();
    input.insert("log".to_owned(), json!([]));
    graph.invoke(Some(input.clone()), &config).await?;
    let ours = graph.get_state(&config).await?.values.to_value();
    let misc = &ours["misc"];
    assert_eq!(misc["waypoint"], json!(true));
    assert_eq!(misc["float"], json!(0.1));
    for (key, arg) in [("nan", "nan"), ("inf", "inf"), ("minus_inf", "-inf")] {
        assert_eq!(
            misc[key],
            float_form(arg),
            "{key} is carried, not read as null"
        );
    }

    // Python reads every value back with its class, and continues from Waypoint's checkpoint.
    let after = types_check(py, &thread)?;
    assert_eq!(after["same"], theirs["same"], "{after}");
    assert_eq!(after["changed"], json!({}));
    assert_eq!(after["missing"], json!([]));
    assert_eq!(after["extra"], json!({"waypoint": "True"}));
    assert_eq!(after["log"], json!(["python", "waypoint"]));
    py.call(json!({"cmd": "invoke", "graph": "types", "thread": thread, "input": {}}))?;
    let last = types_check(py, &thread)?;
    assert_eq!(last["same"], theirs["same"], "{last}");
    assert_eq!(last["log"], json!(["python", "waypoint", "python"]));

    // And Waypoint reads Python's last checkpoint as it read the first.
    graph.invoke(Some(input), &config).await?;
    let again = graph.get_state(&config).await?.values.to_value();
    assert_eq!(again["misc"], ours["misc"]);
    assert_eq!(
        again["log"],
        json!(["python", "waypoint", "python", "waypoint"])
    );
    s.finish().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Python and Waypoint writing one thread at once

/// Python processes, threads per process, and runs per process.
const PY_PROCESSES: usize = 2;
const PY_THREADS: usize = 3;
const PY_RUNS: usize = 150;
/// Waypoint tasks and runs per task.
const WP_TASKS: usize = 6;
const WP_RUNS: usize = 50;

/// Records, in commit order, every checkpoint row inserted (an instrument of this test's own
/// database: a row trigger firing after Waypoint's, which holds the namespace's turn until
/// commit).
const AUDIT: &[&str] = &[
    "CREATE TABLE interop_audit (
        seq BIGSERIAL PRIMARY KEY,
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        parent_checkpoint_id TEXT,
        writer TEXT,
        run_id TEXT
    )",
    "CREATE FUNCTION interop_audit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO interop_audit
            (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, writer, run_id)
        VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id, NEW.parent_checkpoint_id,
                NEW.metadata ->> 'writer', NEW.metadata ->> 'run_id');
        RETURN NEW;
    END $$",
    "CREATE TRIGGER zz_interop_audit AFTER INSERT ON checkpoints
        FOR EACH ROW EXECUTE FUNCTION interop_audit()",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_python_and_waypoint_runs_never_fork_silently() -> TestResult {
    let Some(s) = open("WAYPOINT_TEST_PYTHON").await? else {
        return Ok(());
    };
    let Session {
        mut py,
        wp,
        url,
        server,
    } = s;
    let python = py.python.clone();
    let db = sqlx::PgPool::connect(&url).await?;
    for statement in AUDIT {
        sqlx::query(statement).execute(&db).await?;
    }
    let thread = uuid::Uuid::new_v4().to_string();
    py.call(json!({"cmd": "invoke", "graph": "counter", "thread": thread, "input": {}}))?;
    drop(py);
    let counter = counter_graph(&wp.saver)?;
    let started = Instant::now();

    let pythons: Vec<_> = (0..PY_PROCESSES)
        .map(|_| {
            let (python, url, thread) = (python.clone(), url.clone(), thread.clone());
            std::thread::spawn(move || {
                run_once(
                    &python,
                    &url,
                    json!({
                        "cmd": "hammer",
                        "thread": thread,
                        "runs": PY_RUNS,
                        "threads": PY_THREADS,
                    }),
                )
                .map_err(|e| e.to_string())
            })
        })
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..WP_TASKS {
        let (counter, thread) = (counter.clone(), thread.clone());
        tasks.spawn(async move {
            let mut outcomes = Vec::new();
            for _ in 0..WP_RUNS {
                let run_id = uuid::Uuid::new_v4().to_string();
                let config = RunConfig::thread(thread.clone())
                    .run_id(run_id.clone())
                    .wait_for_thread(Duration::from_secs(30));
                let input = waypoint_tests::interop::CounterStateUpdate::default().log(vec![]);
                let outcome = counter.invoke(Some(input), &config).await;
                outcomes.push((task, run_id, outcome.map(drop)));
            }
            outcomes
        });
    }
    let mut committed = Vec::new();
    let mut refused = 0usize;
    let mut other = Vec::new();
    while let Some(outcomes) = tasks.join_next().await {
        for (_, run_id, outcome) in outcomes? {
            match outcome {
                Ok(()) => committed.push(run_id),
                Err(
                    Error::Conflict(_) | Error::Checkpoint(waypoint_checkpoint::Error::Conflict(_)),
                ) => {
                    refused += 1;
                }
                Err(e) => other.push(e.to_string()),
            }
        }
    }
    let mut python_committed = 0;
    for handle in pythons {
        let answer = handle.join().map_err(|_| "a Python process panicked")??;
        assert_eq!(answer["failed"], json!(0), "Python runs failed: {answer}");
        python_committed += answer["committed"].as_u64().unwrap_or(0);
    }
    let elapsed = started.elapsed();

    // Every Waypoint checkpoint W with parent P: no other checkpoint newer than P was
    // stored (committed) before W. Such a one would make W a silent fork.
    let forks: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT w.checkpoint_id, w.parent_checkpoint_id, r.checkpoint_id, r.writer
         FROM interop_audit w JOIN interop_audit r
           ON r.thread_id = w.thread_id AND r.checkpoint_ns = w.checkpoint_ns
         WHERE w.writer IS DISTINCT FROM 'python' AND w.parent_checkpoint_id IS NOT NULL
           AND r.seq < w.seq AND r.checkpoint_id <> w.checkpoint_id
           AND r.checkpoint_id > w.parent_checkpoint_id
         ORDER BY w.seq LIMIT 20",
    )
    .fetch_all(&db)
    .await?;
    let (waypoint_rows, python_rows): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE writer IS DISTINCT FROM 'python'),
                count(*) FILTER (WHERE writer = 'python')
         FROM interop_audit",
    )
    .fetch_one(&db)
    .await?;
    // Forks Python made (it takes no lease and checks nothing): parents with two children.
    let python_forks: (i64,) = sqlx::query_as(
        "SELECT count(*) FROM (SELECT parent_checkpoint_id FROM checkpoints
         WHERE thread_id = $1 AND parent_checkpoint_id IS NOT NULL
         GROUP BY parent_checkpoint_id HAVING count(*) > 1) AS f",
    )
    .bind(&thread)
    .fetch_one(&db)
    .await?;
    let by_run: BTreeMap<String, i64> = sqlx::query_as::<_, (Option<String>, i64)>(
        "SELECT run_id, count(*) FROM interop_audit
         WHERE writer IS DISTINCT FROM 'python' GROUP BY run_id",
    )
    .fetch_all(&db)
    .await?
    .into_iter()
    .filter_map(|(run, n)| run.map(|r| (r, n)))
    .collect();
    eprintln!(
        "concurrent writers on one thread in {elapsed:?}: Waypoint {} committed, {refused} refused \
         with Conflict, {} other errors ({waypoint_rows} checkpoints); Python {python_committed} \
         committed ({python_rows} checkpoints); parents with several children: {}",
        committed.len(),
        other.len(),
        python_forks.0
    );
    assert!(
        other.is_empty(),
        "Waypoint runs failed otherwise than with Conflict: {other:?}"
    );
    assert_eq!(committed.len() + refused, WP_TASKS * WP_RUNS);
    assert_eq!(python_committed as usize, PY_PROCESSES * PY_RUNS);
    for run in &committed {
        assert!(
            by_run.get(run).is_some_and(|n| *n >= 1),
            "committed Waypoint run {run} stored no checkpoint"
        );
    }
    assert!(
        forks.is_empty(),
        "Waypoint stored checkpoints whose parent was no longer the newest (silent forks): \
         [(waypoint checkpoint, its parent, newer one stored before it, its writer)] {forks:?}"
    );
    db.close().await;
    drop(wp);
    drop_database(&server, &url).await;
    Ok(())
}
