//! What the runtime stores for interrupts, resumes, sends and subgraphs has LangGraph's
//! shapes, so Python LangGraph resumes what Waypoint paused and the reverse: the task ids of
//! the writes are the tasks' ids, interrupt ids hash the task's namespace, a
//! `Command(resume=v)` is the null task's raw `__resume__`, answers by id are not stored, a
//! subgraph checkpoints in `node:task_id` (`|1` for a second call) and gets its resume in
//! memory. (`src/pregel_tests.rs` pins the ids against real LangGraph.)

use std::sync::Arc;

use serde_json::{Map, Value, json};
use waypoint_checkpoint::{
    CheckpointConfig, CheckpointSaver, Format, InMemorySaver, ListOptions, PendingWrite, Serde,
    channels,
};
use waypoint_runtime::{
    Command, CompileOptions, CompiledGraph, Context, END, JsonSchema, JsonState, RunConfig, START,
    StateGraph,
};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn thread() -> RunConfig {
    RunConfig::thread(uuid::Uuid::new_v4().to_string())
}

fn xxh3(text: &str) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
}

fn options(saver: &Arc<InMemorySaver>, format: Format) -> CompileOptions {
    let saver: Arc<dyn CheckpointSaver> = saver.clone();
    CompileOptions {
        serde: Serde::new(format),
        ..CompileOptions::default()
    }
    .checkpointer(saver)
}

/// The pending writes of the latest checkpoint of `thread` in namespace `ns`.
async fn pending(saver: &InMemorySaver, config: &RunConfig, ns: &str) -> Vec<PendingWrite> {
    checkpoint_writes(saver, config, ns, None).await
}

async fn checkpoint_writes(
    saver: &InMemorySaver,
    config: &RunConfig,
    ns: &str,
    id: Option<&str>,
) -> Vec<PendingWrite> {
    let config = CheckpointConfig {
        thread_id: config.thread_id.clone().unwrap_or_default(),
        checkpoint_ns: Some(ns.to_owned()),
        checkpoint_id: id.map(str::to_owned),
    };
    saver
        .get_tuple(&config)
        .await
        .expect("get_tuple")
        .map(|t| t.pending_writes)
        .unwrap_or_default()
}

fn decoded(format: Format, write: &PendingWrite) -> Value {
    Serde::new(format).loads(&write.value).expect("decode")
}

/// `ask` asks twice; `after` logs.
fn asking(saver: &Arc<InMemorySaver>, format: Format) -> CompiledGraph<JsonState> {
    let mut graph = StateGraph::json(JsonSchema::new().append("answers"));
    graph.add_node("ask", |_s: JsonState, ctx: Context| async move {
        let first = ctx.interrupt("first?")?;
        let second = ctx.interrupt("second?")?;
        Ok(obj(json!({"answers": [first, second]})))
    });
    graph.add_edge(START, "ask").add_edge("ask", END);
    graph.compile(options(saver, format)).expect("compile")
}

#[tokio::test]
async fn interrupts_and_resumes_are_stored_as_langgraph_stores_them() -> TestResult {
    let saver = Arc::new(InMemorySaver::new());
    let graph = asking(&saver, Format::Json);
    let config = thread();
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    let task = graph.get_state(&config).await?.tasks.remove(0);
    let ns = format!("ask:{}", task.id);
    assert_eq!(
        out.interrupts[0].id,
        xxh3(&ns),
        "the hash of the task's namespace"
    );

    // The task's own `__interrupt__` write: a list of {value, id}.
    let writes = pending(&saver, &config, "").await;
    let interrupt = writes
        .iter()
        .find(|w| w.channel == channels::INTERRUPT)
        .ok_or("no interrupt write")?;
    assert_eq!(interrupt.task_id, task.id);
    assert_eq!(
        decoded(Format::Json, interrupt),
        json!([{"value": "first?", "id": xxh3(&ns)}])
    );

    // A resume is the null task's raw value; the task then stores what it consumed.
    let paused_at = graph.get_state(&config).await?.config.checkpoint_id;
    let out = graph.invoke(Command::resume("a1"), &config).await?;
    assert_eq!(out.interrupts[0].id, xxh3(&format!("{ns}|1")));
    let writes = checkpoint_writes(&saver, &config, "", paused_at.as_deref()).await;
    let value = |task: &str, channel: &str| {
        writes
            .iter()
            .find(|w| w.task_id == task && w.channel == channel)
            .map(|w| decoded(Format::Json, w))
    };
    assert_eq!(
        value(channels::NULL_TASK_ID, channels::RESUME),
        Some(json!("a1"))
    );
    assert_eq!(value(&task.id, channels::RESUME), Some(json!(["a1"])));
    assert_eq!(
        value(&task.id, channels::INTERRUPT),
        Some(json!([{"value": "second?", "id": xxh3(&format!("{ns}|1"))}]))
    );

    // Answers by id are handed to the task, not stored as a null-task write.
    let out = graph
        .invoke(
            Command::resume_by_id([(xxh3(&format!("{ns}|1")), json!("a2"))]),
            &config,
        )
        .await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("answers"), Some(&json!(["a1", "a2"])));
    let writes = checkpoint_writes(&saver, &config, "", paused_at.as_deref()).await;
    let null_resumes: Vec<Value> = writes
        .iter()
        .filter(|w| w.task_id == channels::NULL_TASK_ID && w.channel == channels::RESUME)
        .map(|w| decoded(Format::Json, w))
        .collect();
    assert_eq!(null_resumes, vec![json!("a1")]);
    Ok(())
}

