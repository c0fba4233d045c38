//! Checkpoint metadata as a LangGraph user sees it: LangGraph's `writes` key, none of
//! Waypoint's own bookkeeping keys.

use std::sync::Arc;

use serde_json::{Value, json};
use waypoint_checkpoint::{
    CheckpointConfig, CheckpointSaver, InMemorySaver, Keyring, ListOptions, PruneStrategy, Serde,
    metadata,
};
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, DeltaPolicy, Durability, END, JsonSchema, JsonState,
    RunConfig, START, Send, StateGraph,
};

use crate::graphs::{Calls, documented_json};
use crate::{TestResult, obj, thread};

/// Waypoint's delta-history keys may be stored with a checkpoint, but no snapshot shows
/// them, even for a thread long enough to store appending channels as deltas.
pub async fn bookkeeping_keys_are_hidden(saver: Arc<dyn CheckpointSaver>) -> TestResult {
    let graph = documented_json(Arc::clone(&saver), &Calls::default())?;
    let thread_id = thread();
    let config = RunConfig::thread(thread_id.clone());
    for _ in 0..3 {
        graph.invoke(Some(obj(json!({"foo": ""}))), &config).await?;
    }
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let latest = graph.get_state(&config).await?;
    for meta in history
        .iter()
        .map(|s| &s.metadata)
        .chain([&latest.metadata])
    {
        for key in metadata::BOOKKEEPING {
            assert!(!meta.to_json().contains_key(key), "{key} shown in {meta:?}");
        }
    }
    // Where the saver stores deltas (not PostgreSQL in LangGraph mode), it keeps the keys
    // for its loads and prune: they are hidden, not lost.
    let stored = saver
        .list(
            Some(&CheckpointConfig::new(thread_id)),
            &ListOptions::default(),
        )
        .await?;
    let kept = stored
        .iter()
        .any(|t| t.metadata.extra.contains_key(metadata::DELTA_COUNTERS));
    let deltas = stored.iter().any(|t| {
        t.checkpoint.channel_versions.contains_key("bar")
            && !t.checkpoint.channel_values.contains_key("bar")
    });
    assert_eq!(kept, deltas, "counters are stored exactly where deltas are");
    Ok(())
}

/// The persistence guide's example prints each checkpoint's metadata, `writes` included
/// (LangGraph's saver then predated `parents`, which it now writes as `{}` on a root graph).
/// LangGraph's PostgreSQL saver drops `writes` when storing, and so does Waypoint's in
/// LangGraph mode. `update_state` records its values under the node it acts as.
pub async fn guide_metadata_has_writes(saver: Arc<dyn CheckpointSaver>) -> TestResult {
    let graph = documented_json(Arc::clone(&saver), &Calls::default())?;
    let config = RunConfig::thread(thread());
    graph.invoke(Some(obj(json!({"foo": ""}))), &config).await?;
    let dropped = saver.backend() == "postgres" && saver.langgraph_values();
    let shown = |printed: Value| {
        let mut printed = obj(printed);
        printed.insert("parents".into(), json!({}));
        if dropped {
            printed.remove(metadata::WRITES);
        }
        printed
    };
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let metadata: Vec<_> = history.iter().map(|s| s.metadata.to_json()).collect();
    let printed: Vec<_> = [
        json!({"source": "loop", "writes": {"node_b": {"foo": "b", "bar": ["b"]}}, "step": 2}),
        json!({"source": "loop", "writes": {"node_a": {"foo": "a", "bar": ["a"]}}, "step": 1}),
        json!({"source": "loop", "writes": null, "step": 0}),
        json!({"source": "input", "writes": {"foo": ""}, "step": -1}),
    ]
    .into_iter()
    .map(shown)
    .collect();
    assert_eq!(metadata, printed);
    let latest = graph.get_state(&config).await?.metadata.to_json();
    assert_eq!(latest, printed[0]);

    graph
        .update_state(&config, Some(obj(json!({"foo": "c"}))), Some("node_a"))
        .await?;
    let updated = graph.get_state(&config).await?.metadata.to_json();
    let update = json!({"source": "update", "writes": {"node_a": {"foo": "c"}}, "step": 3});
    assert_eq!(updated, shown(update));
    Ok(())
}

