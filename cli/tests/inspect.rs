//! End to end: the `waypoint threads` and `waypoint store` commands, run as the real binary
//! against databases the runtime (or Python LangGraph) wrote.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use waypoint_checkpoint::{CheckpointSaver, ListOptions};
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_runtime::PostgresSaver;
use waypoint_runtime::RedisSaver;
use waypoint_runtime::{
    Command as Resume, CompileOptions, CompiledGraph, Context, END, JsonSchema, JsonState,
    RunConfig, START, StateGraph,
};
use waypoint_store::{IndexConfig, StoreConfig, StoreExt};
use waypoint_test_kit::{fresh_name, postgres_url, python, redis_url};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A database to inspect: its URL and a saver writing to it.
struct Backend {
    url: String,
    saver: Arc<dyn CheckpointSaver>,
    /// Whether only this test writes there (then `threads list` is exact).
    private: bool,
    _dir: Option<tempfile::TempDir>,
}

/// A fresh SQLite file, and the PostgreSQL and Redis test servers when their URLs are set.
async fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("w.db").display());
    let sqlite = SqliteSaver::from_url(&url).await.expect("sqlite");
    let mut out = vec![Backend {
        url,
        saver: Arc::new(sqlite),
        private: true,
        _dir: Some(dir),
    }];
    if let Some(url) = postgres_url() {
        let saver = PostgresSaver::from_url(&url).await.expect("postgres");
        saver.setup().await.expect("setup");
        out.push(Backend {
            url,
            saver: Arc::new(saver),
            private: false,
            _dir: None,
        });
    }
    if let Some(url) = redis_url() {
        let saver = RedisSaver::from_url(&url).await.expect("redis");
        out.push(Backend {
            url,
            saver: Arc::new(saver),
            private: false,
            _dir: None,
        });
    }
    out
}

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// `ask` interrupts with a question; `after` logs. `log` appends (stored as deltas).
fn ask_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<JsonState> {
    let mut graph = StateGraph::json(JsonSchema::new().last_value("answer").append("log"));
    graph.add_node("ask", |_: JsonState, ctx: Context| async move {
        let answer = ctx.interrupt(json!({"question": "name?"}))?;
        Ok(obj(json!({"answer": answer, "log": ["ask"]})))
    });
    graph.add_node("after", |_: JsonState, _: Context| async move {
        Ok(obj(json!({"log": ["after"]})))
    });
    graph
        .add_edge(START, "ask")
        .add_edge("ask", "after")
        .add_edge("after", END);
    graph
        .compile(CompileOptions::default().checkpointer(saver))
        .expect("compile")
}

/// Runs `waypoint ARGS --url URL`.
fn waypoint(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waypoint"))
        .args(args)
        .args(["--url", url])
        .env_remove("WAYPOINT_URL")
        .output()
        .expect("run waypoint")
}

