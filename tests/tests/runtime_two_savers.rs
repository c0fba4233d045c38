//! Two checkpointer instances on one database (as two processes would have): a run through
//! one excludes a run on the same thread through the other.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use waypoint_checkpoint::CheckpointSaver;
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, Error, JsonSchema, JsonState, RunConfig, START,
    StateGraph,
};
use waypoint_test_kit::{fresh_name, postgres_url};
use waypoint_tests::{TestResult, obj, thread};

fn slow_graph(
    saver: Arc<dyn CheckpointSaver>,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(JsonSchema::new().append("log"));
    graph.add_node("slow", |_s: JsonState, _c: Context| async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        Ok(obj(json!({"log": ["slow"]})))
    });
    graph.add_edge(START, "slow");
    graph.compile(CompileOptions::default().checkpointer(saver))
}

async fn exclusive(
    first: Arc<dyn CheckpointSaver>,
    second: Arc<dyn CheckpointSaver>,
) -> TestResult {
    let (a, b) = (slow_graph(first)?, slow_graph(second)?);
    let config = RunConfig::thread(thread());
    let running = tokio::spawn({
        let config = config.clone();
        async move { a.invoke(Some(obj(json!({}))), &config).await }
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let err = b.invoke(Some(obj(json!({}))), &config).await;
    assert!(matches!(err, Err(Error::Conflict(_))), "{err:?}");
    running.await??;
    // Once the first is done, the other instance runs on top of it.
    let out = b.invoke(Some(obj(json!({}))), &config).await?;
    assert_eq!(out.get("log"), Some(&json!(["slow", "slow"])));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sqlite_savers_on_one_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shared.db");
    let first = SqliteSaver::from_path(&path).await?;
    let second = SqliteSaver::from_path(&path).await?;
    exclusive(Arc::new(first), Arc::new(second)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_postgres_savers_on_one_schema() -> TestResult {
    let Some(url) = postgres_url() else {
        return Ok(());
    };
    let schema = fresh_name("wp_rt2");
    let open = || PostgresSaver::connect(PostgresConfig::new(url.clone()).schema(schema.clone()));
    let first = open().await?;
    first.setup().await?;
    let second = open().await?;
    exclusive(Arc::new(first), Arc::new(second)).await
}
