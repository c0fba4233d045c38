//! One async fn per runtime behaviour; each takes the saver to run on.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use waypoint_checkpoint::{
    CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, ListOptions,
};
use waypoint_runtime::{
    Command, CompileOptions, Context, Durability, END, Error, JsonSchema, JsonState, RunConfig,
    START, Send, StateGraph, StreamMode, StreamPart,
};
use waypoint_store::{InMemoryStore, StoreExt};

use crate::graphs::{
    Calls, Failures, FooBar, FooBarUpdate, documented_json, documented_typed, linear, logging_node,
    slow_logger,
};
use crate::{TestResult, obj, thread};

type Saver = Arc<dyn CheckpointSaver>;

fn source(meta: &CheckpointMetadata) -> Option<CheckpointSource> {
    meta.source
}

/// LangGraph's documented example: 4 checkpoints, input then loop, steps -1..2, `next`
/// `__start__`, `node_a`, `node_b`, nothing, the documented values, and parent links.
pub async fn documented_example_json(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = documented_json(saver, &calls)?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({"foo": ""}))), &config).await?;
    assert_eq!(out.to_value(), json!({"foo": "b", "bar": ["a", "b"]}));

    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    assert_eq!(history.len(), 4);
    let values: Vec<Value> = history.iter().map(|s| s.values.to_value()).collect();
    assert_eq!(
        values,
        vec![
            json!({"foo": "b", "bar": ["a", "b"]}),
            json!({"foo": "a", "bar": ["a"]}),
            json!({"foo": "", "bar": []}),
            json!({"bar": []}),
        ]
    );
    let next: Vec<Vec<String>> = history.iter().map(|s| s.next.clone()).collect();
    assert_eq!(
        next,
        vec![
            vec![],
            vec!["node_b".to_owned()],
            vec!["node_a".to_owned()],
            vec![START.to_owned()]
        ]
    );
    let sources: Vec<_> = history.iter().map(|s| source(&s.metadata)).collect();
    use CheckpointSource::{Input, Loop};
    assert_eq!(
        sources,
        vec![Some(Loop), Some(Loop), Some(Loop), Some(Input)]
    );
    let steps: Vec<_> = history.iter().map(|s| s.metadata.step).collect();
    assert_eq!(steps, vec![Some(2), Some(1), Some(0), Some(-1)]);
    for pair in history.windows(2) {
        assert_eq!(pair[0].parent_config.as_ref(), Some(&pair[1].config));
    }
    assert_eq!(history[3].parent_config, None);
    // Tasks mirror `next`, with stable ids and no errors.
    assert_eq!(history[1].tasks.len(), 1);
    assert_eq!(history[1].tasks[0].name, "node_b");
    assert!(history[1].tasks[0].error.is_none());
    assert!(history[0].tasks.is_empty());

    let latest = graph.get_state(&config).await?;
    assert_eq!(latest.config, history[0].config);
    assert_eq!(latest.values.to_value(), values[0]);
    assert!(latest.created_at.ends_with("+00:00") && latest.created_at.contains('T'));
    assert_eq!((calls.get("node_a"), calls.get("node_b")), (1, 1));
    Ok(())
}

/// The documented example on a `#[derive(State)]` struct gives the same checkpoints.
pub async fn documented_example_typed(saver: Saver) -> TestResult {
    let graph = documented_typed(saver)?;
    let config = RunConfig::thread(thread());
    let out = graph
        .invoke(Some(FooBarUpdate::default().foo("")), &config)
        .await?;
    assert!(!out.interrupted);
    assert_eq!(
        *out.values,
        FooBar {
            foo: "b".into(),
            bar: vec!["a".into(), "b".into()]
        }
    );
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let values: Vec<(String, Vec<String>)> = history
        .iter()
        .map(|s| (s.values.foo.clone(), s.values.bar.clone()))
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        values,
        vec![
            ("b".into(), s(&["a", "b"])),
            ("a".into(), s(&["a"])),
            ("".into(), vec![]),
            ("".into(), vec![]),
        ]
    );
    let next: Vec<Vec<String>> = history.iter().map(|s| s.next.clone()).collect();
    assert_eq!(
        next,
        vec![vec![], s(&["node_b"]), s(&["node_a"]), s(&[START])]
    );
    Ok(())
}

/// History filters by metadata, pages with `before` and `limit`, newest first.
pub async fn history_filter_before_limit(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = linear(saver, 3, &calls)?;
    let config = RunConfig::thread(thread());
    graph
        .invoke(Some(obj(json!({"log": ["in"]}))), &config)
        .await?;
    let all = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    assert_eq!(all.len(), 5);
    let steps: Vec<_> = all.iter().map(|s| s.metadata.step.unwrap_or(-9)).collect();
    assert_eq!(steps, vec![3, 2, 1, 0, -1]);

    let loops = graph
        .get_state_history(
            &config,
            &ListOptions::default().filter(json!({"source": "loop"})),
        )
        .await?;
    assert_eq!(loops.len(), 4);
    let step1 = graph
        .get_state_history(&config, &ListOptions::default().filter(json!({"step": 1})))
        .await?;
    assert_eq!(step1.len(), 1);
    assert_eq!(
        step1[0].values.to_value(),
        json!({"log": ["in", "n0"], "last": "n0"})
    );

    let before = all[1].config.checkpoint_id.clone().ok_or("no id")?;
    let page = graph
        .get_state_history(&config, &ListOptions::default().before(before).limit(2))
        .await?;
    let page_steps: Vec<_> = page.iter().map(|s| s.metadata.step).collect();
    assert_eq!(page_steps, vec![Some(1), Some(0)]);
    Ok(())
}