#[tokio::test]
async fn langgraph_encoding_writes_interrupt_and_send_objects() -> TestResult {
    let saver = Arc::new(InMemorySaver::new());
    let graph = asking(&saver, Format::LangGraph);
    let config = thread();
    graph.invoke(Some(obj(json!({}))), &config).await?;
    let writes = pending(&saver, &config, "").await;
    let interrupt = writes
        .iter()
        .find(|w| w.channel == channels::INTERRUPT)
        .ok_or("no interrupt write")?;
    let stored = decoded(Format::LangGraph, interrupt);
    assert_eq!(stored[0]["id"], json!(["langgraph", "types", "Interrupt"]));
    assert_eq!(stored[0]["ext"], json!(2));
    assert_eq!(stored[0]["kwargs"]["value"], json!("first?"));
    let out = graph.invoke(Command::resume("a1"), &config).await?;
    assert_eq!(out.interrupts[0].value, json!("second?"));

    // Pending sends: a list of LangGraph `Send` objects, [node, arg] their arguments.
    let mut fan = StateGraph::json(JsonSchema::new().append("log").last_value("item"));
    fan.add_node("plan", |_s: JsonState, _c: Context| async {
        Ok(obj(json!({})))
    });
    fan.add_node("work", |s: JsonState, _c: Context| async move {
        Ok(obj(
            json!({"log": [s.get("item").cloned().unwrap_or_default()]}),
        ))
    });
    fan.add_edge(START, "plan");
    fan.add_conditional_edges(
        "plan",
        |s: &JsonState| {
            ["x", "y"]
                .into_iter()
                .map(|item| {
                    let arg = s.with_values(obj(json!({"item": item}))).expect("arg");
                    waypoint_runtime::Send::new("work", arg)
                })
                .collect::<Vec<_>>()
        },
        ["work"],
    );
    fan.add_edge("work", END);
    let fan = fan.compile(options(&saver, Format::LangGraph))?;
    let config = thread();
    let out = fan.invoke(Some(obj(json!({}))), &config).await?;
    assert_eq!(out.get("log"), Some(&json!(["x", "y"])));
    let thread_config = CheckpointConfig::new(config.thread_id.clone().unwrap_or_default());
    let tuples = saver
        .list(Some(&thread_config), &ListOptions::default())
        .await?;
    let sends = tuples
        .iter()
        .find_map(|t| t.checkpoint.channel_values.get(channels::TASKS))
        .ok_or("no pending sends")?;
    let sends: Value = Serde::new(Format::LangGraph).loads(sends)?;
    assert_eq!(sends[0]["id"], json!(["langgraph", "types", "Send"]));
    assert_eq!(sends[0]["ext"], json!(1));
    assert_eq!(sends[1]["args"][0], json!("work"));
    assert_eq!(sends[1]["args"][1]["item"], json!("y"));
    Ok(())
}

