//! Reliability on a real Redis server: the server stopped and started again in the middle of
//! a put loop (clear errors during the outage, recovery after it with the same saver), and
//! an unreachable server. The server has no persistence: what was written before the restart
//! is gone, so only errors and recovery are checked.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, Result, SerializedValue,
};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};

fn ctl(action: &str) {
    let script =
        std::env::var("WAYPOINT_TEST_REDIS_FAULTS_CTL").expect("the server's control script");
    let status = Command::new(&script)
        .arg(action)
        .status()
        .expect("run the control script");
    assert!(status.success(), "{script} {action} failed: {status}");
}

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
    let (Ok(url), Ok(_)) = (
        std::env::var("WAYPOINT_TEST_REDIS_FAULTS_URL"),
        std::env::var("WAYPOINT_TEST_REDIS_FAULTS_CTL"),
    ) else {
        assert!(
            std::env::var("WAYPOINT_REQUIRE_BACKENDS").as_deref() != Ok("1"),
            "WAYPOINT_TEST_REDIS_FAULTS_URL/_CTL are not set but WAYPOINT_REQUIRE_BACKENDS=1"
        );
        eprintln!("skipped: WAYPOINT_TEST_REDIS_FAULTS_URL/_CTL are not set");
        return Ok(());
    };
    let config = RedisConfig::new(url).prefix(common::fresh_prefix());
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
            restarted = Some(std::thread::spawn(|| {
                ctl("stop");
                std::thread::sleep(Duration::from_secs(2));
                ctl("start");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_within_the_timeout() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let start = Instant::now();
    let err = RedisSaver::connect(
        RedisConfig::new(format!("redis://127.0.0.1:{port}/")).timeout(Duration::from_secs(1)),
    )
    .await
    .expect_err("nothing listens there");
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(3));
}