/// `update_state` folds values through reducers: `{foo: 1, bar: [a]}` + `{foo: 2, bar: [b]}`
/// gives `{foo: 2, bar: [a, b]}`, in a new checkpoint with source `update`.
pub async fn update_state_applies_reducers(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = documented_json(saver, &calls)?;
    let config = RunConfig::thread(thread());
    let first = graph
        .update_state(
            &config,
            Some(obj(json!({"foo": 1, "bar": ["a"]}))),
            Some("node_b"),
        )
        .await?;
    assert_eq!(
        graph.get_state(&config).await?.values.to_value(),
        json!({"foo": 1, "bar": ["a"]})
    );
    let second = graph
        .update_state(
            &config,
            Some(obj(json!({"foo": 2, "bar": ["b"]}))),
            Some("node_b"),
        )
        .await?;
    let snap = graph.get_state(&config).await?;
    assert_eq!(snap.values.to_value(), json!({"foo": 2, "bar": ["a", "b"]}));
    assert_eq!(snap.metadata.source, Some(CheckpointSource::Update));
    assert_eq!(snap.config, second);
    assert_eq!(
        snap.parent_config
            .as_ref()
            .and_then(|c| c.checkpoint_id.clone()),
        first.checkpoint_id
    );
    assert!(snap.next.is_empty(), "node_b's successor is END");
    // A key the schema does not declare is refused and writes nothing.
    let err = graph
        .update_state(&config, Some(obj(json!({"nope": 1}))), Some("node_a"))
        .await;
    assert!(matches!(err, Err(Error::InvalidUpdate(_))), "{err:?}");
    assert_eq!(graph.get_state(&config).await?.config, second);
    assert_eq!(calls.get("node_a") + calls.get("node_b"), 0);
    Ok(())
}

/// `as_node` decides what runs next: updating as `node_a` schedules `node_b`, and resuming
/// runs only `node_b`.
pub async fn update_state_as_node_decides_next(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = documented_json(saver, &calls)?;
    let config = RunConfig::thread(thread());
    graph.invoke(Some(obj(json!({"foo": ""}))), &config).await?;
    graph
        .update_state(&config, Some(obj(json!({"foo": "x"}))), Some("node_a"))
        .await?;
    let snap = graph.get_state(&config).await?;
    assert_eq!(snap.next, vec!["node_b".to_owned()]);
    let out = graph.invoke(None, &config).await?;
    assert_eq!(out.to_value(), json!({"foo": "b", "bar": ["a", "b", "b"]}));
    assert_eq!((calls.get("node_a"), calls.get("node_b")), (1, 2));
    // As an unknown node: a clear error.
    let err = graph.update_state(&config, None, Some("ghost")).await;
    assert!(matches!(err, Err(Error::InvalidUpdate(_))), "{err:?}");
    Ok(())
}

/// Without `as_node`, the update counts as the last node that ran; a parallel step makes
/// that ambiguous, which is an error.
pub async fn update_state_infers_last_writer(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = documented_json(Arc::clone(&saver), &calls)?;
    let config = RunConfig::thread(thread());
    graph.invoke(Some(obj(json!({"foo": ""}))), &config).await?;
    graph
        .update_state(&config, Some(obj(json!({"foo": "z"}))), None)
        .await?;
    let snap = graph.get_state(&config).await?;
    assert!(
        snap.next.is_empty(),
        "as node_b, nothing follows: {:?}",
        snap.next
    );
    assert_eq!(
        snap.values.to_value(),
        json!({"foo": "z", "bar": ["a", "b"]})
    );

    // Two nodes in the last step: which one the update stands for is ambiguous.
    let mut fan = StateGraph::json(JsonSchema::new().append("log"));
    for name in ["left", "right"] {
        fan.add_node(name, move |_s: JsonState, _c: Context| async move {
            Ok(obj(json!({"log": [name]})))
        });
        fan.add_edge(START, name);
    }
    let fan = fan.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    fan.invoke(Some(obj(json!({}))), &config).await?;
    let err = fan
        .update_state(&config, Some(obj(json!({"log": ["x"]}))), None)
        .await;
    assert!(matches!(err, Err(Error::InvalidUpdate(_))), "{err:?}");
    fan.update_state(&config, Some(obj(json!({"log": ["x"]}))), Some("left"))
        .await?;
    assert_eq!(
        fan.get_state(&config).await?.values.get("log"),
        Some(&json!(["left", "right", "x"]))
    );
    Ok(())
}

/// Forking from a past checkpoint makes a new branch whose parent is that checkpoint; the old
/// branch is untouched and the fork runs on from there.
pub async fn fork_from_past_checkpoint(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = documented_json(saver, &calls)?;
    let config = RunConfig::thread(thread());
    graph.invoke(Some(obj(json!({"foo": ""}))), &config).await?;
    let before = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let after_a = before
        .iter()
        .find(|s| s.metadata.step == Some(1))
        .ok_or("no step 1")?;
    assert_eq!(after_a.next, vec!["node_b".to_owned()]);

    let fork = graph
        .update_state(
            &after_a.config,
            Some(obj(json!({"foo": "forked"}))),
            Some("node_a"),
        )
        .await?;
    let snap = graph.get_state(&fork).await?;
    assert_eq!(snap.parent_config.as_ref(), Some(&after_a.config));
    assert_eq!(
        snap.values.to_value(),
        json!({"foo": "forked", "bar": ["a"]})
    );
    assert_eq!(snap.next, vec!["node_b".to_owned()]);
    assert_eq!(snap.metadata.step, Some(2));

    // The old branch: same checkpoints, same values.
    let old = graph.get_state(&before[0].config).await?;
    assert_eq!(
        old.values.to_value(),
        json!({"foo": "b", "bar": ["a", "b"]})
    );
    let all = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    assert_eq!(all.len(), 5);

    // Running the fork continues it; the thread's latest is now the fork's end.
    let out = graph.invoke(None, &fork).await?;
    assert_eq!(out.to_value(), json!({"foo": "b", "bar": ["a", "b"]}));
    let latest = graph.get_state(&config).await?;
    assert_eq!(latest.parent_config.as_ref(), Some(&fork));
    assert_eq!((calls.get("node_a"), calls.get("node_b")), (1, 2));
    Ok(())
}

