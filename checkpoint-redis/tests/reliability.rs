//! Reliability on a real Redis server: the server stopped and started again in the middle of
//! a put loop (clear errors during the outage, recovery after it with the same saver), the
//! server SIGKILLed and restarted under concurrent writers (every acknowledged checkpoint is
//! read back with its value by a fresh saver: the server runs AOF with `appendfsync
//! everysec`, as `scripts/services.sh` starts it), the store's write loop across a restart,
//! and an unreachable server (saver and store).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, Result, SerializedValue,
};
use waypoint_checkpoint_redis::{PersistenceCheck, RedisConfig, RedisSaver};

/// Held by each test that takes the fault server away, so they never overlap.
static FAULT_SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Puts the next checkpoint of a chain (one channel, a new version each step).
async fn put_next(
    saver: &RedisSaver,
    parent: &CheckpointConfig,
    step: u64,
) -> Result<CheckpointConfig> {
    let mut cp = Checkpoint::new(step as i64);
    let version = ChannelVersion::from(step + 1);
    let value = serde_json::to_vec(&json!({"step": step, "pad": "x".repeat(300)})).expect("json");
    cp.channel_values
        .insert("messages".into(), SerializedValue::new("json", value));
    cp.channel_versions
        .insert("messages".into(), version.clone());
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64);
    saver
        .put(parent, cp, meta, [("messages".to_owned(), version)].into())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_mid_put_loop_fails_clearly_then_recovers() -> Result<()> {
    // A server of its own: stopping it must not disturb tests running on the shared one.
    let Some(server) = waypoint_test_kit::redis_faults() else {
        return Ok(());
    };
    let _alone = FAULT_SERVER.lock().await;
    let config = RedisConfig::new(server.url()).prefix(common::fresh_prefix());
    let timeout = Duration::from_secs(2);
    let saver = RedisSaver::connect(config.timeout(timeout)).await?;
    let thread = CheckpointConfig::new("restart").with_ns("");
    let mut parent = thread.clone();
    let (start, run_for) = (Instant::now(), Duration::from_secs(8));
    let (mut acknowledged, mut failures, mut after_restart) = (0u64, 0u64, 0u64);
    let mut messages = Vec::new();
    let mut restarted = None;
    let mut step = 0;
    while start.elapsed() < run_for {
        if restarted.is_none() && start.elapsed() > Duration::from_secs(2) {
            // Taken away mid-loop; back two seconds later, from another thread, while the
            // loop keeps calling.
            let server = server.clone();
            restarted = Some(std::thread::spawn(move || {
                server.ctl("stop");
                std::thread::sleep(Duration::from_secs(2));
                server.ctl("start");
            }));
        }
        let call = Instant::now();
        match put_next(&saver, &parent, step).await {
            Ok(stored) => {
                parent = stored;
                step += 1;
                acknowledged += 1;
                if restarted.as_ref().is_some_and(|h| h.is_finished()) {
                    after_restart += 1;
                }
            }
            Err(e) => {
                assert!(
                    matches!(e, Error::Backend { .. }),
                    "an outage is a backend error: {e:?}"
                );
                let took = call.elapsed();
                assert!(
                    took <= timeout + Duration::from_millis(500),
                    "a call during the outage took {took:?}, over the {timeout:?} timeout"
                );
                if messages.len() < 3 {
                    messages.push(e.to_string());
                }
                failures += 1;
                // Do not spin: a refused connection fails at once.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    restarted
        .expect("the server was stopped")
        .join()
        .expect("restart");
    assert!(failures > 0, "no call failed while the server was down");
    assert!(
        after_restart > 10,
        "the saver did not recover after the restart ({after_restart} puts)"
    );
    for m in &messages {
        assert!(m.contains("redis"), "{m}");
    }
    // The same saver reads what it wrote after the restart.
    let latest = saver
        .get_tuple(&thread)
        .await?
        .expect("written after the restart");
    assert_eq!(
        Some(latest.checkpoint.id.as_str()),
        parent.checkpoint_id.as_deref()
    );
    eprintln!(
        "{acknowledged} puts acknowledged, {failures} failed during the outage, \
         {after_restart} after the restart; errors: {messages:#?}"
    );
    Ok(())
}

/// The value the kill test stores at `step` of `thread`.
fn kill_value(thread: usize, step: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({"thread": thread, "step": step, "pad": "k".repeat(200)}))
        .expect("json")
}

/// One writer of the kill test: puts a chain on its own thread until `until`, and returns
/// every acknowledged checkpoint with the value it holds and when it was acknowledged. After a failed put it continues
/// from the thread's latest checkpoint (a put whose reply was lost may have landed).
async fn kill_writer(
    saver: Arc<RedisSaver>,
    thread: usize,
    until: Instant,
) -> (Vec<(CheckpointConfig, Vec<u8>, Instant)>, u64) {
    let root = CheckpointConfig::new(format!("kill-{thread}")).with_ns("");
    let mut parent = root.clone();
    let (mut acked, mut failures, mut resync) = (Vec::new(), 0u64, false);
    let mut step = 0u64;
    while Instant::now() < until {
        if resync {
            match saver.get_tuple(&root).await {
                Ok(latest) => {
                    parent = latest.map_or_else(|| root.clone(), |t| t.config);
                    resync = false;
                }
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            }
        }
        let value = kill_value(thread, step);
        let mut cp = Checkpoint::new(step as i64);
        let version = ChannelVersion::from(step + 1);
        cp.channel_values.insert(
            "messages".into(),
            SerializedValue::new("json", value.clone()),
        );
        cp.channel_versions
            .insert("messages".into(), version.clone());
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64);
        match saver
            .put(&parent, cp, meta, [("messages".to_owned(), version)].into())
            .await
        {
            Ok(stored) => {
                acked.push((stored.clone(), value, Instant::now()));
                parent = stored;
            }
            Err(e) => {
                assert!(matches!(e, Error::Backend { .. }), "{e:?}");
                failures += 1;
                resync = true;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        step += 1;
    }
    (acked, failures)
}

/// Redis SIGKILLed (no shutdown, no final fsync) and restarted while four writers put
/// checkpoints: a fresh saver finds every acknowledged checkpoint with its value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_killed_mid_put_loop_loses_nothing_acknowledged() -> Result<()> {
    let Some(server) = waypoint_test_kit::redis_faults() else {
        return Ok(());
    };
    let _alone = FAULT_SERVER.lock().await;
    let config = RedisConfig::new(server.url())
        .prefix(common::fresh_prefix())
        .timeout(Duration::from_secs(2))
        .persistence(PersistenceCheck::Require);
    let saver = Arc::new(RedisSaver::connect(config.clone()).await?);
    let start = Instant::now();
    let until = start + Duration::from_secs(8);
    let writers: Vec<_> = (0..4)
        .map(|t| tokio::spawn(kill_writer(saver.clone(), t, until)))
        .collect();
    // Killed two seconds in, while the writers keep calling; back a second later.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = tokio::task::spawn_blocking(move || {
        let killed_at = Instant::now();
        server.ctl("kill");
        std::thread::sleep(Duration::from_secs(1));
        server.ctl("start");
        killed_at
    })
    .await
    .expect("kill and restart");
    let (mut acked, mut failures) = (Vec::new(), 0);
    for w in writers {
        let (a, f) = w.await.expect("writer");
        acked.extend(a);
        failures += f;
    }
    let killed_after = killed.duration_since(start);
    assert!(failures > 0, "no put failed while the server was down");

    // A fresh saver (new connection, new process state) reads everything back.
    let fresh = RedisSaver::connect(config).await?;
    let mut lost = Vec::new();
    for (stored, value, _) in &acked {
        match fresh.get_tuple(stored).await? {
            Some(t)
                if t.checkpoint.channel_values["messages"].bytes.as_ref() == value.as_slice() => {}
            other => lost.push((stored.clone(), other.map(|t| t.checkpoint.id))),
        }
    }
    let before_kill = acked.iter().filter(|(_, _, at)| *at < killed).count();
    eprintln!(
        "SIGKILL at {killed_after:?}: {} checkpoints acknowledged ({before_kill} before the \
         kill), {} lost, {failures} puts failed during the outage",
        acked.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "acknowledged checkpoints lost: {lost:#?}");
    assert!(
        before_kill > 50,
        "too few puts before the kill: {before_kill}"
    );
    assert!(
        acked.len() - before_kill > 50,
        "the writers did not recover after the restart: {} puts",
        acked.len() - before_kill
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_within_the_timeout() {
    // A port nothing listens on (bound, then released).
    let port = waypoint_test_kit::free_port();
    let config =
        RedisConfig::new(format!("redis://127.0.0.1:{port}/")).timeout(Duration::from_secs(1));
    let start = Instant::now();
    let err = RedisSaver::connect(config.clone())
        .await
        .expect_err("nothing listens there");
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(3));

    #[cfg(feature = "store")]
    {
        let start = Instant::now();
        let err = waypoint_checkpoint_redis::RedisStore::connect(
            config,
            waypoint_store::StoreConfig::new(),
        )
        .await
        .expect_err("nothing listens there");
        assert!(
            matches!(err, waypoint_store::Error::Backend { .. }),
            "{err:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }
}

#[cfg(feature = "store")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_server_restart_mid_write_loop_fails_fast_then_recovers() -> waypoint_store::Result<()>
{
    use waypoint_checkpoint_redis::RedisStore;
    use waypoint_store::conformance::{Restart, restart_mid_write_loop};
    use waypoint_store::{IndexConfig, StoreConfig};

    let Some(server) = waypoint_test_kit::redis_faults() else {
        return Ok(());
    };
    let _alone = FAULT_SERVER.lock().await;
    let timeout = Duration::from_secs(1);
    let store = RedisStore::connect(
        RedisConfig::new(server.url())
            .prefix(common::fresh_prefix())
            .timeout(timeout)
            .connect_timeout(Duration::from_millis(500)),
        StoreConfig::new().index(IndexConfig::hashing(32)),
    )
    .await?;
    let summary = restart_mid_write_loop(
        &store,
        move |action: &str| server.ctl(action),
        timeout + Duration::from_millis(500),
        Restart::Empties,
    )
    .await?;
    eprintln!("{summary}");
    Ok(())
}