/// Runs the command, expects success, returns stdout.
fn ok(url: &str, args: &[&str]) -> String {
    let out = waypoint(url, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Runs the command with `--json` and parses its one document.
fn json_of(url: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let text = ok(url, &args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

/// Expects exit code 1 and one `waypoint: error:` line containing `needle`.
fn fails(url: &str, args: &[&str], needle: &str) {
    let out = waypoint(url, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("waypoint: error: "), "{stderr}");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test]
async fn threads_list_show_history_match_the_runtime() -> TestResult {
    for backend in backends().await {
        let url = backend.url.as_str();
        let graph = ask_graph(Arc::clone(&backend.saver));
        let thread = fresh_name("ask");
        let config = RunConfig::thread(&thread);
        let out = graph
            .invoke(Some(obj(json!({"log": ["start"]}))), &config)
            .await?;
        assert!(out.interrupted);
        let snap = graph.get_state(&config).await?;
        let history = graph
            .get_state_history(&config, &Default::default())
            .await?;

        let shown = json_of(url, &["threads", "show", &thread]);
        assert_eq!(shown["next"], json!(snap.next), "{url}");
        assert_eq!(shown["checkpoint_id"], json!(snap.config.checkpoint_id));
        assert_eq!(shown["step"], json!(snap.metadata.step));
        // The metadata users see: no delta bookkeeping, though this thread keeps a delta.
        assert_eq!(shown["metadata"], json!(snap.metadata), "{url}");
        assert_eq!(shown["values"], json!({"log": ["start"]}), "delta rebuilt");
        assert!(
            shown["internal_channels"]
                .as_array()
                .is_some_and(|c| !c.is_empty())
        );
        let interrupts = shown["interrupts"].as_array().expect("interrupts");
        assert_eq!(interrupts.len(), 1);
        assert_eq!(interrupts[0]["id"], json!(out.interrupts[0].id));
        assert_eq!(interrupts[0]["value"], json!({"question": "name?"}));
        assert!(
            !shown["pending_writes"]
                .as_array()
                .expect("writes")
                .is_empty()
        );

        let listed = json_of(url, &["threads", "history", &thread]);
        let rows = listed["checkpoints"].as_array().expect("rows");
        assert_eq!(rows.len(), history.len());
        for (row, snap) in rows.iter().zip(&history) {
            assert_eq!(row["checkpoint_id"], json!(snap.config.checkpoint_id));
            assert_eq!(row["next"], json!(snap.next), "{url}");
        }
        let input = json_of(
            url,
            &["threads", "history", &thread, "--filter", "source=input"],
        );
        assert_eq!(input["checkpoints"].as_array().map(Vec::len), Some(1));
        // A filter on `writes` matches the writes shown, whether stored or rebuilt from where
        // the checkpoint says (the input's).
        let by_writes = json!({"writes": {"log": ["start"]}});
        let runtime_found = graph
            .get_state_history(&config, &ListOptions::default().filter(by_writes.clone()))
            .await?;
        let with_input = history
            .iter()
            .filter(|s| s.metadata.to_json().get("writes") == Some(&by_writes["writes"]));
        assert_eq!(runtime_found.len(), with_input.count(), "{url}");
        let found = json_of(
            url,
            &[
                "threads",
                "history",
                &thread,
                "--filter",
                r#"writes={"log":["start"]}"#,
            ],
        );
        let listed: Vec<&Value> = found["checkpoints"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|row| &row["checkpoint_id"])
            .collect();
        let expected: Vec<Value> = runtime_found
            .iter()
            .map(|s| json!(s.config.checkpoint_id))
            .collect();
        assert_eq!(listed, expected.iter().collect::<Vec<_>>(), "{url}");
        let first = rows[0]["checkpoint_id"].as_str().expect("id");
        let older = json_of(
            url,
            &[
                "threads", "history", &thread, "--before", first, "--limit", "1",
            ],
        );
        assert_eq!(
            older["checkpoints"][0]["checkpoint_id"],
            rows[1]["checkpoint_id"]
        );

        let list = json_of(url, &["threads", "list"]);
        let entry = list["threads"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["thread_id"] == json!(thread)))
            .expect("thread listed")
            .clone();
        assert_eq!(entry["checkpoints"], json!(history.len()));
        assert_eq!(entry["latest_checkpoint_id"], shown["checkpoint_id"]);
        assert_eq!(entry["namespaces"], json!([""]));
        if backend.private {
            assert_eq!(list["threads"].as_array().map(Vec::len), Some(1));
            let table = ok(url, &["threads", "list"]);
            assert!(table.starts_with("THREAD  "), "{table}");
            assert!(table.contains(&thread));
        }

        let table = ok(url, &["threads", "show", &thread]);
        assert!(table.contains("next        ask"), "{table}");
        assert!(table.contains("interrupts (1)"), "{table}");
        assert!(table.contains(r#"{"question":"name?"}"#), "{table}");
        let table = ok(url, &["threads", "history", &thread]);
        assert!(table.starts_with("CHECKPOINT"), "{table}");
        assert_eq!(table.lines().count(), history.len() + 1);

        // Once resumed, nothing is next and no interrupt is pending.
        graph.invoke(Resume::resume("Ada"), &config).await?;
        let shown = json_of(url, &["threads", "show", &thread]);
        assert_eq!(shown["next"], json!([]));
        assert_eq!(shown["interrupts"], json!([]));
        assert_eq!(shown["values"]["log"], json!(["start", "ask", "after"]));
        assert_eq!(shown["values"]["answer"], json!("Ada"));
    }
    Ok(())
}

#[tokio::test]
async fn fork_copy_prune_delete() -> TestResult {
    for backend in backends().await {
        let url = backend.url.as_str();
        let graph = ask_graph(Arc::clone(&backend.saver));
        let thread = fresh_name("fork");
        let config = RunConfig::thread(&thread);
        graph
            .invoke(Some(obj(json!({"log": ["start"]}))), &config)
            .await?;
        graph.invoke(Resume::resume("Ada"), &config).await?;
        let history = graph
            .get_state_history(&config, &Default::default())
            .await?;
        // The checkpoint where `ask` is next: fork there and the thread asks again.
        let at = history
            .iter()
            .find(|s| s.next == ["ask"])
            .and_then(|s| s.config.checkpoint_id.clone())
            .expect("a checkpoint before ask");

        let copy = fresh_name("copy");
        let forked = json_of(
            url,
            &["threads", "fork", &thread, "--at", &at, "--into", &copy],
        );
        assert_eq!(forked["thread_id"], json!(copy));
        assert_eq!(
            graph
                .get_state_history(&config, &Default::default())
                .await?
                .len(),
            history.len(),
            "--into leaves the source untouched"
        );
        let new_id = ok(url, &["threads", "fork", &thread, "--at", &at]);
        let new_id = new_id.trim();
        let shown = json_of(url, &["threads", "show", &thread]);
        assert_eq!(shown["checkpoint_id"], json!(new_id));
        assert_eq!(shown["source"], json!("fork"));
        assert_eq!(shown["next"], json!(["ask"]));
        assert_eq!(shown["values"], json!({"log": ["start"]}));
        let snap = graph.get_state(&config).await?;
        assert_eq!(snap.next, ["ask"], "the runtime sees the fork as latest");
        assert_eq!(snap.values.get("log"), Some(&json!(["start"])));
        let out = graph.invoke(None, &config).await?;
        assert!(out.interrupted, "the resumed run continues from the fork");
        let out = graph.invoke(Resume::resume("Bo"), &config).await?;
        assert_eq!(out.get("answer"), Some(&json!("Bo")));
        assert_eq!(out.get("log"), Some(&json!(["start", "ask", "after"])));

        // Copy, prune, delete.
        let copy2 = fresh_name("copy2");
        let copied = json_of(url, &["threads", "copy", &thread, &copy2]);
        assert_eq!(copied["target"], json!(copy2));
        fails(
            url,
            &["threads", "copy", &thread, &copy2],
            "already has checkpoints",
        );
        let before = json_of(url, &["threads", "history", &copy2]);
        let pruned = json_of(url, &["threads", "prune", &copy2]);
        assert_eq!(pruned["keep"], json!("latest"));
        // The latest stays (with the ancestors its delta channels need); the rest go.
        let left = json_of(url, &["threads", "history", &copy2]);
        let count = |v: &Value| v["checkpoints"].as_array().map_or(0, Vec::len);
        assert!(count(&left) < count(&before), "{left}");
        assert_eq!(left["checkpoints"][0], before["checkpoints"][0]);
        let latest = json_of(url, &["threads", "show", &copy2]);
        assert_eq!(latest["values"]["answer"], json!("Bo"));
        ok(url, &["threads", "prune", &copy, "--keep", "none"]);
        fails(url, &["threads", "show", &copy], "unknown thread");
        let deleted = ok(url, &["threads", "delete", &thread, &copy2]);
        assert!(deleted.starts_with("deleted 2 thread(s)"), "{deleted}");
        fails(url, &["threads", "history", &thread], "unknown thread");
    }
    Ok(())
}

#[tokio::test]
async fn unknown_threads_and_bad_targets_are_one_line_errors() -> TestResult {
    for backend in backends().await {
        let url = backend.url.as_str();
        let ghost = fresh_name("ghost");
        for args in [
            vec!["threads", "show", &ghost],
            vec!["threads", "history", &ghost],
            vec!["threads", "fork", &ghost, "--at", "x"],
            vec!["threads", "copy", &ghost, "elsewhere"],
            vec!["threads", "prune", &ghost],
            vec!["threads", "delete", &ghost],
        ] {
            fails(url, &args, "unknown thread");
        }
        let graph = ask_graph(Arc::clone(&backend.saver));
        let thread = fresh_name("t");
        graph
            .invoke(Some(obj(json!({}))), &RunConfig::thread(&thread))
            .await?;
        fails(
            url,
            &["threads", "show", &thread, "--checkpoint", "nope"],
            "no checkpoint `nope`",
        );
        fails(
            url,
            &["threads", "show", &thread, "--ns", "sub"],
            "no checkpoints in namespace",
        );
        fails(
            url,
            &["threads", "fork", &thread, "--at", "nope"],
            "no checkpoint `nope`",
        );
        // A mistyped id among good ones changes nothing.
        fails(
            url,
            &["threads", "delete", &thread, &ghost],
            "unknown thread",
        );
        ok(url, &["threads", "show", &thread]);
    }
    let dir = tempfile::tempdir()?;
    let missing = format!("sqlite:{}", dir.path().join("none.db").display());
    fails(&missing, &["threads", "list"], "no SQLite database");
    assert!(!dir.path().join("none.db").exists(), "nothing created");
    fails(&missing, &["store", "ls"], "no SQLite database");
    fails("mysql://x/y", &["threads", "list"], "unknown URL");
    fails(
        "postgres://127.0.0.1:1/x",
        &["threads", "list"],
        "127.0.0.1:1",
    );
    fails("redis://127.0.0.1:1/", &["threads", "list"], "127.0.0.1:1");
    fails("redis://127.0.0.1:1/", &["store", "ls"], "127.0.0.1:1");
    Ok(())
}

#[tokio::test]
async fn store_ls_and_search() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite:{}", dir.path().join("s.db").display());
    let config = StoreConfig::new().index(IndexConfig::hashing(64));
    let store = waypoint_runtime::Connect::new(&url)
        .store_config(config)
        .store()
        .await?;
    store
        .put(
            ["users", "alice", "memories"],
            "m1",
            json!({"text": "likes green tea", "n": 1}),
        )
        .await?;
    store
        .put(
            ["users", "alice", "memories"],
            "m2",
            json!({"text": "lives in Lisbon", "n": 2}),
        )
        .await?;
    store
        .put(
            ["users", "bob", "memories"],
            "m1",
            json!({"text": "plays chess", "n": 3}),
        )
        .await?;
    drop(store);

    let listed = json_of(&url, &["store", "ls"]);
    assert_eq!(
        listed["namespaces"],
        json!([["users", "alice", "memories"], ["users", "bob", "memories"]])
    );
    assert_eq!(
        ok(&url, &["store", "ls"]),
        "users.alice.memories\nusers.bob.memories\n"
    );
    let items = json_of(&url, &["store", "ls", "users.alice"]);
    let keys: Vec<&str> = items["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["key"].as_str())
        .collect();
    assert_eq!(keys.len(), 2);
    assert_eq!(
        items["items"][0]["namespace"],
        json!(["users", "alice", "memories"])
    );
    let table = ok(&url, &["store", "ls", "users.alice.memories"]);
    assert!(table.starts_with("NAMESPACE "), "{table}");
    assert!(table.contains("likes green tea"), "{table}");

    let found = json_of(
        &url,
        &["store", "search", "users", "--filter", "n={\"$gt\":1}"],
    );
    assert_eq!(found["items"].as_array().map(Vec::len), Some(2));
    let found = json_of(
        &url,
        &[
            "store",
            "search",
            "users",
            "green tea",
            "--embed",
            "hashing:64",
            "--limit",
            "1",
        ],
    );
    assert_eq!(found["items"][0]["value"]["text"], json!("likes green tea"));
    assert!(found["items"][0]["score"].is_number());
    let table = ok(
        &url,
        &["store", "search", "users", "chess", "--embed", "hashing:64"],
    );
    assert!(table.contains("SCORE"), "{table}");

    fails(
        &url,
        &["store", "search", "users", "tea"],
        "--embed hashing:DIMS",
    );
    fails(
        &url,
        &["store", "search", "users", "tea", "--embed", "word2vec"],
        "unknown embedder",
    );
    fails(&url, &["store", "ls", "users..x"], "empty");
    fails(
        &url,
        &[
            "store",
            "search",
            "users",
            "--filter",
            "n={\"$regex\":\"x\"}",
        ],
        "unknown operator",
    );
    // A hostile key is only ever a key: it matches nothing and breaks nothing.
    let found = json_of(
        &url,
        &["store", "search", "users", "--filter", "x') OR 1=1 --=1"],
    );
    assert_eq!(found["items"], json!([]));
    Ok(())
}

/// A database the real LangGraph wrote: values decode, next and interrupts match its own
/// `get_state` and `get_state_history` (pending `Send`s included), LangChain messages show
/// as messages and other Python objects keep their class.
#[tokio::test]
async fn reads_what_python_langgraph_wrote() -> TestResult {
    let Some(server_url) = postgres_url() else {
        return Ok(());
    };
    let Some(python) = python() else {
        return Ok(());
    };
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/langgraph_interrupted.py");
    let name = fresh_name("inspect");
    let out = Command::new(python)
        .arg(&script)
        .args([server_url.as_str(), &name, "py-thread"])
        .output()?;
    assert!(
        out.status.success(),
        "fixture failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: Value = serde_json::from_slice(&out.stdout)?;
    let url = expected["url"].as_str().expect("url");

    let list = json_of(url, &["threads", "list"]);
    assert_eq!(list["threads"][0]["thread_id"], json!("py-thread"));
    assert_eq!(list["threads"][0]["checkpoints"], expected["history"]);

    let shown = json_of(url, &["threads", "show", "py-thread"]);
    assert_eq!(shown["next"], expected["next"]);
    assert_eq!(shown["values"]["topic"], expected["values"]["topic"]);
    assert_eq!(shown["values"]["log"], expected["values"]["log"]);
    let interrupts: Vec<Value> = shown["interrupts"]
        .as_array()
        .expect("interrupts")
        .iter()
        .map(|i| json!({"id": i["id"], "value": i["value"]}))
        .collect();
    assert_eq!(Value::Array(interrupts), expected["interrupts"]);

    // The conversation, field by field as Python's `model_dump()` has it (the inspector
    // leaves out fields at their defaults).
    let messages = shown["values"]["messages"].as_array().expect("messages");
    let python = expected["messages"].as_array().expect("python messages");
    assert_eq!(messages.len(), python.len(), "{messages:?}");
    for (shown, python) in messages.iter().zip(python) {
        for (field, value) in python.as_object().expect("a dict") {
            let empty = value.is_null()
                || value.as_object().is_some_and(|o| o.is_empty())
                || value.as_array().is_some_and(|a| a.is_empty());
            let at_default = empty || (field == "status" && value == "success");
            match shown.get(field) {
                Some(got) => assert_eq!(got, value, "{field} of {shown}"),
                None => assert!(at_default, "{field} missing from {shown}"),
            }
        }
    }
    assert_eq!(messages[1]["tool_calls"][0]["name"], json!("search"));
    assert_eq!(shown["values"]["note"]["type"], expected["note"]["type"]);
    assert_eq!(
        shown["values"]["note"]["content"],
        expected["note"]["content"]
    );
    // A datetime is not a message: it keeps its class and its arguments.
    let when = &shown["values"]["when"];
    assert_eq!(when["id"], json!(["datetime", "datetime"]), "{when}");
    assert_eq!(when["args"], json!(["2024-01-02T03:04:05+00:00"]), "{when}");

    let table = ok(url, &["threads", "show", "py-thread"]);
    assert!(!table.contains("<cannot decode"), "{table}");
    assert!(
        table.contains(r#"{"content":"find cats","id":"h1","type":"human"}"#),
        "{table}"
    );

    let history = json_of(url, &["threads", "history", "py-thread"]);
    let rows = history["checkpoints"].as_array().expect("rows");
    assert_eq!(json!(rows.len()), expected["history"]);
    let next: Vec<Value> = rows.iter().map(|r| r["next"].clone()).collect();
    assert_eq!(Value::Array(next), expected["history_next"]);

    // A functional API thread keeps its state in bookkeeping channels: `--internal` shows
    // the value LangGraph's `get_state` does, and what `previous` will be.
    let func = json_of(url, &["threads", "show", "py-thread-func"]);
    assert_eq!(func["values"], json!({}));
    assert_eq!(
        func["internal_channels"],
        json!(["__end__", "__previous__"])
    );
    assert_eq!(func.get("internal_values"), None);
    let func = json_of(url, &["threads", "show", "py-thread-func", "--internal"]);
    assert_eq!(func["internal_values"]["__end__"], expected["functional"]);
    assert_eq!(func["internal_values"]["__previous__"], json!(6));
    let table = ok(url, &["threads", "show", "py-thread-func"]);
    assert!(
        table.contains("2 internal not shown, --internal shows them"),
        "{table}"
    );
    let table = ok(url, &["threads", "show", "py-thread-func", "--internal"]);
    assert!(table.contains(r#"{"doubled":[0,2,4]}"#), "{table}");
    Ok(())
}