/// Replaying from a past checkpoint re-runs only the steps after it.
pub async fn replay_reruns_only_later_steps(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = linear(saver, 3, &calls)?;
    let config = RunConfig::thread(thread());
    graph.invoke(Some(obj(json!({"log": []}))), &config).await?;
    assert_eq!(
        (calls.get("n0"), calls.get("n1"), calls.get("n2")),
        (1, 1, 1)
    );
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let after_n0 = history
        .iter()
        .find(|s| s.next == ["n1"])
        .ok_or("no n1 checkpoint")?;

    let out = graph.invoke(None, &after_n0.config).await?;
    assert_eq!(
        out.to_value(),
        json!({"log": ["n0", "n1", "n2"], "last": "n2"})
    );
    assert_eq!(
        (calls.get("n0"), calls.get("n1"), calls.get("n2")),
        (1, 2, 2)
    );
    // The replay is a branch off that checkpoint: a fork copying it (so a pause during the
    // replay is found by the next resume), then the two re-run steps.
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    assert_eq!(history.len(), 5 + 3);
    assert_eq!(history[2].metadata.source, Some(CheckpointSource::Fork));
    assert_eq!(history[2].parent_config.as_ref(), Some(&after_n0.config));
    assert_eq!(history[2].values.to_value(), after_n0.values.to_value());
    assert_eq!(history[1].parent_config.as_ref(), Some(&history[2].config));

    // Replaying the final checkpoint runs nothing.
    graph.invoke(None, &history[0].config).await?;
    assert_eq!(calls.get("n2"), 2);
    Ok(())
}

/// Two nodes in one step, one fails: the other's writes are saved, the error is recorded on
/// the failed task, and resuming re-runs only the failed node.
pub async fn failed_node_resumes_alone(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let failures = Failures::new(1);
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node("steady", {
        let calls = calls.clone();
        move |_s: JsonState, _c: Context| {
            calls.hit("steady");
            async { Ok(obj(json!({"log": ["steady"]}))) }
        }
    });
    graph.add_node("flaky", {
        let calls = calls.clone();
        move |_s: JsonState, _c: Context| {
            calls.hit("flaky");
            let fail = failures.take();
            async move {
                if fail {
                    return Err("flaky is down".into());
                }
                Ok(obj(json!({"log": ["flaky"]})))
            }
        }
    });
    graph.add_edge(START, "steady").add_edge(START, "flaky");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());

    let err = graph
        .invoke(Some(obj(json!({"log": ["in"]}))), &config)
        .await;
    match err {
        Err(Error::Node { node, source }) => {
            assert_eq!(node, "flaky");
            assert_eq!(source.to_string(), "flaky is down");
        }
        other => return Err(format!("expected a node error, got {other:?}").into()),
    }
    let snap = graph.get_state(&config).await?;
    let mut next = snap.next.clone();
    next.sort();
    assert_eq!(next, vec!["flaky".to_owned(), "steady".to_owned()]);
    let flaky = snap
        .tasks
        .iter()
        .find(|t| t.name == "flaky")
        .ok_or("no flaky task")?;
    assert!(
        flaky
            .error
            .as_deref()
            .is_some_and(|e| e.contains("flaky is down"))
    );
    assert!(
        snap.tasks
            .iter()
            .any(|t| t.name == "steady" && t.error.is_none())
    );

    let out = graph.invoke(None, &config).await?;
    let mut log: Vec<String> = serde_json::from_value(out.get("log").cloned().unwrap_or_default())?;
    log.sort();
    assert_eq!(log, vec!["flaky", "in", "steady"]);
    assert_eq!((calls.get("steady"), calls.get("flaky")), (1, 2));
    Ok(())
}

/// A graph that never ends stops at `recursion_limit` with a clear error.
pub async fn recursion_limit_stops_run(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let mut graph = StateGraph::json(JsonSchema::new().append("log").last_value("last"));
    graph.add_node("spin", logging_node(&calls));
    graph.add_edge(START, "spin").add_edge("spin", "spin");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread()).recursion_limit(5);
    let err = graph.invoke(Some(obj(json!({}))), &config).await;
    assert!(matches!(err, Err(Error::Recursion { limit: 5 })), "{err:?}");
    assert_eq!(
        calls.get("spin"),
        4,
        "the start step counts as one of the five"
    );
    // The default limit is 25.
    let err = graph
        .invoke(Some(obj(json!({}))), &RunConfig::thread(thread()))
        .await;
    assert!(
        matches!(err, Err(Error::Recursion { limit: 25 })),
        "{err:?}"
    );
    Ok(())
}

