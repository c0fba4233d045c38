//! Lost connections on the Redis fault server (a server of its own, AOF `everysec`):
//! `CLIENT KILL TYPE normal` under an open saver and store (their next calls succeed: reads
//! are retried once on the new connection, and a write either succeeds or fails clearly with
//! the one after it succeeding), and a stop or SIGKILL then start under an open saver and
//! store (calls fail clearly within the timeout, none hangs; the first call after the start
//! succeeds without reopening; every acknowledged write is there). `reliability.rs` covers
//! the put loop across a restart and concurrent writers across a SIGKILL, read by a fresh
//! saver.

mod common;

use std::time::{Duration, Instant};

use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error,
    ListOptions, Result,
};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};

/// The operation timeout of these savers: long enough for the server to load its data after
/// a start (it refuses commands meanwhile, which the saver retries).
const TIMEOUT: Duration = Duration::from_secs(5);

/// Held by each test while it kills connections or stops the server.
static FAULT_SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Puts a checkpoint as the child of `parent`.
async fn put(saver: &RedisSaver, parent: &CheckpointConfig, step: i64) -> Result<CheckpointConfig> {
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
    saver
        .put(parent, Checkpoint::new(step), meta, Default::default())
        .await
}

/// Closes every normal client connection of the server but the one sending the command.
async fn kill_clients(url: &str) {
    let client = redis::Client::open(url).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query_async(&mut conn)
        .await
        .expect("client kill");
    assert!(killed > 0, "no connection was killed");
}

