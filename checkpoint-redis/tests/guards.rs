//! What the saver and the store refuse or hide, on real servers: values over the size limit
//! (refused before anything is sent), passwords in URLs (never in `Debug` output or errors),
//! servers that would lose acknowledged writes on a restart (`PersistenceCheck`, tried on
//! servers this file starts and stops itself, so the shared ones are never changed), and
//! tampered ciphertexts under a keyring (reads fail closed).

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, Result, Save, SerializedValue,
};
use waypoint_checkpoint_redis::{PersistenceCheck, REDIS_MAX_VALUE_BYTES, RedisConfig, RedisSaver};

const LIMIT: usize = 1024;
/// What a `json` value's stored form adds to its bytes: the tag, as `4:json`.
const JSON_HEADER: usize = 6;

/// A put of one `json` channel holding `len` bytes, under `parent`.
fn put_of(parent: &CheckpointConfig, len: usize) -> Save {
    let mut cp = Checkpoint::new(0);
    cp.channel_values
        .insert("big".into(), SerializedValue::new("json", vec![b'7'; len]));
    cp.channel_versions
        .insert("big".into(), ChannelVersion::from(1));
    Save::Put {
        config: parent.clone(),
        checkpoint: cp,
        metadata: CheckpointMetadata::new(CheckpointSource::Loop, 0),
        new_versions: [("big".to_owned(), ChannelVersion::from(1))].into(),
    }
}

async fn put_one(saver: &RedisSaver, parent: &CheckpointConfig, len: usize) -> Result<()> {
    saver.save_batch(vec![put_of(parent, len)]).await
}

fn assert_too_large(r: Result<()>, len: usize) {
    match r {
        Err(e @ Error::Serialization { .. }) => {
            let text = e.to_string();
            eprintln!("{text}");
            assert!(text.contains(&len.to_string()), "{text}");
            assert!(text.contains(&LIMIT.to_string()), "{text}");
            assert!(text.contains("max_value_bytes"), "{text}");
        }
        other => panic!("a value of {len} bytes over a {LIMIT}-byte limit gave {other:?}"),
    }
}

#[tokio::test]
async fn values_over_the_limit_are_refused_before_sending() -> Result<()> {
    let Some(config) = common::config() else {
        return Ok(());
    };
    assert_eq!(config.max_value_bytes, REDIS_MAX_VALUE_BYTES);
    assert_eq!(REDIS_MAX_VALUE_BYTES, 512 * 1024 * 1024);
    // Both ways a put travels: the MULTI/EXEC pipeline (no ttl) and the script (ttl).
    for config in [
        config.clone().max_value_bytes(LIMIT),
        config.ttl(Duration::from_secs(600)).max_value_bytes(LIMIT),
    ] {
        let saver = RedisSaver::connect(config).await?;
        let root = CheckpointConfig::new(uuid::Uuid::new_v4().to_string()).with_ns("");
        let mut cp = Checkpoint::new(0);
        cp.channel_values.insert(
            "big".into(),
            SerializedValue::new("json", vec![b'7'; LIMIT - JSON_HEADER + 1]),
        );
        cp.channel_versions
            .insert("big".into(), ChannelVersion::from(1));
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        let new_versions = [("big".to_owned(), ChannelVersion::from(1))].into();
        let r = saver.put(&root, cp, meta, new_versions).await.map(|_| ());
        assert_too_large(r, LIMIT + 1);
        assert!(saver.get_tuple(&root).await?.is_none(), "nothing stored");

        // Exactly at the limit is stored and read back.
        put_one(&saver, &root, LIMIT - JSON_HEADER).await?;
        let stored = saver.get_tuple(&root).await?.expect("stored at the limit");
        assert_eq!(
            stored.checkpoint.channel_values["big"].bytes.len(),
            LIMIT - JSON_HEADER
        );

        // A batch with one value over the limit writes none of its saves.
        let other = CheckpointConfig::new(uuid::Uuid::new_v4().to_string()).with_ns("");
        let batch = vec![put_of(&other, 10), put_of(&other, LIMIT)];
        assert_too_large(saver.save_batch(batch).await, LIMIT + JSON_HEADER);
        assert!(
            saver.get_tuple(&other).await?.is_none(),
            "half a batch stored"
        );

        // Pending writes: the stored form adds the channel and task path.
        let at = stored.config.clone();
        let big = SerializedValue::new("json", vec![b'7'; LIMIT]);
        let r = saver
            .put_writes(&at, vec![("big".into(), big)], "task", "")
            .await;
        match r {
            Err(e @ Error::Serialization { .. }) => {
                let text = e.to_string();
                assert!(text.contains("task"), "{text}");
                assert!(text.contains(&LIMIT.to_string()), "{text}");
            }
            other => panic!("an oversized write gave {other:?}"),
        }
        let tuple = saver.get_tuple(&at).await?.expect("still there");
        assert!(
            tuple.pending_writes.is_empty(),
            "an oversized write was stored"
        );
        saver
            .put_writes(
                &at,
                vec![("small".into(), SerializedValue::new("json", b"1".to_vec()))],
                "task",
                "",
            )
            .await?;
    }
    // Metadata counts too.
    let Some(config) = common::config() else {
        return Ok(());
    };
    let saver = RedisSaver::connect(config.max_value_bytes(LIMIT)).await?;
    let root = CheckpointConfig::new(uuid::Uuid::new_v4().to_string()).with_ns("");
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    meta.extra.insert("notes".into(), json!("n".repeat(LIMIT)));
    let r = saver
        .put(&root, Checkpoint::new(0), meta, Default::default())
        .await;
    match r {
        Err(Error::Serialization { path, .. }) => assert_eq!(path.as_deref(), Some("metadata")),
        other => panic!("oversized metadata gave {other:?}"),
    }
    assert!(
        RedisSaver::connect(RedisConfig::new("redis://127.0.0.1:1/").max_value_bytes(0))
            .await
            .is_err_and(|e| matches!(e, Error::InvalidConfig(_)))
    );
    Ok(())
}