/// `stream` yields values, updates, custom data and debug events, several modes at once.
pub async fn stream_modes(saver: Saver) -> TestResult {
    let mut graph = StateGraph::json(JsonSchema::new().last_value("foo").append("bar"));
    for name in ["node_a", "node_b"] {
        let letter = &name[5..];
        let update = obj(json!({"foo": letter, "bar": [letter]}));
        graph.add_node(name, move |_s: JsonState, ctx: Context| {
            ctx.write_custom(json!({"progress": ctx.node()}));
            let update = update.clone();
            async move { Ok(update) }
        });
    }
    graph.add_edge(START, "node_a").add_edge("node_a", "node_b");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;

    let config = RunConfig::thread(thread());
    let values: Vec<Value> = graph
        .stream(
            Some(obj(json!({"foo": ""}))),
            &config,
            &[StreamMode::Values],
        )
        .map(|part| match part {
            Ok(StreamPart::Values(state)) => Ok(state.to_value()),
            other => Err(format!("unexpected {other:?}")),
        })
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    assert_eq!(
        values,
        vec![
            json!({"foo": "", "bar": []}),
            json!({"foo": "a", "bar": ["a"]}),
            json!({"foo": "b", "bar": ["a", "b"]}),
        ]
    );

    let config = RunConfig::thread(thread());
    let modes = [
        StreamMode::Updates,
        StreamMode::Custom,
        StreamMode::Values,
        StreamMode::Debug,
    ];
    let parts: Vec<StreamPart<JsonState>> = graph
        .stream(Some(obj(json!({"foo": ""}))), &config, &modes)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let updates: Vec<(String, Value)> = parts
        .iter()
        .filter_map(|p| match p {
            StreamPart::Updates { node, update } => Some((node.clone(), json!(update))),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        vec![
            ("node_a".to_owned(), json!({"foo": "a", "bar": ["a"]})),
            ("node_b".to_owned(), json!({"foo": "b", "bar": ["b"]})),
        ]
    );
    let custom: Vec<Value> = parts
        .iter()
        .filter_map(|p| match p {
            StreamPart::Custom { value, .. } => Some(value.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        custom,
        vec![json!({"progress": "node_a"}), json!({"progress": "node_b"})]
    );
    let checkpoints = parts
        .iter()
        .filter(|p| matches!(p, StreamPart::Debug(e) if e["type"] == "checkpoint"))
        .count();
    assert_eq!(checkpoints, 4);
    // Within a step: the node's custom data, then its update, then the step's values.
    let order: Vec<StreamMode> = parts
        .iter()
        .map(StreamPart::mode)
        .filter(|m| *m != StreamMode::Debug)
        .collect();
    use StreamMode::{Custom, Updates, Values as V};
    assert_eq!(order, vec![V, Custom, Updates, V, Custom, Updates, V]);

    // A failing run ends its stream with the error.
    let mut failing = StateGraph::json(JsonSchema::new().last_value("foo"));
    failing.add_node("boom", |_s: JsonState, _c: Context| async {
        Err::<serde_json::Map<String, Value>, _>("boom".into())
    });
    failing.add_edge(START, "boom");
    let failing = failing.compile(CompileOptions::default())?;
    let parts: Vec<_> = failing
        .stream(
            Some(obj(json!({}))),
            &RunConfig::default(),
            &[StreamMode::Values],
        )
        .collect()
        .await;
    assert!(
        matches!(parts.last(), Some(Err(Error::Node { .. }))),
        "{parts:?}"
    );
    Ok(())
}

/// Exit durability writes one checkpoint, at the end, with the final state.
pub async fn durability_exit_writes_once(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = linear(saver, 3, &calls)?;
    let config = RunConfig::thread(thread()).durability(Durability::Exit);
    let out = graph.invoke(Some(obj(json!({"log": []}))), &config).await?;
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].values.to_value(), out.to_value());
    assert_eq!(history[0].metadata.step, Some(3));
    assert!(history[0].next.is_empty());
    assert_eq!(history[0].parent_config, None);
    // A second run chains to it.
    graph
        .invoke(Some(obj(json!({"log": ["again"]}))), &config)
        .await?;
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].parent_config.as_ref(), Some(&history[1].config));
    assert_eq!(
        history[0].values.to_value(),
        json!({"log": ["n0", "n1", "n2", "again", "n0", "n1", "n2"], "last": "n2"})
    );
    Ok(())
}

/// Async durability saves the same checkpoints as sync, in order, before `invoke` returns.
pub async fn durability_async_saves_every_step(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = linear(saver, 3, &calls)?;
    let config = RunConfig::thread(thread()).durability(Durability::Async);
    let out = graph.invoke(Some(obj(json!({"log": []}))), &config).await?;
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let steps: Vec<_> = history
        .iter()
        .map(|s| s.metadata.step.unwrap_or(-9))
        .collect();
    assert_eq!(steps, vec![3, 2, 1, 0, -1]);
    assert_eq!(history[0].values.to_value(), out.to_value());
    for pair in history.windows(2) {
        assert_eq!(pair[0].parent_config.as_ref(), Some(&pair[1].config));
    }
    Ok(())
}

/// In exit durability a failed run still saves where it stopped, and resumes from there.
pub async fn durability_exit_failure_is_resumable(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let failures = Failures::new(1);
    let mut graph = StateGraph::json(JsonSchema::new().append("log").last_value("last"));
    graph.add_node("first", logging_node(&calls));
    graph.add_node("second", {
        let calls = calls.clone();
        move |_s: JsonState, _c: Context| {
            calls.hit("second");
            let fail = failures.take();
            async move {
                if fail {
                    return Err("second failed".into());
                }
                Ok(obj(json!({"log": ["second"]})))
            }
        }
    });
    graph.add_edge(START, "first").add_edge("first", "second");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread()).durability(Durability::Exit);
    assert!(
        graph
            .invoke(Some(obj(json!({"log": []}))), &config)
            .await
            .is_err()
    );
    let snap = graph.get_state(&config).await?;
    assert_eq!(snap.next, vec!["second".to_owned()]);
    assert!(snap.tasks[0].error.is_some());
    let out = graph.invoke(None, &config).await?;
    assert_eq!(out.get("log"), Some(&json!(["first", "second"])));
    assert_eq!((calls.get("first"), calls.get("second")), (1, 2));
    Ok(())
}