/// Runs `call` as the first one after a lost connection: a read must succeed; a write
/// (`write = true`) may instead fail with a backend error, and then `call` once more must
/// succeed.
async fn first_call_after<T, E: std::fmt::Debug>(
    what: &str,
    write: bool,
    mut call: impl AsyncFnMut() -> std::result::Result<T, E>,
) -> T {
    match call().await {
        Ok(v) => v,
        Err(e) if write => {
            eprintln!("{what}: the first write after a lost connection failed: {e:?}");
            call()
                .await
                .unwrap_or_else(|e| panic!("{what}, again: {e:?}"))
        }
        Err(e) => panic!("{what}: {e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_cost_a_saver_and_a_store_no_failed_call() -> Result<()> {
    let Some(server) = waypoint_test_kit::redis_faults() else {
        return Ok(());
    };
    let _alone = FAULT_SERVER.lock().await;
    let config = RedisConfig::new(server.url())
        .prefix(common::fresh_prefix())
        .timeout(TIMEOUT);
    let saver = RedisSaver::connect(config.clone()).await?;
    let thread = CheckpointConfig::new("killed").with_ns("");
    let mut parent = put(&saver, &thread, 0).await?;

    // A read first, then a write first.
    kill_clients(server.url()).await;
    let latest = first_call_after("get_tuple", false, async || saver.get_tuple(&thread).await)
        .await
        .expect("stored before the kill");
    assert_eq!(Some(latest.checkpoint.id), parent.checkpoint_id);
    kill_clients(server.url()).await;
    parent = first_call_after("put", true, async || put(&saver, &parent, 1).await).await;
    let listed = saver.list(Some(&thread), &ListOptions::default()).await?;
    assert_eq!(listed.len(), 2);
    assert_eq!(
        Some(&listed[0].checkpoint.id),
        parent.checkpoint_id.as_ref()
    );

    #[cfg(feature = "store")]
    {
        use serde_json::json;
        use waypoint_store::{StoreConfig, StoreExt};
        let store = |e: waypoint_store::Error| Error::InvalidConfig(e.to_string());
        // One store on the saver's connection, one on its own.
        let shared = saver.store(StoreConfig::new()).await.map_err(store)?;
        let own = waypoint_checkpoint_redis::RedisStore::connect(config, StoreConfig::new())
            .await
            .map_err(store)?;
        for (i, s) in [shared, own].iter().enumerate() {
            let key = format!("k{i}");
            s.put(["killed"], &key, json!({"v": 0}))
                .await
                .map_err(store)?;
            kill_clients(server.url()).await;
            let item = first_call_after("store get", false, async || s.get(["killed"], &key).await)
                .await
                .expect("stored before the kill");
            assert_eq!(json!(*item.value), json!({"v": 0}));
            kill_clients(server.url()).await;
            first_call_after("store put", true, async || {
                s.put(["killed"], &key, json!({"v": 1})).await
            })
            .await;
            let item = s.get(["killed"], &key).await.map_err(store)?.expect("kept");
            assert_eq!(json!(*item.value), json!({"v": 1}));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_or_killed_server_keeps_every_acknowledged_write() -> Result<()> {
    let Some(server) = waypoint_test_kit::redis_faults() else {
        return Ok(());
    };
    let _alone = FAULT_SERVER.lock().await;
    let config = RedisConfig::new(server.url())
        .prefix(common::fresh_prefix())
        .timeout(TIMEOUT);
    let saver = RedisSaver::connect(config).await?;
    #[cfg(feature = "store")]
    let store = saver
        .store(waypoint_store::StoreConfig::new())
        .await
        .map_err(|e| Error::InvalidConfig(e.to_string()))?;
    for (round, action) in ["stop", "kill"].into_iter().enumerate() {
        let thread = CheckpointConfig::new(format!("{action}-{round}")).with_ns("");
        let mut parent = thread.clone();
        let mut acknowledged = Vec::new();
        for step in 0..50 {
            parent = put(&saver, &parent, step).await?;
            acknowledged.push(parent.checkpoint_id.clone().expect("an id"));
        }
        #[cfg(feature = "store")]
        {
            use waypoint_store::StoreExt;
            store
                .put([action], "last", serde_json::json!({"round": round}))
                .await
                .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        }
        server.ctl(action);

        // Down: a read and a write each fail clearly within the timeout.
        for write in [false, true] {
            let start = Instant::now();
            let err = if write {
                put(&saver, &parent, 99).await.err()
            } else {
                saver.get_tuple(&thread).await.err()
            }
            .expect("the server is down");
            let took = start.elapsed();
            assert!(
                took <= TIMEOUT + Duration::from_millis(500),
                "{action}: a call took {took:?}"
            );
            assert!(matches!(err, Error::Backend { .. }), "{err:?}");
            let message = format!("{err}: {:?}", std::error::Error::source(&err));
            assert!(message.contains("unreachable"), "{message}");
        }

        server.ctl("start");
        // Up again: the same saver, without reopening, reads every acknowledged checkpoint.
        let listed = saver.list(Some(&thread), &ListOptions::default()).await?;
        let mut ids: Vec<String> = listed.into_iter().map(|t| t.checkpoint.id).collect();
        ids.reverse();
        assert_eq!(ids, acknowledged, "{action}: acknowledged checkpoints lost");
        #[cfg(feature = "store")]
        {
            use waypoint_store::StoreExt;
            let item = store
                .get([action], "last")
                .await
                .map_err(|e| Error::InvalidConfig(e.to_string()))?
                .expect("acknowledged before the outage");
            assert_eq!(
                serde_json::json!(*item.value),
                serde_json::json!({"round": round})
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn connect_errors_name_the_server_the_operation_and_the_cause() {
    let Some(url) = waypoint_test_kit::redis_url() else {
        return;
    };
    let port = waypoint_test_kit::free_port();
    let closed = format!("redis://:hunter2@127.0.0.1:{port}/");
    let wrong_password = url.replacen("redis://", "redis://:hunter2@", 1);
    for (config, cause) in [
        (RedisConfig::new(closed), "unreachable"),
        (RedisConfig::new(wrong_password), "refused the credentials"),
    ] {
        let config = config.timeout(Duration::from_secs(2));
        let start = Instant::now();
        let err = RedisSaver::connect(config).await.expect_err("refused");
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        let message = format!("{err}: {:?}", std::error::Error::source(&err));
        assert!(
            message.contains("`connect`") && message.contains(cause),
            "{message}"
        );
        assert!(message.contains(":***@127.0.0.1:"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
    }
}