const PASSWORD: &str = "hunter2-s3cret";

fn assert_hidden(text: &str) {
    assert!(!text.contains(PASSWORD), "the password shows in: {text}");
}

#[tokio::test]
async fn passwords_never_show() -> Result<()> {
    let port = waypoint_test_kit::free_port();
    let url = format!("redis://user:{PASSWORD}@127.0.0.1:{port}/0");
    let config = RedisConfig::new(&url).timeout(Duration::from_secs(1));
    let shown = format!("{config:?}");
    assert_hidden(&shown);
    assert!(shown.contains("redis://user:***@127.0.0.1"), "{shown}");

    // Nothing listens there.
    let err = RedisSaver::connect(config).await.expect_err("unreachable");
    eprintln!("{err}");
    for text in [err.to_string(), format!("{err:?}"), format!("{err:#}")] {
        assert_hidden(&text);
    }
    assert!(err.to_string().contains("***@127.0.0.1"), "{err}");

    // A URL that does not parse.
    let err = RedisSaver::connect(RedisConfig::new(format!("redis://:{PASSWORD}@[::1")))
        .await
        .expect_err("bad URL");
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert_hidden(&format!("{err} {err:?}"));

    // A server that refuses the password (the test server has none).
    if let Some(test_url) = waypoint_test_kit::redis_url() {
        let with_password = test_url.replacen("redis://", &format!("redis://:{PASSWORD}@"), 1);
        let err = RedisSaver::connect(RedisConfig::new(with_password))
            .await
            .expect_err("the server has no password");
        assert_hidden(&format!("{err} {err:?}"));
    }
    Ok(())
}

/// A `redis-server` of this test's own, on a free port, stopped when dropped.
struct PrivateServer {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl PrivateServer {
    /// Starts one with `args` after the port and directory; `None` when `redis-server` is not
    /// installed (a failure under `WAYPOINT_REQUIRE_BACKENDS=1`).
    fn start(args: &[&str]) -> Option<Self> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = waypoint_test_kit::free_port();
        let spawned = Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(dir.path())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                assert!(
                    !waypoint_test_kit::backends_required(),
                    "cannot start redis-server: {e}"
                );
                eprintln!("skipped: cannot start redis-server ({e})");
                return None;
            }
        };
        let server = PrivateServer {
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

    fn config(&self, check: PersistenceCheck) -> RedisConfig {
        RedisConfig::new(&self.url)
            .prefix(common::fresh_prefix())
            .persistence(check)
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Collects the `warn` events emitted on this thread while installed.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }
}

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        *meta.level() == tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = String::new();
        event.record(&mut Message(&mut text));
        self.0.lock().expect("lock").push(text);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// `Require` refuses a server without AOF, or with AOF but `appendfsync no`, naming the