/// A router returning `Send`s fans out one task per item, each with its own input; their
/// updates meet through the reducer.
pub async fn send_map_reduce(saver: Saver) -> TestResult {
    let mut graph = StateGraph::json(
        JsonSchema::new()
            .last_value("subjects")
            .append("jokes")
            .last_value("subject"),
    );
    graph.add_node("plan", |_s: JsonState, _c: Context| async {
        Ok(obj(json!({"subjects": ["cats", "dogs", "owls"]})))
    });
    graph.add_node("joke", |s: JsonState, _c: Context| async move {
        let subject = s
            .get("subject")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned();
        Ok(obj(json!({"jokes": [format!("a joke about {subject}")]})))
    });
    graph.add_edge(START, "plan");
    graph.add_conditional_edges(
        "plan",
        |s: &JsonState| {
            let subjects = s
                .get("subjects")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            subjects
                .into_iter()
                .map(|subject| {
                    let arg = s
                        .with_values(obj(json!({"subject": subject})))
                        .unwrap_or_else(|_| s.clone());
                    Send::new("joke", arg)
                })
                .collect::<Vec<_>>()
        },
        ["joke"],
    );
    graph.add_edge("joke", END);
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert_eq!(
        out.get("jokes"),
        Some(&json!([
            "a joke about cats",
            "a joke about dogs",
            "a joke about owls"
        ]))
    );
    // The pending sends are visible in the checkpoint after `plan`.
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let after_plan = history
        .iter()
        .find(|s| s.metadata.step == Some(1))
        .ok_or("no step 1")?;
    assert_eq!(after_plan.next, vec!["joke", "joke", "joke"]);
    Ok(())
}

/// A node's `Command` updates the state and picks the next node itself.
pub async fn command_update_and_goto(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let mut graph = StateGraph::json(JsonSchema::new().append("log").last_value("last"));
    graph.add_node("decide", |_s: JsonState, _c: Context| async {
        Ok(Command::update(obj(json!({"log": ["decide"]}))).and_goto("right"))
    });
    graph.add_node("left", logging_node(&calls));
    graph.add_node("right", logging_node(&calls));
    graph.add_destinations("decide", ["left", "right"]);
    graph.add_edge(START, "decide");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let out = graph
        .invoke(Some(obj(json!({}))), &RunConfig::thread(thread()))
        .await?;
    assert_eq!(out.get("log"), Some(&json!(["decide", "right"])));
    assert_eq!((calls.get("left"), calls.get("right")), (0, 1));
    Ok(())
}

/// Conditional edges route by the state after the node's update, through the mapping.
pub async fn conditional_edges_with_map(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let mut graph = StateGraph::json(
        JsonSchema::new()
            .append("log")
            .last_value("last")
            .last_value("n"),
    );
    graph.add_node("count", |s: JsonState, _c: Context| async move {
        let n = s.get("n").and_then(Value::as_i64).unwrap_or(0);
        Ok(obj(json!({"n": n + 1, "log": [format!("count{}", n + 1)]})))
    });
    graph.add_node("done", logging_node(&calls));
    graph.add_edge(START, "count");
    graph.add_conditional_edges(
        "count",
        |s: &JsonState| s.get("n").and_then(Value::as_i64).unwrap_or(0) < 3,
        [("true", "count"), ("false", "done")],
    );
    graph.add_edge("done", END);
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({"n": 0}))), &config).await?;
    assert_eq!(
        out.get("log"),
        Some(&json!(["count1", "count2", "count3", "done"]))
    );
    assert_eq!(
        graph
            .get_state_history(&config, &ListOptions::default())
            .await?
            .len(),
        6
    );
    Ok(())
}

/// A conditional entry point picks the first node from the input.
pub async fn conditional_entry_point(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let mut graph = StateGraph::json(
        JsonSchema::new()
            .append("log")
            .last_value("last")
            .last_value("mode"),
    );
    graph.add_node("fast", logging_node(&calls));
    graph.add_node("slow", logging_node(&calls));
    graph.set_conditional_entry_point(
        |s: &JsonState| match s.get("mode").and_then(Value::as_str) {
            Some("fast") => "go_fast",
            _ => "go_slow",
        },
        [("go_fast", "fast"), ("go_slow", "slow")],
    );
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let out = graph
        .invoke(
            Some(obj(json!({"mode": "fast"}))),
            &RunConfig::thread(thread()),
        )
        .await?;
    assert_eq!(out.get("log"), Some(&json!(["fast"])));
    let out = graph
        .invoke(
            Some(obj(json!({"mode": "slow"}))),
            &RunConfig::thread(thread()),
        )
        .await?;
    assert_eq!(out.get("log"), Some(&json!(["slow"])));
    Ok(())
}

/// Two nodes of one step writing the same last-value channel is an error that names it.
pub async fn concurrent_last_value_writes_fail(saver: Saver) -> TestResult {
    let mut graph = StateGraph::json(JsonSchema::new().last_value("winner").append("log"));
    for name in ["a", "b"] {
        graph.add_node(name, move |_s: JsonState, _c: Context| async move {
            Ok(obj(json!({"winner": name, "log": [name]})))
        });
        graph.add_edge(START, name);
    }
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    match graph.invoke(Some(obj(json!({}))), &config).await {
        Err(Error::InvalidUpdate(message)) => assert!(message.contains("`winner`"), "{message}"),
        other => return Err(format!("expected InvalidUpdate, got {other:?}").into()),
    }
    // The state before the bad step is intact.
    let snap = graph.get_state(&config).await?;
    assert_eq!(snap.metadata.step, Some(0));
    assert_eq!(snap.values.to_value(), json!({"log": []}));
    Ok(())
}

