//! Checkpoint metadata as a LangGraph user sees it: LangGraph's `writes` key, none of
//! Waypoint's own bookkeeping keys.

use std::sync::Arc;

use serde_json::{Value, json};
use waypoint_checkpoint::{
    CheckpointConfig, CheckpointSaver, InMemorySaver, Keyring, ListOptions, Serde, metadata,
};
use waypoint_runtime::{
    CompileOptions, Context, END, JsonSchema, JsonState, RunConfig, START, Send, StateGraph,
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