/// A node run as several tasks (one per `Send`) records the list of their updates, in task
/// order. Where values are encrypted, no `writes` is recorded (metadata is plaintext);
/// that half runs on an encrypted in-memory saver, as the suite's savers have no key.
pub async fn writes_list_sends_and_stay_sealed(saver: Arc<dyn CheckpointSaver>) -> TestResult {
    let fan_out = |saver: Arc<dyn CheckpointSaver>, serde: Serde| {
        let schema = JsonSchema::new().append("seen").last_value("item");
        let mut graph = StateGraph::json(schema);
        graph.add_node("plan", |_s: JsonState, _c: Context| async {
            Ok(obj(json!({})))
        });
        graph.add_node("visit", |s: JsonState, _c: Context| async move {
            Ok(obj(
                json!({"seen": [s.get("item").cloned().unwrap_or_default()]}),
            ))
        });
        graph.add_edge(START, "plan").add_edge("visit", END);
        graph.add_conditional_edges(
            "plan",
            |s: &JsonState| {
                ["x", "y"]
                    .into_iter()
                    .map(|item| {
                        let arg = s.with_values(obj(json!({"item": item})));
                        Send::new("visit", arg.unwrap_or_else(|_| s.clone()))
                    })
                    .collect::<Vec<_>>()
            },
            ["visit"],
        );
        let options = CompileOptions::default().checkpointer(saver);
        graph.compile(options.serde(serde))
    };
    let dropped = saver.backend() == "postgres" && saver.langgraph_values();
    let sealed = Serde::default().with_keyring(Keyring::new("k1", &[7u8; 32])?);
    let sealed_saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::with_serde(sealed));
    for (graph, recorded) in [
        (fan_out(saver, Serde::default())?, !dropped),
        (fan_out(sealed_saver, Serde::default())?, false),
    ] {
        let config = RunConfig::thread(thread());
        graph
            .invoke(Some(obj(json!({"seen": []}))), &config)
            .await?;
        let latest = graph.get_state(&config).await?.metadata.to_json();
        let visits = json!({"visit": [{"seen": ["x"]}, {"seen": ["y"]}]});
        let expected = recorded.then_some(&visits);
        assert_eq!(latest.get(metadata::WRITES), expected, "{latest:?}");
    }
    Ok(())
}