/// Nodes read and write the long-term store through their context, across threads.
pub async fn nodes_share_store_across_threads(saver: Saver) -> TestResult {
    let store = Arc::new(InMemoryStore::new());
    let mut graph = StateGraph::json(JsonSchema::new().last_value("fact").last_value("recalled"));
    graph.add_node("remember", |s: JsonState, ctx: Context| async move {
        let store = ctx.require_store()?;
        let user = ctx
            .config()
            .get("user_id")
            .and_then(Value::as_str)
            .unwrap_or("anon")
            .to_owned();
        let namespace = vec!["memories".to_owned(), user];
        if let Some(fact) = s.get("fact").cloned() {
            store
                .put(namespace.clone(), "fact", json!({"text": fact}))
                .await?;
        }
        let item = store.get(namespace, "fact").await?;
        Ok(obj(
            json!({"recalled": item.map(|i| i.value["text"].clone())}),
        ))
    });
    graph.add_edge(START, "remember");
    let options = CompileOptions::default()
        .checkpointer(saver)
        .store(store.clone());
    let graph = graph.compile(options)?;

    let alice = |t: String| RunConfig::thread(t).with("user_id", "alice");
    graph
        .invoke(Some(obj(json!({"fact": "likes tea"}))), &alice(thread()))
        .await?;
    let out = graph.invoke(Some(obj(json!({}))), &alice(thread())).await?;
    assert_eq!(out.get("recalled"), Some(&json!("likes tea")));
    let bob = RunConfig::thread(thread()).with("user_id", "bob");
    let out = graph.invoke(Some(obj(json!({}))), &bob).await?;
    assert_eq!(out.get("recalled"), Some(&Value::Null));
    Ok(())
}

/// New input on a finished thread starts the next run from the saved state.
pub async fn new_input_starts_next_run(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = documented_json(saver, &calls)?;
    let config = RunConfig::thread(thread());
    graph.invoke(Some(obj(json!({"foo": ""}))), &config).await?;
    let out = graph
        .invoke(Some(obj(json!({"bar": ["again"]}))), &config)
        .await?;
    assert_eq!(
        out.to_value(),
        json!({"foo": "b", "bar": ["a", "b", "again", "a", "b"]})
    );
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let steps: Vec<_> = history
        .iter()
        .map(|s| s.metadata.step.unwrap_or(-9))
        .collect();
    assert_eq!(steps, vec![6, 5, 4, 3, 2, 1, 0, -1]);
    assert_eq!(history[3].metadata.source, Some(CheckpointSource::Input));
    // Resuming a finished thread runs nothing.
    graph.invoke(None, &config).await?;
    assert_eq!(calls.get("node_a"), 2);
    Ok(())
}

/// Channels the graph does not know (another program's: a Python LangGraph state with more
/// keys) keep their values, byte for byte, in every checkpoint the graph writes after them.
pub async fn unknown_channels_are_carried_forward(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = documented_json(Arc::clone(&saver), &calls)?;
    let t = thread();
    let config = RunConfig::thread(t.clone());
    graph.invoke(Some(obj(json!({"foo": ""}))), &config).await?;
    let thread_config = CheckpointConfig::new(t);
    let latest = saver
        .get_tuple(&thread_config)
        .await?
        .ok_or("no checkpoint")?;
    // Another writer adds two channels the graph has no schema for.
    let serde = waypoint_checkpoint::Serde::default();
    let foreign = [
        ("summary", serde.dumps(&json!("kept as written"))?),
        (
            "profile",
            serde.dumps(&json!({"name": "Ada", "tags": ["x"]}))?,
        ),
    ];
    let mut checkpoint = latest.checkpoint.clone();
    checkpoint.id = waypoint_checkpoint::checkpoint_id(1);
    checkpoint.channel_values.clear();
    let mut new_versions = waypoint_checkpoint::ChannelVersions::new();
    for (channel, value) in &foreign {
        let version = saver.next_version(None)?;
        checkpoint
            .channel_versions
            .insert((*channel).to_owned(), version.clone());
        checkpoint
            .channel_values
            .insert((*channel).to_owned(), value.clone());
        new_versions.insert((*channel).to_owned(), version);
    }
    let mut metadata = latest.metadata.clone();
    metadata.source = Some(CheckpointSource::Update);
    saver
        .put(&latest.config, checkpoint, metadata, new_versions)
        .await?;

    let out = graph
        .invoke(Some(obj(json!({"bar": ["again"]}))), &config)
        .await?;
    assert_eq!(
        out.to_value(),
        json!({"foo": "b", "bar": ["a", "b", "again", "a", "b"]})
    );
    let after = saver
        .get_tuple(&thread_config)
        .await?
        .ok_or("no checkpoint")?;
    assert_eq!(
        after.metadata.step,
        Some(6),
        "the graph ran after the foreign write"
    );
    for (channel, value) in &foreign {
        assert_eq!(
            after.checkpoint.channel_values.get(*channel),
            Some(value),
            "channel `{channel}` was not carried forward"
        );
    }
    Ok(())
}

/// A checkpoint whose channel bytes are garbage gives a serialization error, not a panic.
pub async fn corrupt_channel_value_is_an_error(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = documented_json(Arc::clone(&saver), &calls)?;
    let thread_id = thread();
    let mut checkpoint = waypoint_checkpoint::Checkpoint::new(0);
    let version = saver.next_version(None)?;
    checkpoint.channel_values.insert(
        "foo".into(),
        waypoint_checkpoint::SerializedValue::new("msgpack", vec![0xc1, 0xff, 0x00]),
    );
    checkpoint
        .channel_versions
        .insert("foo".into(), version.clone());
    let new_versions = [("foo".to_owned(), version)].into_iter().collect();
    saver
        .put(
            &CheckpointConfig::new(thread_id.clone()),
            checkpoint,
            CheckpointMetadata::new(CheckpointSource::Loop, 0),
            new_versions,
        )
        .await?;
    let config = RunConfig::thread(thread_id);
    let err = graph.get_state(&config).await;
    assert!(
        matches!(&err, Err(Error::Serialization { channel, .. }) if channel == "foo"),
        "{err:?}"
    );
    let err = graph.invoke(None, &config).await;
    assert!(matches!(err, Err(Error::Serialization { .. })), "{err:?}");
    Ok(())
}