/// settings; `Warn` connects and warns; `Ignore` connects silently; a server with AOF
/// `everysec` or `always` is accepted.
#[tokio::test]
async fn persistence_is_checked_at_connect() -> Result<()> {
    let Some(server) = PrivateServer::start(&["--appendonly", "no"]) else {
        return Ok(());
    };
    let warnings = Warnings::default();
    let _guard = tracing::subscriber::set_default(warnings.clone());

    let err = RedisSaver::connect(server.config(PersistenceCheck::Require))
        .await
        .expect_err("no AOF");
    let text = err.to_string();
    eprintln!("{text}");
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(
        text.contains("appendonly=no") && text.contains("appendfsync=everysec"),
        "{text}"
    );
    assert!(text.contains("Require"), "{text}");

    RedisSaver::connect(server.config(PersistenceCheck::Warn)).await?;
    let seen = warnings.take();
    eprintln!("{seen:?}");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("appendonly=no"), "{seen:?}");
    assert!(
        seen[0].contains(&server.url),
        "the warning names the server: {seen:?}"
    );

    RedisSaver::connect(server.config(PersistenceCheck::Ignore)).await?;
    assert!(warnings.take().is_empty());

    // The default is Warn.
    assert_eq!(
        RedisConfig::new("redis://x/").persistence,
        PersistenceCheck::Warn
    );

    let saver = RedisSaver::connect(server.config(PersistenceCheck::Ignore)).await?;
    let mut conn = saver.connection();
    let set = |name: &'static str, value: &'static str| {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("SET").arg(name).arg(value);
        cmd
    };
    set("appendonly", "yes")
        .query_async::<()>(&mut conn)
        .await
        .expect("config set");
    for fsync in ["everysec", "always"] {
        set("appendfsync", fsync)
            .query_async::<()>(&mut conn)
            .await
            .expect("config set");
        RedisSaver::connect(server.config(PersistenceCheck::Require)).await?;
    }
    assert!(warnings.take().is_empty(), "a durable server warned");
    set("appendfsync", "no")
        .query_async::<()>(&mut conn)
        .await
        .expect("config set");
    let err = RedisSaver::connect(server.config(PersistenceCheck::Require))
        .await
        .expect_err("appendfsync no");
    assert!(
        err.to_string().contains("appendonly=yes appendfsync=no"),
        "{err}"
    );

    // The shared test server runs as scripts/services.sh starts it: AOF, everysec.
    if let Some(config) = common::config() {
        RedisSaver::connect(config.persistence(PersistenceCheck::Require)).await?;
    }
    Ok(())
}

/// A server that does not allow `CONFIG` (as managed services often do): the settings are
/// unknown, so `Warn` connects with a warning and `Require` refuses, saying why.
#[tokio::test]
async fn persistence_unknown_without_config_command() -> Result<()> {
    let Some(server) =
        PrivateServer::start(&["--appendonly", "yes", "--rename-command", "CONFIG", ""])
    else {
        return Ok(());
    };
    let warnings = Warnings::default();
    let _guard = tracing::subscriber::set_default(warnings.clone());
    let err = RedisSaver::connect(server.config(PersistenceCheck::Require))
        .await
        .expect_err("unknown settings");
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    eprintln!("{err}");
    assert!(
        err.to_string().contains("CONFIG GET was unavailable"),
        "{err}"
    );
    let saver = RedisSaver::connect(server.config(PersistenceCheck::Warn)).await?;
    let seen = warnings.take();
    assert!(
        seen.len() == 1 && seen[0].contains("CONFIG GET was unavailable"),
        "{seen:?}"
    );
    // The saver works.
    let root = CheckpointConfig::new("t").with_ns("");
    put_one(&saver, &root, 3).await?;
    assert!(saver.get_tuple(&root).await?.is_some());
    Ok(())
}

