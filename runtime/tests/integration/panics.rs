//! Panics that need no saver to show: a graph without a checkpointer, a fanned-out task, a
//! conditional entry point and `update_state`'s reducers all turn a panic into an error
//! (issue 21), and the graph runs again afterwards. The shared runtime suite's `panics`
//! module checks resuming on every saver.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value, json};
use waypoint_runtime::{
    CompileOptions, Context, Error, InMemorySaver, JsonSchema, JsonState, RunConfig, START, Send,
    StateGraph,
};

type TestResult = Result<(), Box<dyn std::error::Error + std::marker::Send + Sync>>;

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The node and message of a caught panic.
fn panicked<T: std::fmt::Debug>(result: waypoint_runtime::Result<T>) -> (String, String) {
    match result {
        Err(Error::Panicked { node, message }) => (node, message),
        other => panic!("expected a caught panic, got {other:?}"),
    }
}

/// Without a checkpointer, a node's panic is the run's error and the next run works.
#[tokio::test]
async fn a_panic_without_a_checkpointer_is_an_error() -> TestResult {
    let armed = Arc::new(AtomicBool::new(true));
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node("boom", {
        let armed = Arc::clone(&armed);
        move |_s: JsonState, _c: Context| {
            let fail = armed.swap(false, Ordering::SeqCst);
            async move {
                tokio::task::yield_now().await;
                assert!(!fail, "boom went off");
                Ok(obj(json!({"log": ["boom"]})))
            }
        }
    });
    graph.add_edge(START, "boom");
    let graph = graph.compile(CompileOptions::default())?;
    let (node, message) = panicked(
        graph
            .invoke(Some(obj(json!({}))), &RunConfig::default())
            .await,
    );
    assert_eq!((node.as_str(), message.as_str()), ("boom", "boom went off"));
    let out = graph
        .invoke(Some(obj(json!({}))), &RunConfig::default())
        .await?;
    assert_eq!(out.get("log"), Some(&json!(["boom"])));
    Ok(())
}

/// A task fanned out with `Send` that panics names its node; a conditional entry point
/// whose router panics names the start node and says it was the router.
#[tokio::test]
async fn sent_tasks_and_entry_routers_name_where_they_panicked() -> TestResult {
    let mut graph = StateGraph::json(JsonSchema::new().append("log").last_value("item"));
    graph.add_node("work", |s: JsonState, _c: Context| async move {
        let item = s.get("item").and_then(Value::as_i64).unwrap_or(0);
        if item == 2 {
            panic!("item {item} is cursed");
        }
        Ok(obj(json!({"log": [item]})))
    });
    graph.set_conditional_entry_point(
        |s: &JsonState| {
            if s.get("item") == Some(&json!("route me")) {
                panic!("the router tripped");
            }
            (1..=3)
                .map(|item| {
                    Send::new(
                        "work",
                        s.with_values(obj(json!({"item": item})))
                            .unwrap_or_else(|_| s.clone()),
                    )
                })
                .collect::<Vec<_>>()
        },
        ["work"],
    );
    let graph = graph.compile(CompileOptions::default())?;
    let config = RunConfig::default();
    let (node, message) = panicked(graph.invoke(Some(obj(json!({}))), &config).await);
    assert_eq!(
        (node.as_str(), message.as_str()),
        ("work", "item 2 is cursed")
    );
    let routed = graph
        .invoke(Some(obj(json!({"item": "route me"}))), &config)
        .await;
    let (node, message) = panicked(routed);
    assert_eq!(
        (node.as_str(), message.as_str()),
        (
            START,
            "the router tripped (in a router of its conditional edges)"
        )
    );
    Ok(())
}

/// A reducer that panics in `update_state` is an invalid update; the thread is left as it
/// was and takes the next update.
#[tokio::test]
async fn a_reducer_panicking_in_update_state_is_an_invalid_update() -> TestResult {
    let schema = JsonSchema::new().reducer("total", json!(0), |total: &mut Value, add: Value| {
        if add == json!("boom") {
            panic!("cannot add {add}");
        }
        *total = json!(total.as_i64().unwrap_or(0) + add.as_i64().unwrap_or(0));
        Ok(())
    });
    let mut graph = StateGraph::json(schema);
    graph.add_node("count", |_s: JsonState, _c: Context| async {
        Ok(obj(json!({"total": 1})))
    });
    graph.add_edge(START, "count");
    let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;
    let config = RunConfig::thread("t");
    graph.invoke(Some(obj(json!({}))), &config).await?;

    let err = graph
        .update_state(&config, Some(obj(json!({"total": "boom"}))), Some("count"))
        .await;
    match err {
        Err(Error::InvalidUpdate(message)) => {
            assert_eq!(
                message,
                "a reducer panicked folding the update: cannot add \"boom\""
            );
        }
        other => panic!("expected an invalid update, got {other:?}"),
    }
    graph
        .update_state(&config, Some(obj(json!({"total": 2}))), Some("count"))
        .await?;
    assert_eq!(
        graph.get_state(&config).await?.values.get("total"),
        Some(&json!(3))
    );
    Ok(())
}