#[tokio::test]
async fn subgraphs_checkpoint_in_langgraph_namespaces_and_resume_in_memory() -> TestResult {
    let saver = Arc::new(InMemorySaver::new());
    let mut sub = StateGraph::json(JsonSchema::new().append("answers"));
    sub.add_node("inner", |_s: JsonState, ctx: Context| async move {
        Ok(obj(json!({"answers": [ctx.interrupt("inner?")?]})))
    });
    sub.add_edge(START, "inner").add_edge("inner", END);
    let sub = sub.compile(CompileOptions::default())?;
    let mut echo = StateGraph::json(JsonSchema::new().last_value("n"));
    echo.add_node("bump", |s: JsonState, _c: Context| async move {
        let n = s.get("n").and_then(Value::as_i64).unwrap_or(0);
        Ok(obj(json!({"n": n + 1})))
    });
    echo.add_edge(START, "bump").add_edge("bump", END);
    let echo = echo.compile(CompileOptions::default())?;

    let mut graph = StateGraph::json(JsonSchema::new().append("answers").append("log"));
    graph.add_subgraph("outer", sub);
    graph.add_node("twice", move |_s: JsonState, ctx: Context| {
        let echo = echo.clone();
        async move {
            let a = ctx.call(&echo, Some(obj(json!({"n": 0})))).await?;
            let b = ctx.call(&echo, Some(obj(json!({"n": a.get("n")})))).await?;
            Ok(obj(json!({"log": [b.get("n")]})))
        }
    });
    graph
        .add_edge(START, "outer")
        .add_edge(START, "twice")
        .add_edge("outer", END)
        .add_edge("twice", END);
    let graph = graph.compile(options(&saver, Format::Json))?;
    let config = thread();
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    let tasks = graph.get_state(&config).await?.tasks;
    let id_of = |name: &str| {
        tasks
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.id.clone())
            .expect("task")
    };
    let (outer, twice) = (id_of("outer"), id_of("twice"));
    let outer_ns = format!("outer:{outer}");

    // The subgraph's interrupt id hashes its own task's namespace below the parent's.
    let inner_writes = pending(&saver, &config, &outer_ns).await;
    let inner = inner_writes
        .iter()
        .find(|w| w.channel == channels::INTERRUPT)
        .ok_or("no interrupt in the subgraph")?;
    let inner_ns = format!("{outer_ns}|inner:{}", inner.task_id);
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].id, xxh3(&inner_ns));
    // The calling task's own `__interrupt__` holds it too.
    let parent = pending(&saver, &config, "").await;
    let bubbled = parent
        .iter()
        .find(|w| w.channel == channels::INTERRUPT)
        .ok_or("no interrupt in the parent")?;
    assert_eq!(bubbled.task_id, outer);
    assert_eq!(
        decoded(Format::Json, bubbled)[0]["id"],
        json!(xxh3(&inner_ns))
    );
    // A node calling a subgraph twice checkpoints it in `ns` and `ns|1`.
    for ns in [format!("twice:{twice}"), format!("twice:{twice}|1")] {
        let config = CheckpointConfig {
            thread_id: config.thread_id.clone().unwrap_or_default(),
            checkpoint_ns: Some(ns.clone()),
            checkpoint_id: None,
        };
        assert!(saver.get_tuple(&config).await?.is_some(), "nothing in {ns}");
    }

    let inner_paused = CheckpointConfig {
        thread_id: config.thread_id.clone().unwrap_or_default(),
        checkpoint_ns: Some(outer_ns.clone()),
        checkpoint_id: None,
    };
    let inner_paused = saver
        .get_tuple(&inner_paused)
        .await?
        .map(|t| t.checkpoint.id);
    let out = graph.invoke(Command::resume("s1"), &config).await?;
    assert!(!out.interrupted, "{:?}", out.interrupts);
    assert_eq!(out.get("answers"), Some(&json!(["s1"])));
    assert_eq!(out.get("log"), Some(&json!([2])));
    // The resume reached the subgraph in memory: nothing stored in its namespace for it.
    let writes = checkpoint_writes(&saver, &config, &outer_ns, inner_paused.as_deref()).await;
    assert!(
        writes.iter().all(|w| w.task_id != channels::NULL_TASK_ID),
        "{writes:?}"
    );
    Ok(())
}

