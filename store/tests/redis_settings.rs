//! `RedisStoreConfig` settings that guard the user: the URL's password never shows (in
//! `Debug` output or errors), and the server's persistence is checked at connect, with the
//! checkpointer's own check, on a server this file starts and stops itself (the shared test
//! servers are never changed).

#![cfg(feature = "redis")]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use waypoint_store::{Error, PersistenceCheck, RedisStore, RedisStoreConfig, Result};

const PASSWORD: &str = "hunter2-s3cret";

fn required() -> bool {
    std::env::var("WAYPOINT_REQUIRE_BACKENDS").as_deref() == Ok("1")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn fresh_prefix() -> String {
    format!("wp-store-test-{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test]
async fn passwords_never_show() {
    let url = format!("redis://user:{PASSWORD}@127.0.0.1:{}/0", free_port());
    let config = RedisStoreConfig::new(&url)
        .timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_millis(500));
    let shown = format!("{config:?}");
    assert!(!shown.contains(PASSWORD), "{shown}");
    assert!(shown.contains("redis://user:***@127.0.0.1"), "{shown}");
    // Nothing listens there.
    let err = RedisStore::connect(config).await.expect_err("unreachable");
    let text = format!("{err} {err:?}");
    assert!(!text.contains(PASSWORD), "{text}");
}

/// A `redis-server` without persistence, on a free port, stopped when dropped.
struct Unpersisted {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Unpersisted {
    fn start() -> Option<Self> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let spawned = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                assert!(!required(), "cannot start redis-server: {e}");
                eprintln!("skipped: cannot start redis-server ({e})");
                return None;
            }
        };
        let server = Unpersisted {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
            _dir: dir,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(server);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("the private redis-server did not start");
    }
}

impl Drop for Unpersisted {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn persistence_is_checked_at_connect() -> Result<()> {
    assert_eq!(
        RedisStoreConfig::new("redis://x/").persistence,
        PersistenceCheck::Warn
    );
    let Some(server) = Unpersisted::start() else {
        return Ok(());
    };
    let config = |check| {
        RedisStoreConfig::new(&server.url)
            .prefix(fresh_prefix())
            .persistence(check)
    };
    let err = RedisStore::connect(config(PersistenceCheck::Require))
        .await
        .expect_err("no AOF");
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(err.to_string().contains("appendonly=no"), "{err}");
    RedisStore::connect(config(PersistenceCheck::Warn)).await?;
    RedisStore::connect(config(PersistenceCheck::Ignore)).await?;
    // The shared test server runs AOF with appendfsync everysec (scripts/services.sh).
    match std::env::var("WAYPOINT_TEST_REDIS_URL") {
        Ok(url) => {
            let shared = RedisStoreConfig::new(url)
                .prefix(fresh_prefix())
                .persistence(PersistenceCheck::Require);
            RedisStore::connect(shared).await?;
        }
        Err(_) => assert!(!required(), "WAYPOINT_TEST_REDIS_URL is not set"),
    }
    Ok(())
}
