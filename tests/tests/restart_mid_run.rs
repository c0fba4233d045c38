//! A server restarted in the middle of a graph run: the run goes on when the server is back
//! (its writes after the restart go to fresh connections, in the same process), every
//! checkpoint it acknowledged is kept, and the next run on the thread succeeds at its first
//! call.
//!
//! Uses the fault servers `scripts/test.sh` starts (stopped and restarted here).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;
use waypoint_checkpoint::{CheckpointSaver, ListOptions};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, JsonSchema, JsonState, RunConfig, START,
    StateGraph,
};
use waypoint_test_kit::{FaultServer, fresh_name, postgres_faults, redis_faults};
use waypoint_tests::{TestResult, obj, thread};

/// `first` then `second`, each appending its name to `log`; `first` waits for `go` (the
/// server's restart) when given one.
fn graph(
    saver: Arc<dyn CheckpointSaver>,
    go: Option<Arc<Notify>>,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node("first", move |_state: JsonState, _ctx: Context| {
        let go = go.clone();
        async move {
            if let Some(go) = go {
                go.notified().await;
            }
            Ok(obj(json!({"log": ["first"]})))
        }
    });
    graph.add_node("second", |_state: JsonState, _ctx: Context| async {
        Ok(obj(json!({"log": ["second"]})))
    });
    graph
        .add_edge(START, "first")
        .add_edge("first", "second")
        .add_edge("second", END);
    graph.compile(CompileOptions::default().checkpointer(saver))
}

async fn run_survives_a_restart(
    saver: Arc<dyn CheckpointSaver>,
    server: &FaultServer,
) -> TestResult {
    let t = thread();
    let config = RunConfig::thread(&t);
    let go = Arc::new(Notify::new());
    let run = tokio::spawn({
        let (graph, config) = (graph(saver.clone(), Some(go.clone()))?, config.clone());
        async move {
            graph
                .invoke(Some(obj(json!({"log": ["input"]}))), &config)
                .await
        }
    });
    // The run holds its thread and has saved its input and first step; then the server goes
    // away and comes back while `first` still runs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let restarting = server.clone();
    tokio::task::spawn_blocking(move || {
        restarting.ctl("stop");
        restarting.ctl("start");
    })
    .await?;
    go.notify_one();
    let out = run.await??;
    assert_eq!(
        out.values.get("log"),
        Some(&json!(["input", "first", "second"]))
    );

    // Every checkpoint of the run is there: input, before `first`, before `second`, the end.
    let g = graph(saver, None)?;
    let history = g
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let steps: Vec<Option<i64>> = history.iter().map(|s| s.metadata.step).collect();
    assert_eq!(steps, [Some(2), Some(1), Some(0), Some(-1)], "{history:#?}");

    // The next run on the thread succeeds at its first call.
    let again = g
        .invoke(Some(obj(json!({"log": ["again"]}))), &config)
        .await?;
    assert_eq!(
        again.values.get("log"),
        Some(&json!([
            "input", "first", "second", "again", "first", "second"
        ]))
    );
    Ok(())
}

#[tokio::test]
async fn a_run_survives_a_redis_restart() -> TestResult {
    let Some(server) = redis_faults() else {
        return Ok(());
    };
    let config = RedisConfig::new(server.url())
        .prefix(fresh_name("wp_restart"))
        .timeout(Duration::from_secs(5));
    let saver = Arc::new(RedisSaver::connect(config).await?);
    run_survives_a_restart(saver, &server).await
}

#[tokio::test]
async fn a_run_survives_a_postgres_restart() -> TestResult {
    let Some(server) = postgres_faults() else {
        return Ok(());
    };
    let config = PostgresConfig::new(server.url())
        .schema(fresh_name("wp_restart"))
        .max_connections(4)
        .timeout(Duration::from_secs(5));
    let saver = PostgresSaver::connect(config).await?;
    saver.setup().await?;
    run_survives_a_restart(Arc::new(saver), &server).await
}