/// Under a keyring a read fails closed: a channel value whose stored ciphertext was emptied
/// or deleted, or an empty channel's seal stripped, is `Error::Decrypt`, never an absent
/// channel.
#[tokio::test]
async fn keyed_reads_fail_closed_on_tampered_values() -> Result<()> {
    let Some(saver) = common::saver(common::keyed()?).await? else {
        return Ok(());
    };
    let mut conn = saver.connection();
    let prefix = saver.config().prefix.clone();
    for (tamper, channel) in [("empty", "x"), ("delete", "x"), ("empty", "gone")] {
        let thread = uuid::Uuid::new_v4().to_string();
        let root = CheckpointConfig::new(&thread).with_ns("");
        let mut cp = Checkpoint::new(0);
        cp.channel_values
            .insert("x".into(), SerializedValue::new("json", b"1".to_vec()));
        for c in ["x", "gone"] {
            cp.channel_versions
                .insert(c.into(), ChannelVersion::from(1));
        }
        let new_versions = cp.channel_versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        let stored = saver.put(&root, cp, meta, new_versions).await?;
        let read = saver.get_tuple(&stored).await?.expect("stored");
        assert!(read.checkpoint.channel_values.contains_key("x"));
        assert!(!read.checkpoint.channel_values.contains_key("gone"));

        let blobs = format!("{prefix}:{{{thread}}}:blobs:0:");
        let fields: Vec<String> = redis::cmd("HKEYS")
            .arg(&blobs)
            .query_async(&mut conn)
            .await
            .expect("hkeys");
        let field = fields
            .iter()
            .find(|f| f.starts_with(&format!("{}:{channel}", channel.len())))
            .expect("the channel's field");
        let mut cmd = redis::cmd(if tamper == "empty" { "HSET" } else { "HDEL" });
        cmd.arg(&blobs).arg(field);
        if tamper == "empty" {
            cmd.arg("");
        }
        cmd.query_async::<()>(&mut conn).await.expect("tamper");
        let r = saver.get_tuple(&stored).await;
        assert!(
            matches!(r, Err(Error::Decrypt(_))),
            "{tamper} {channel}: {r:?}"
        );
    }
    Ok(())
}

/// The store's side of the same guards, with the same config and connection layer.
#[cfg(feature = "store")]
mod store {
    use super::*;
    use waypoint_checkpoint_redis::RedisStore;
    use waypoint_store::{Error, StoreConfig};

    #[tokio::test]
    async fn passwords_never_show() {
        let port = waypoint_test_kit::free_port();
        let url = format!("redis://user:{PASSWORD}@127.0.0.1:{port}/0");
        let config = RedisConfig::new(&url)
            .timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_millis(500));
        // Nothing listens there.
        let err = RedisStore::connect(config, StoreConfig::new())
            .await
            .expect_err("unreachable");
        assert!(matches!(err, Error::Backend { .. }), "{err:?}");
        assert_hidden(&format!("{err} {err:?}"));
        assert!(err.to_string().contains("***@127.0.0.1"), "{err}");
        // A TLS setting that cannot work, and a TLS server that is not there.
        let tls = format!("rediss://:{PASSWORD}@127.0.0.1:{port}/");
        let err = RedisStore::from_url(
            &format!("{tls}?ssl_cert_reqs=sometimes"),
            StoreConfig::new(),
        )
        .await
        .expect_err("an unknown ssl_cert_reqs");
        assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
        assert_hidden(&format!("{err} {err:?}"));
        let config = RedisConfig::new(&tls)
            .timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_millis(500));
        let err = RedisStore::connect(config, StoreConfig::new())
            .await
            .expect_err("unreachable");
        assert!(matches!(err, Error::Backend { .. }), "{err:?}");
        assert_hidden(&format!("{err} {err:?}"));
    }

    #[tokio::test]
    async fn persistence_is_checked_at_connect() -> waypoint_store::Result<()> {
        let Some(server) = PrivateServer::start(&["--appendonly", "no"]) else {
            return Ok(());
        };
        let err = RedisStore::connect(server.config(PersistenceCheck::Require), StoreConfig::new())
            .await
            .expect_err("no AOF");
        assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
        assert!(err.to_string().contains("appendonly=no"), "{err}");
        RedisStore::connect(server.config(PersistenceCheck::Warn), StoreConfig::new()).await?;
        RedisStore::connect(server.config(PersistenceCheck::Ignore), StoreConfig::new()).await?;
        // The shared test server runs AOF with appendfsync everysec (scripts/services.sh).
        if let Some(config) = common::config() {
            RedisStore::connect(
                config.persistence(PersistenceCheck::Require),
                StoreConfig::new(),
            )
            .await?;
        }
        Ok(())
    }
}
