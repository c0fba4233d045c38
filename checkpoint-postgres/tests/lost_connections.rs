//! Connections lost under an open saver and store: every session killed server-side
//! (`pg_terminate_backend`), the server stopped and started again, and a port nothing
//! listens on. The next call after the server is back succeeds on fresh connections, no call
//! outlasts its timeout, errors name the server, the operation and the cause, and nothing
//! acknowledged is lost. (tests/reliability.rs restarts the server under a write loop,
//! tests/stall.rs hangs it.)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error,
    ListOptions, Result,
};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver, PostgresStore};
use waypoint_store::{StoreConfig, StoreExt};

/// The timeout of the savers and stores here.
const TIMEOUT: Duration = Duration::from_secs(2);

/// How late past its timeout a failed call may come back (scheduling on a busy machine).
const SLACK: Duration = Duration::from_millis(500);

/// Puts a checkpoint (no values) on `thread`, after `parent` if any; its config.
async fn put(saver: &PostgresSaver, thread: &str, step: i64) -> Result<CheckpointConfig> {
    saver
        .put(
            &CheckpointConfig::new(thread).with_ns(""),
            Checkpoint::new(step),
            CheckpointMetadata::new(CheckpointSource::Loop, step),
            BTreeMap::new(),
        )
        .await
}

/// The checkpoint ids of `thread`, sorted.
async fn ids(saver: &PostgresSaver, thread: &str) -> Result<Vec<String>> {
    let listed = saver
        .list(
            Some(&CheckpointConfig::new(thread)),
            &ListOptions::default(),
        )
        .await?;
    let mut ids: Vec<_> = listed.into_iter().map(|t| t.checkpoint.id).collect();
    ids.sort();
    Ok(ids)
}

/// Sorted ids of `acked`.
fn acked_ids(acked: &[CheckpointConfig]) -> Vec<String> {
    let mut ids: Vec<_> = acked
        .iter()
        .map(|c| c.checkpoint_id.clone().expect("an id"))
        .collect();
    ids.sort();
    ids
}

/// Ends every session on `database` but the caller's, waiting until they are gone; how many
/// there were.
async fn terminate_all(admin: &sqlx::PgPool, database: &str) -> usize {
    let killed: Vec<i32> = sqlx::query_scalar(
        "WITH ours AS MATERIALIZED (
             SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = $1
         )
         SELECT pid FROM ours WHERE pg_terminate_backend(pid)",
    )
    .bind(database)
    .fetch_all(admin)
    .await
    .expect("terminate");
    let start = Instant::now();
    loop {
        let left: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)")
                .bind(&killed)
                .fetch_one(admin)
                .await
                .expect("count");
        if left == 0 {
            return killed.len();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{left} sessions live on"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Several calls at once on the saver and on the store, so that both park connections.
async fn park_connections(saver: &PostgresSaver, store: &PostgresStore, thread: &str) {
    let config = CheckpointConfig::new(thread);
    let reads = (0..4).map(|_| saver.get_tuple(&config));
    for read in futures::future::join_all(reads).await {
        read.expect("read");
    }
    let gets = (0..4).map(|_| store.get(["lost"], "k"));
    for got in futures::future::join_all(gets).await {
        got.expect("store get");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_sessions_cost_no_call() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    killed_sessions(&url, &url).await
}

/// The same behind PgBouncer in transaction mode: the sessions it holds to the server are
/// killed under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_sessions_behind_pgbouncer_cost_no_call() -> Result<()> {
    let (Some(server), Some(pooler)) = (
        waypoint_test_kit::postgres_url(),
        waypoint_test_kit::pgbouncer_url(),
    ) else {
        return Ok(());
    };
    killed_sessions(&server, &format!("{pooler}?transaction_pooler=true")).await
}

/// A saver and a store reaching a fresh database of the server at `server` through `url`
/// (the server itself, or a pooler in front of it) lose every server session between calls,
/// twice: writes first, then reads first; then an operation that may not run twice.
async fn killed_sessions(server: &str, url: &str) -> Result<()> {
    let admin = PostgresSaver::connect(PostgresConfig::new(server).auto_setup(false)).await?;
    let database = waypoint_test_kit::fresh_name("wp_lost");
    sqlx::query(&format!("CREATE DATABASE {database}"))
        .execute(admin.pool())
        .await
        .expect("create database");
    let url = waypoint_test_kit::database_url(url, &database);
    let config = PostgresConfig::new(&url)
        .max_connections(4)
        .timeout(TIMEOUT);
    let saver = PostgresSaver::connect(config.clone()).await?;
    let store = PostgresStore::connect(config, StoreConfig::new())
        .await
        .expect("store");
    let mut acked = vec![put(&saver, "lost", 0).await?];
    store
        .put(["lost"], "k", json!({"v": 0}))
        .await
        .expect("store put");

    // Writes first after the kill, then reads first after another.
    park_connections(&saver, &store, "lost").await;
    assert!(terminate_all(admin.pool(), &database).await >= 1);
    acked.push(put(&saver, "lost", 1).await?);
    store
        .put(["lost"], "k", json!({"v": 1}))
        .await
        .expect("the store's first write after the kill");

    park_connections(&saver, &store, "lost").await;
    assert!(terminate_all(admin.pool(), &database).await >= 1);
    let latest = saver
        .get_tuple(&CheckpointConfig::new("lost"))
        .await?
        .expect("the latest checkpoint");
    assert_eq!(Some(&latest.checkpoint.id), acked[1].checkpoint_id.as_ref());
    let item = store
        .get(["lost"], "k")
        .await
        .expect("the store's first read after the kill")
        .expect("the item");
    assert_eq!(
        serde_json::Value::Object(std::sync::Arc::unwrap_or_clone(item.value)),
        json!({"v": 1})
    );

    assert_eq!(ids(&saver, "lost").await?, acked_ids(&acked));

    // An operation that may not run twice (a copy refuses a target that has checkpoints)
    // may fail on a killed session, clearly; the call after it succeeds.
    park_connections(&saver, &store, "lost").await;
    assert!(terminate_all(admin.pool(), &database).await >= 1);
    if let Err(err) = saver.copy_thread("lost", "copied").await {
        names(&err, address(&url), "copy_thread", "");
        saver.copy_thread("lost", "copied").await?;
    }
    assert_eq!(ids(&saver, "copied").await?.len(), acked.len());
    drop((saver, store));
    // Nothing of ours is left on it (the pools are gone); the database goes with the test.
    sqlx::query(&format!("DROP DATABASE {database} WITH (FORCE)"))
        .execute(admin.pool())
        .await
        .expect("drop database");
    Ok(())
}

/// Runs the fault server's control script with the action given when dropped (`start`
/// after `stop`, `resume` after `pause`) unless [`done`](Self::done), so a failed test
/// leaves the server running.
struct Undo<'a>(&'a waypoint_test_kit::FaultServer, Option<&'static str>);

impl Undo<'_> {
    /// Undoes now.
    fn done(&mut self) {
        if let Some(action) = self.1.take() {
            self.0.ctl(action);
        }
    }
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        self.done();
    }
}