/// With a checkpointer, a config without a thread id is a clear error.
pub async fn thread_id_required(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = documented_json(saver, &calls)?;
    let err = graph
        .invoke(Some(obj(json!({"foo": ""}))), &RunConfig::default())
        .await;
    assert!(matches!(err, Err(Error::InvalidConfig(_))), "{err:?}");
    assert!(matches!(
        graph.get_state(&RunConfig::default()).await,
        Err(Error::InvalidConfig(_))
    ));
    assert_eq!(calls.get("node_a"), 0);
    let unknown = RunConfig::thread(thread()).at("1ef00000-0000-6000-8000-000000000000");
    assert!(matches!(
        graph.invoke(None, &unknown).await,
        Err(Error::InvalidConfig(_))
    ));
    let _ = END;
    Ok(())
}

/// Two runs on one thread at once never interleave: the second fails fast with
/// `Error::Conflict`, or waits its turn when asked to; `update_state` respects the same rule.
pub async fn one_writer_per_thread(saver: Saver) -> TestResult {
    let graph = slow_logger(saver, std::time::Duration::from_millis(300))?;
    let thread_id = thread();
    let config = |who: &str| RunConfig::thread(thread_id.clone()).with("who", who);

    let first = tokio::spawn({
        let (graph, config) = (graph.clone(), config("first"));
        async move { graph.invoke(Some(obj(json!({}))), &config).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let second = graph.invoke(Some(obj(json!({}))), &config("second")).await;
    assert!(matches!(second, Err(Error::Conflict(_))), "{second:?}");
    let update = graph
        .update_state(&config("x"), Some(obj(json!({"log": ["x"]}))), Some("slow"))
        .await;
    assert!(matches!(update, Err(Error::Conflict(_))), "{update:?}");
    // A fork of a named checkpoint (the run's first, stored by now) waits for no lease of
    // its own, and is refused all the same.
    let stored = graph
        .get_state_history(&config(""), &ListOptions::default())
        .await?;
    if let Some(oldest) = stored.last() {
        let fork = graph
            .update_state(
                &oldest.config,
                Some(obj(json!({"log": ["x"]}))),
                Some("slow"),
            )
            .await;
        assert!(matches!(fork, Err(Error::Conflict(_))), "{fork:?}");
    }
    first.await??;

    // Waiting: the third run starts once the second is done, on top of its last checkpoint.
    let second = tokio::spawn({
        let (graph, config) = (graph.clone(), config("second"));
        async move { graph.invoke(Some(obj(json!({}))), &config).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let third = config("third").wait_for_thread(std::time::Duration::from_secs(10));
    let out = graph.invoke(Some(obj(json!({}))), &third).await?;
    second.await??;
    assert_eq!(out.get("log"), Some(&json!(["first", "second", "third"])));
    let history = graph
        .get_state_history(&config(""), &ListOptions::default())
        .await?;
    assert_eq!(history.len(), 9, "three runs of three checkpoints each");
    for pair in history.windows(2) {
        assert_eq!(pair[0].parent_config.as_ref(), Some(&pair[1].config));
    }
    // Idle again: updates and forks work.
    graph
        .update_state(&config("x"), Some(obj(json!({"log": ["x"]}))), Some("slow"))
        .await?;
    graph
        .update_state(
            &history[2].config,
            Some(obj(json!({"log": ["fork"]}))),
            Some("slow"),
        )
        .await?;
    Ok(())
}

/// A run that outlasts its lease's ttl keeps renewing it: another run is refused well
/// after the first claim would have lapsed, and the long run finishes and is stored.
pub async fn a_run_longer_than_its_lease_keeps_the_thread(saver: Saver) -> TestResult {
    use std::time::Duration;
    let graph = slow_logger(saver, Duration::from_millis(1200))?;
    let thread_id = thread();
    let config = |who: &str| RunConfig::thread(thread_id.clone()).with("who", who);
    let long = tokio::spawn({
        let (graph, config) = (
            graph.clone(),
            config("long").lease_ttl(Duration::from_millis(300)),
        );
        async move { graph.invoke(Some(obj(json!({}))), &config).await }
    });
    // Twice the ttl into the node: the claim holds only if it was renewed.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let other = graph.invoke(Some(obj(json!({}))), &config("other")).await;
    assert!(matches!(other, Err(Error::Conflict(_))), "{other:?}");
    let out = long.await??;
    assert_eq!(out.get("log"), Some(&json!(["long"])));
    let state = graph.get_state(&config("")).await?;
    assert_eq!(state.values.get("log"), Some(&json!(["long"])));
    Ok(())
}

/// Appending channels stored as deltas (snapshots only now and then) give exactly the
/// states, history, replays and forks that storing every value gives.
pub async fn delta_history_matches_full_values(saver: Saver) -> TestResult {
    use waypoint_runtime::DeltaPolicy;
    let build = |delta: DeltaPolicy| {
        let mut graph = StateGraph::json(JsonSchema::new().append("log").last_value("last"));
        for name in ["a", "b", "c"] {
            graph.add_node(name, move |_s: JsonState, _c: Context| async move {
                let mut update = obj(json!({"log": [format!("{name} writes a line of text")]}));
                if name == "a" {
                    update.insert("last".into(), json!(name));
                }
                Ok(update)
            });
        }
        graph
            .add_edge(START, "a")
            .add_edge("a", "b")
            .add_edge("a", "c");
        let options = CompileOptions {
            delta,
            ..CompileOptions::default()
        };
        graph.compile(options.checkpointer(Arc::clone(&saver)))
    };
    // Snapshots every few hundred bytes, so the history mixes snapshots and replays.
    let frequent = DeltaPolicy {
        min_snapshot_bytes: 300,
        ..DeltaPolicy::default()
    };
    let (delta, full) = (build(frequent)?, build(DeltaPolicy::off())?);
    let (on, off) = (RunConfig::thread(thread()), RunConfig::thread(thread()));
    for turn in 0..12 {
        let input = obj(json!({"log": [format!("turn {turn}")]}));
        // b and c run in one step and both append: the order must survive a replay.
        delta.invoke(Some(input.clone()), &on).await?;
        full.invoke(Some(input), &off).await?;
    }
    let values = |h: &[waypoint_runtime::StateSnapshot<JsonState>]| {
        h.iter().map(|s| s.values.to_value()).collect::<Vec<_>>()
    };
    let history_on = delta
        .get_state_history(&on, &ListOptions::default())
        .await?;
    let history_off = full
        .get_state_history(&off, &ListOptions::default())
        .await?;
    assert_eq!(values(&history_on), values(&history_off));
    // Each checkpoint read on its own (a history walk) agrees with the one-pass history.
    for snapshot in history_on.iter().step_by(7) {
        let alone = delta.get_state(&snapshot.config).await?;
        assert_eq!(alone.values.to_value(), snapshot.values.to_value());
    }
    // Few checkpoints store the list itself.
    let stored = saver
        .list(
            Some(&CheckpointConfig::new(
                on.thread_id.clone().unwrap_or_default(),
            )),
            &ListOptions::default(),
        )
        .await?
        .iter()
        .filter(|t| t.checkpoint.channel_values.contains_key("log"))
        .count();
    assert!(
        stored * 4 < history_on.len(),
        "{stored} of {} store the list",
        history_on.len()
    );

    // Fork and replay from the middle: same results both ways.
    let mid_on = &history_on[history_on.len() / 2].config;
    let mid_off = &history_off[history_off.len() / 2].config;
    let fork_on = delta
        .update_state(mid_on, Some(obj(json!({"log": ["fork"]}))), Some("a"))
        .await?;
    let fork_off = full
        .update_state(mid_off, Some(obj(json!({"log": ["fork"]}))), Some("a"))
        .await?;
    let a = delta.invoke(None, &fork_on).await.map(|o| o.to_value());
    let b = full.invoke(None, &fork_off).await.map(|o| o.to_value());
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    let replay_on = &history_on[history_on.len() / 3].config;
    let replay_off = &history_off[history_off.len() / 3].config;
    let a = delta.invoke(None, replay_on).await.map(|o| o.to_value());
    let b = full.invoke(None, replay_off).await.map(|o| o.to_value());
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    assert_eq!(
        values(
            &delta
                .get_state_history(&on, &ListOptions::default())
                .await?
        ),
        values(
            &full
                .get_state_history(&off, &ListOptions::default())
                .await?
        )
    );
    Ok(())
}

/// A step of many parallel appending tasks (two triggered nodes and a fan-out of twelve
/// `Send`s) folds in LangGraph's order, triggered nodes by name then sends by index, whatever
/// their hash ids sort as: live, in the history rebuilt from stored writes, and for each
/// checkpoint read on its own.
pub async fn delta_history_keeps_a_parallel_step_in_order(saver: Saver) -> TestResult {
    use waypoint_runtime::DeltaPolicy;
    let build = |delta: DeltaPolicy| {
        let mut graph = StateGraph::json(JsonSchema::new().append("log").last_value("item"));
        graph.add_node("plan", |_s: JsonState, _c: Context| async {
            Ok(obj(json!({"log": ["plan"]})))
        });
        for name in ["y", "x"] {
            graph.add_node(name, move |_s: JsonState, _c: Context| async move {
                Ok(obj(json!({"log": [name]})))
            });
        }
        graph.add_node("work", |s: JsonState, _c: Context| async move {
            let item = s.get("item").cloned().unwrap_or(Value::Null);
            Ok(obj(json!({"log": [format!("work {item}")]})))
        });
        graph
            .add_edge(START, "plan")
            .add_edge("plan", "y")
            .add_edge("plan", "x");
        graph.add_conditional_edges(
            "plan",
            |s: &JsonState| {
                (0..12)
                    .map(|item| {
                        let arg = s
                            .with_values(obj(json!({"item": item})))
                            .unwrap_or_else(|_| s.clone());
                        Send::new("work", arg)
                    })
                    .collect::<Vec<_>>()
            },
            ["work"],
        );
        let options = CompileOptions {
            delta,
            ..CompileOptions::default()
        };
        graph.compile(options.checkpointer(Arc::clone(&saver)))
    };
    let frequent = DeltaPolicy {
        min_snapshot_bytes: 200,
        ..DeltaPolicy::default()
    };
    let (delta, full) = (build(frequent)?, build(DeltaPolicy::off())?);
    let (on, off) = (RunConfig::thread(thread()), RunConfig::thread(thread()));
    let mut expected: Vec<Value> = Vec::new();
    for turn in 0..3 {
        let input = obj(json!({"log": [format!("turn {turn}")]}));
        expected.extend([
            json!(format!("turn {turn}")),
            json!("plan"),
            json!("x"),
            json!("y"),
        ]);
        expected.extend((0..12).map(|i| json!(format!("work {i}"))));
        let live = delta.invoke(Some(input.clone()), &on).await?;
        assert_eq!(live.get("log"), Some(&Value::Array(expected.clone())));
        full.invoke(Some(input), &off).await?;
    }
    let values = |h: &[waypoint_runtime::StateSnapshot<JsonState>]| {
        h.iter().map(|s| s.values.to_value()).collect::<Vec<_>>()
    };
    let history_on = delta
        .get_state_history(&on, &ListOptions::default())
        .await?;
    let history_off = full
        .get_state_history(&off, &ListOptions::default())
        .await?;
    assert_eq!(values(&history_on), values(&history_off));
    for snapshot in &history_on {
        let alone = delta.get_state(&snapshot.config).await?;
        assert_eq!(alone.values.to_value(), snapshot.values.to_value());
    }
    let latest = delta.get_state(&on).await?;
    assert_eq!(
        latest.values.to_value().get("log"),
        Some(&Value::Array(expected))
    );
    Ok(())
}