/// A step whose node only appends (a chat's reply) stores its `writes` once: the parent's
/// pending writes hold the update, the checkpoint only the node's name (a hidden marker).
/// Every snapshot shows the very `writes` that exit durability (which saves no step writes)
/// stores inline: latest, past, and in a history whether or not it lists the parent.
pub async fn writes_stored_once_show_as_recorded(saver: Arc<dyn CheckpointSaver>) -> TestResult {
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node("talk", |s: JsonState, _c: Context| async move {
        let turn = s.get("log").and_then(Value::as_array).map_or(0, Vec::len);
        let reply = json!({"role": "ai", "content": format!("reply {turn}"), "n": turn});
        Ok(obj(json!({"log": [reply]})))
    });
    graph.add_edge(START, "talk").add_edge("talk", END);
    let graph = graph.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let dropped = saver.backend() == "postgres" && saver.langgraph_values();
    let input = |turn: usize| obj(json!({"log": [{"role": "user", "content": turn}]}));

    let thread_id = thread();
    let config = RunConfig::thread(thread_id.clone());
    for turn in 0..3 {
        graph.invoke(Some(input(turn)), &config).await?;
    }
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let reply = json!({"talk": {"log": [{"role": "ai", "content": "reply 5", "n": 5}]}});
    let expected = (!dropped).then_some(&reply);
    let latest = graph.get_state(&config).await?.metadata.to_json();
    assert_eq!(latest.get(metadata::WRITES), expected, "{latest:?}");
    assert_eq!(latest, history[0].metadata.to_json());
    for (at, snapshot) in history.iter().enumerate() {
        let shown = snapshot.metadata.to_json();
        let past = graph.get_state(&snapshot.config).await?.metadata.to_json();
        assert_eq!(past, shown, "get_state of history[{at}]");
        // Listed without its parent: the parent's writes are read.
        let one = ListOptions::default().limit(1);
        let alone = graph.get_state_history(&snapshot.config, &one).await?;
        if let (Some(listed), Some(parent)) = (alone.first(), history.get(at + 1)) {
            assert_eq!(
                listed.metadata,
                parent.metadata,
                "history[{}] alone",
                at + 1
            );
        }
    }
    let steps: Vec<_> = history.iter().map(|s| s.metadata.step).collect();
    assert_eq!(steps.len(), 9, "{steps:?}");
    for snapshot in history.iter().filter(|s| s.metadata.step == Some(1)) {
        let shown = snapshot.metadata.to_json();
        assert!(
            !dropped || !shown.contains_key(metadata::WRITES),
            "{shown:?}"
        );
        if !dropped {
            let content = &shown[metadata::WRITES]["talk"]["log"][0]["content"];
            assert!(content.as_str().is_some_and(|c| c.starts_with("reply")));
        }
    }

    // Stored: the marker instead of the value, where the parent's writes are stored.
    let stored = saver
        .get_tuple(&CheckpointConfig::new(thread_id))
        .await?
        .ok_or("the thread has a checkpoint")?;
    let marker = stored.metadata.extra.get(metadata::WRITES_FROM);
    let inline = stored.metadata.extra.get(metadata::WRITES);
    match dropped {
        true => assert_eq!((marker, inline), (None, None)),
        false => assert_eq!((marker, inline), (Some(&json!("talk")), None)),
    }

    let inputs = saver
        .list(
            Some(&CheckpointConfig::new(stored.config.thread_id.clone())),
            &ListOptions::default()
                .filter(json!({"source": "input"}))
                .limit(1),
        )
        .await?;
    let marker = inputs
        .first()
        .map(|t| t.metadata.extra.get(metadata::WRITES_FROM));
    let from_input = (!dropped).then(|| json!("__start__"));
    assert_eq!(marker, Some(from_input.as_ref()), "the input's writes");

    // The same turns in exit durability store the value inline; it shows the same.
    let exit = RunConfig::thread(thread()).durability(Durability::Exit);
    for turn in 0..3 {
        graph.invoke(Some(input(turn)), &exit).await?;
    }
    let inline = graph.get_state(&exit).await?.metadata.to_json();
    assert_eq!(inline, latest);
    Ok(())
}

/// A one-node chat: `talk` appends `{"role": "ai", "n": <entries before>}` to `log`.
fn talk() -> StateGraph<JsonState> {
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node("talk", |s: JsonState, _c: Context| async move {
        let turn = s.get("log").and_then(Value::as_array).map_or(0, Vec::len);
        Ok(obj(json!({"log": [{"role": "ai", "n": turn}]})))
    });
    graph.add_edge(START, "talk").add_edge("talk", END);
    graph
}

/// Three user turns of [`talk`] on a new thread; its config.
async fn three_turns(graph: &CompiledGraph<JsonState>) -> waypoint_runtime::Result<RunConfig> {
    let config = RunConfig::thread(thread());
    for turn in 0..3 {
        let input = obj(json!({"log": [{"role": "user", "n": turn}]}));
        graph.invoke(Some(input), &config).await?;
    }
    Ok(config)
}