#[tokio::test]
async fn resume_by_id_reaches_an_interrupt_inside_a_subgraph() -> TestResult {
    let saver = Arc::new(InMemorySaver::new());
    let mut sub = StateGraph::json(JsonSchema::new().append("answers"));
    sub.add_node("inner", |_s: JsonState, ctx: Context| async move {
        Ok(obj(json!({"answers": [ctx.interrupt("inner?")?]})))
    });
    sub.add_edge(START, "inner").add_edge("inner", END);
    let sub = sub.compile(CompileOptions::default())?;
    let mut graph = StateGraph::json(JsonSchema::new().append("answers"));
    graph.add_subgraph("outer", sub);
    graph.add_node("side", |_s: JsonState, ctx: Context| async move {
        Ok(obj(json!({"answers": [ctx.interrupt("side?")?]})))
    });
    graph
        .add_edge(START, "outer")
        .add_edge(START, "side")
        .add_edge("outer", END)
        .add_edge("side", END);
    let graph = graph.compile(options(&saver, Format::Json))?;
    let config = thread();
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert_eq!(out.interrupts.len(), 2);
    let answers = out.interrupts.iter().map(|i| {
        let answer = i.value.as_str().unwrap_or("?").trim_end_matches('?');
        (i.id.clone(), json!(answer))
    });
    let out = graph
        .invoke(Command::resume_by_id(answers), &config)
        .await?;
    assert!(!out.interrupted, "{:?}", out.interrupts);
    let mut got: Vec<String> =
        serde_json::from_value(out.get("answers").cloned().unwrap_or_default())?;
    got.sort();
    assert_eq!(got, ["inner", "side"]);
    Ok(())
}

/// Two tasks pause; answering one by id finishes it. As LangGraph reads a step's writes,
/// only the unfinished task's interrupt is still pending, though the finished one's write
/// stays stored.
#[tokio::test]
async fn interrupts_of_finished_tasks_are_not_pending() -> TestResult {
    let saver = Arc::new(InMemorySaver::new());
    let mut graph = StateGraph::json(JsonSchema::new().append("answers"));
    for name in ["left", "right"] {
        graph.add_node(name, |_s: JsonState, ctx: Context| async move {
            Ok(obj(json!({"answers": [ctx.interrupt(ctx.node())?]})))
        });
        graph.add_edge(START, name).add_edge(name, END);
    }
    let graph = graph.compile(options(&saver, Format::Json))?;
    let config = thread();
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    let left = out
        .interrupts
        .iter()
        .find(|i| i.value == json!("left"))
        .ok_or("no left interrupt")?
        .clone();
    let out = graph
        .invoke(
            Command::resume_by_id([(left.id.clone(), json!("L"))]),
            &config,
        )
        .await?;
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value, json!("right"));
    let snap = graph.get_state(&config).await?;
    assert_eq!(snap.interrupts, out.interrupts);
    let stored = pending(&saver, &config, "").await;
    let interrupt_writes = stored
        .iter()
        .filter(|w| w.channel == channels::INTERRUPT)
        .count();
    assert_eq!(interrupt_writes, 2, "the finished task's write is kept");
    // A single value now answers the one pending interrupt.
    let out = graph.invoke(Command::resume("R"), &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("answers"), Some(&json!(["L", "R"])));
    Ok(())
}

/// An `__interrupt__` write that cannot be read shows as such in `get_state`, and a resume
/// fails naming the task instead of skipping it.
#[tokio::test]
async fn an_unreadable_interrupt_is_an_error_not_a_skip() -> TestResult {
    let saver = Arc::new(InMemorySaver::new());
    let graph = asking(&saver, Format::Json);
    let config = thread();
    graph.invoke(Some(obj(json!({}))), &config).await?;
    let snap = graph.get_state(&config).await?;
    let task = &snap.tasks[0];
    let bad = Serde::new(Format::Json).dumps(&json!([{"lc": 2, "type": "constructor",
        "id": ["langgraph", "types", "Send"], "ext": 1, "args": ["x", 1], "kwargs": {}}]))?;
    let at = CheckpointConfig {
        thread_id: config.thread_id.clone().unwrap_or_default(),
        checkpoint_ns: Some(String::new()),
        checkpoint_id: snap.config.checkpoint_id.clone(),
    };
    saver
        .put_writes(
            &at,
            vec![(channels::INTERRUPT.to_owned(), bad)],
            &task.id,
            "",
        )
        .await?;
    let snap = graph.get_state(&config).await?;
    assert_eq!(snap.interrupts.len(), 1);
    let shown = snap.interrupts[0].value.as_str().unwrap_or_default();
    assert!(shown.contains("langgraph.types.Interrupt"), "{shown}");
    let err = graph
        .invoke(Command::resume("x"), &config)
        .await
        .err()
        .ok_or("a resume over an unreadable interrupt must fail")?;
    assert!(err.to_string().contains(&task.id), "{err}");
    Ok(())
}