/// `err` (a failed call) is a backend error naming `server`, `op` and `cause`.
#[track_caller]
fn names(err: &Error, server: &str, op: &str, cause: &str) {
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    let shown = err.to_string();
    eprintln!("failed as expected: {shown}");
    for expected in [server, op, cause] {
        assert!(
            shown.to_lowercase().contains(&expected.to_lowercase()),
            "{expected:?} missing: {shown}"
        );
    }
}

/// `url`'s `host:port`.
fn address(url: &str) -> &str {
    let rest = &url[url
        .find('@')
        .map_or(url.find("://").unwrap_or(0) + 3, |at| at + 1)..];
    rest.split(['/', '?']).next().unwrap_or(rest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_fails_calls_clearly_and_the_saver_recovers() -> Result<()> {
    let Some(faults) = waypoint_test_kit::postgres_faults() else {
        return Ok(());
    };
    let server = address(faults.url()).to_owned();
    let saver = PostgresSaver::connect(
        PostgresConfig::new(faults.url())
            .schema(waypoint_test_kit::fresh_name("wp_lost"))
            .timeout(TIMEOUT),
    )
    .await?;
    let mut acked = Vec::new();
    for step in 0..3 {
        acked.push(put(&saver, "stopped", step).await?);
    }

    faults.ctl("stop");
    let mut restart = Undo(&faults, Some("start"));
    for op in ["get_tuple", "put", "list", "get_tuple"] {
        let start = Instant::now();
        let err = match op {
            "put" => put(&saver, "stopped", 9).await.map(drop),
            "list" => ids(&saver, "stopped").await.map(drop),
            _ => saver
                .get_tuple(&CheckpointConfig::new("stopped"))
                .await
                .map(drop),
        }
        .expect_err("the server is down");
        let took = start.elapsed();
        assert!(took <= TIMEOUT + SLACK, "{op} took {took:?}");
        names(&err, &server, op, "refused");
    }

    restart.done();
    let latest = saver
        .get_tuple(&CheckpointConfig::new("stopped"))
        .await?
        .expect("the latest checkpoint");
    assert_eq!(Some(&latest.checkpoint.id), acked[2].checkpoint_id.as_ref());
    acked.push(put(&saver, "stopped", 3).await?);
    assert_eq!(ids(&saver, "stopped").await?, acked_ids(&acked));

    // A server that accepts connections but never answers (hung): opening a saver fails
    // within the timeout, saying so.
    faults.ctl("pause");
    let mut resume = Undo(&faults, Some("resume"));
    let start = Instant::now();
    let err = PostgresSaver::connect(PostgresConfig::new(faults.url()).timeout(TIMEOUT))
        .await
        .expect_err("the server is hung");
    let took = start.elapsed();
    resume.done();
    assert!(took <= TIMEOUT + SLACK, "took {took:?}");
    names(&err, &server, "setup", "no answer");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_fails_within_the_timeout_naming_the_cause() {
    let port = waypoint_test_kit::free_port();
    let start = Instant::now();
    let err = PostgresSaver::connect(
        PostgresConfig::new(format!("postgres://nobody@127.0.0.1:{port}/none")).timeout(TIMEOUT),
    )
    .await
    .expect_err("nothing listens there");
    let took = start.elapsed();
    assert!(took <= TIMEOUT, "took {took:?}");
    names(&err, &format!("127.0.0.1:{port}"), "setup", "refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_kept_busy_says_so_within_the_timeout() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let saver = PostgresSaver::connect(
        PostgresConfig::new(&url)
            .schema(waypoint_test_kit::fresh_name("wp_lost"))
            .max_connections(1)
            .timeout(TIMEOUT),
    )
    .await?;
    // The pool's one connection, held elsewhere.
    let held = saver.pool().acquire().await.expect("the connection");
    let start = Instant::now();
    let err = saver
        .get_tuple(&CheckpointConfig::new("busy"))
        .await
        .expect_err("no connection free");
    let took = start.elapsed();
    assert!(took <= TIMEOUT + SLACK, "took {took:?}");
    names(
        &err,
        address(&url),
        "get_tuple",
        "all 1 connections stayed busy",
    );
    drop(held);
    assert!(
        saver
            .get_tuple(&CheckpointConfig::new("busy"))
            .await?
            .is_none()
    );
    Ok(())
}