/// A history filtered on `writes` finds the checkpoints whose shown `writes` match, stored
/// inline or rebuilt from where the checkpoint says (the input's, a node's reply), with the
/// rest of the filter and the limit applied as without it.
pub async fn history_filters_on_shown_writes(saver: Arc<dyn CheckpointSaver>) -> TestResult {
    let graph = talk().compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let dropped = saver.backend() == "postgres" && saver.langgraph_values();

    let config = three_turns(&graph).await?;
    let history = |filter: Value, limit: Option<usize>| {
        let options = ListOptions {
            filter: Some(filter),
            limit,
            ..ListOptions::default()
        };
        let graph = &graph;
        let config = &config;
        async move { graph.get_state_history(config, &options).await }
    };
    let steps = |found: &[waypoint_runtime::StateSnapshot<JsonState>]| {
        found.iter().map(|s| s.metadata.step).collect::<Vec<_>>()
    };
    // Every turn: input (step 3t - 1), the start task's step (3t) and the reply (3t + 1).
    let all = history(json!({}), None).await?;
    assert_eq!(all.len(), 9);

    let reply = json!({"writes": {"talk": {"log": [{"role": "ai", "n": 3}]}}});
    let found = history(reply.clone(), None).await?;
    let expected = if dropped { vec![] } else { vec![Some(4)] };
    assert_eq!(steps(&found), expected, "the second reply");
    if let Some(snapshot) = found.first() {
        assert_eq!(
            snapshot.metadata.to_json().get(metadata::WRITES),
            Some(&reply["writes"])
        );
    }
    // Containment, as any metadata filter: part of the update finds every reply.
    let any_reply = json!({"writes": {"talk": {}}});
    let replies = history(any_reply.clone(), None).await?;
    let expected = if dropped {
        vec![]
    } else {
        vec![Some(7), Some(4), Some(1)]
    };
    assert_eq!(steps(&replies), expected, "every reply, newest first");
    let limited = history(any_reply.clone(), Some(2)).await?;
    assert_eq!(
        steps(&limited),
        expected.into_iter().take(2).collect::<Vec<_>>()
    );
    // With the rest of the filter, applied by the saver.
    let with_step = json!({"writes": {"talk": {}}, "step": 1});
    let expected = if dropped { vec![] } else { vec![Some(1)] };
    assert_eq!(steps(&history(with_step, None).await?), expected);
    // An input checkpoint's `writes` is the input.
    let inputs = json!({"writes": {"log": [{"role": "user", "n": 2}]}});
    let expected = if dropped { vec![] } else { vec![Some(5)] };
    assert_eq!(
        steps(&history(inputs, None).await?),
        expected,
        "the third input"
    );
    // What the thread never wrote matches nothing.
    let other = json!({"writes": {"talk": {"log": [{"role": "ai", "n": 99}]}}});
    assert!(history(other, None).await?.is_empty());
    Ok(())
}

/// A thread pruned to its latest checkpoint keeps the parent whose pending writes that
/// checkpoint's `writes` is rebuilt from, even where every channel is stored whole (no delta
/// ancestor is kept): the metadata shows the same before and after.
pub async fn prune_keeps_where_writes_come_from(saver: Arc<dyn CheckpointSaver>) -> TestResult {
    // Every change stores the whole value: the latest checkpoint needs no ancestor.
    let whole = DeltaPolicy {
        min_snapshot_bytes: 0,
        growth: 0,
        ..DeltaPolicy::default()
    };
    let options = CompileOptions::default()
        .checkpointer(Arc::clone(&saver))
        .delta(whole);
    let graph = talk().compile(options)?;
    let dropped = saver.backend() == "postgres" && saver.langgraph_values();

    let config = three_turns(&graph).await?;
    let thread_id = config.thread_id.clone().unwrap_or_default();
    let before = graph.get_state(&config).await?.metadata.to_json();
    let stored = saver
        .get_tuple(&CheckpointConfig::new(thread_id.clone()))
        .await?
        .ok_or("the thread has a checkpoint")?;
    let marker = stored.metadata.extra.get(metadata::WRITES_FROM);
    assert_eq!(marker, (!dropped).then(|| json!("talk")).as_ref());
    let counters = stored.metadata.extra.get(metadata::DELTA_COUNTERS);
    let since = counters.and_then(Value::as_object).into_iter().flatten();
    assert!(since.map(|(_, n)| n).all(|n| n == 0), "{counters:?}");

    saver
        .prune(std::slice::from_ref(&thread_id), PruneStrategy::KeepLatest)
        .await?;
    let after = graph.get_state(&config).await?.metadata.to_json();
    assert_eq!(after, before, "after prune");
    let reply = json!({"talk": {"log": [{"role": "ai", "n": 5}]}});
    assert_eq!(after.get(metadata::WRITES), (!dropped).then_some(&reply));
    let left = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    assert_eq!(left.len(), if dropped { 1 } else { 2 }, "kept after prune");
    Ok(())
}
