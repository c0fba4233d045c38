//! Authenticated history on a real server: the stored keys tampered with (a checkpoint
//! re-pointed at an older sealed version, the newest checkpoint's keys deleted) are refused
//! with `Error::Decrypt`, where sealing alone reads an older state back silently; an intact
//! history reads back with its bookkeeping hidden, on every write path (put by pipeline and
//! by script, save_batch, save_fenced), and `delete_for_runs` takes child records along.

mod common;

use std::time::Duration;

use serde_json::json;
use waypoint_checkpoint::serde::{CHILD_CHANNEL, RECORD_KEY, record};
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, ListOptions, Result, Save, Serde,
};
use waypoint_checkpoint_redis::RedisConnection;
use waypoint_checkpoint_redis::RedisSaver;

/// How the two checkpoints of [`two_steps`] are stored.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// `put` without a ttl: the MULTI/EXEC pipeline.
    Pipeline,
    /// `put` with a ttl: the save script.
    Script,
    /// `save_batch`.
    Batch,
    /// `save_fenced` under a lease.
    Fenced,
}

const PATHS: [Path; 4] = [Path::Pipeline, Path::Script, Path::Batch, Path::Fenced];

/// A saver with `serde` on a fresh prefix; with a ttl for [`Path::Script`].
async fn saver(serde: Serde, path: Path) -> Result<Option<RedisSaver>> {
    let Some(config) = common::config() else {
        return Ok(None);
    };
    let config = match path {
        Path::Script => config.ttl(Duration::from_secs(600)),
        _ => config,
    };
    Ok(Some(RedisSaver::connect(config.serde(serde)).await?))
}

/// Two checkpoints of a fresh thread: `secret` is "old" at the first and "new" at the
/// second, run ids `run-0` and `run-1`. Returns both configs.
async fn two_steps(
    saver: &RedisSaver,
    path: Path,
) -> Result<(String, CheckpointConfig, CheckpointConfig)> {
    let thread = uuid::Uuid::new_v4().to_string();
    let serde = saver.serde().clone();
    let mut parent = CheckpointConfig::new(&thread).with_ns("");
    let mut stored = Vec::new();
    for (step, value) in ["old", "new"].into_iter().enumerate() {
        let mut cp = Checkpoint::new(step as i64);
        cp.channel_values
            .insert("secret".into(), serde.dumps(&json!(value))?);
        let versions: std::collections::BTreeMap<String, ChannelVersion> =
            [("secret".to_owned(), ChannelVersion::from(step as u64 + 1))].into();
        cp.channel_versions = versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64)
            .with_run_id(format!("run-{step}"));
        let id = cp.id.clone();
        let save = Save::Put {
            config: parent.clone(),
            checkpoint: cp,
            metadata: meta,
            new_versions: versions,
        };
        parent = match path {
            Path::Pipeline | Path::Script => {
                let Save::Put {
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                } = save
                else {
                    unreachable!("a put")
                };
                saver
                    .put(&config, checkpoint, metadata, new_versions)
                    .await?
            }
            Path::Batch => {
                saver.save_batch(vec![save]).await?;
                CheckpointConfig::of(&thread, "", &id)
            }
            Path::Fenced => {
                let lease = saver
                    .acquire_lease(&thread, Duration::from_secs(30))
                    .await?;
                saver.save_fenced(&lease, vec![save]).await?;
                saver.release_lease(&lease).await?;
                CheckpointConfig::of(&thread, "", &id)
            }
        };
        stored.push(parent.clone());
    }
    Ok((thread, stored[0].clone(), stored[1].clone()))
}

/// The latest checkpoint's `secret`.
async fn latest_secret(saver: &RedisSaver, thread: &str) -> Result<serde_json::Value> {
    let tuple = saver
        .get_tuple(&CheckpointConfig::new(thread))
        .await?
        .expect("stored");
    saver
        .serde()
        .loads(&tuple.checkpoint.channel_values["secret"])
}

fn authenticated() -> Result<Serde> {
    Ok(common::keyed()?.authenticate_history(true))
}

fn id(c: &CheckpointConfig) -> &str {
    c.checkpoint_id
        .as_deref()
        .expect("stored configs carry an id")
}

/// The key base of a thread (its ids carry no `%`, `{` or `}`).
fn base(saver: &RedisSaver, thread: &str) -> String {
    format!("{}:{{{thread}}}:", saver.config().prefix)
}

/// Points `second`'s stored `secret` version (and the blob-field list that goes with it)
/// at `first`'s, as an attacker with write access to the server would.
async fn re_point(
    saver: &RedisSaver,
    conn: &mut RedisConnection,
    thread: &str,
    first: &CheckpointConfig,
    second: &CheckpointConfig,
) {
    let cp_key = |c: &CheckpointConfig| format!("{}checkpoint:0::{}", base(saver, thread), id(c));
    let (old, b): (Vec<u8>, String) = redis::cmd("HMGET")
        .arg(cp_key(first))
        .arg("c")
        .arg("b")
        .query_async(conn)
        .await
        .expect("hmget");
    let old = record::decode_checkpoint(&old).expect("checkpoint record");
    let new: Vec<u8> = redis::cmd("HGET")
        .arg(cp_key(second))
        .arg("c")
        .query_async(conn)
        .await
        .expect("hget");
    let mut new = record::decode_checkpoint(&new).expect("checkpoint record");
    new.channel_versions
        .insert("secret".into(), old.channel_versions["secret"].clone());
    redis::cmd("HSET")
        .arg(cp_key(second))
        .arg("c")
        .arg(record::encode_checkpoint(&new))
        .arg("b")
        .arg(b)
        .query_async::<()>(conn)
        .await
        .expect("hset");
}

/// Deletes the newest checkpoint's keys and its thread's index entries, as an attacker would
/// (its entry in the global index is dropped by the next `list` that meets it).
async fn delete_checkpoint(
    saver: &RedisSaver,
    conn: &mut RedisConnection,
    thread: &str,
    checkpoint: &CheckpointConfig,
) {
    let (base, id) = (base(saver, thread), id(checkpoint));
    let mut thread_member = id.as_bytes().to_vec();
    thread_member.push(0);
    redis::pipe()
        .del(format!("{base}checkpoint:0::{id}"))
        .del(format!("{base}writes:0::{id}"))
        .zrem(format!("{base}ns:0:"), id)
        .zrem(format!("{base}index"), thread_member)
        .query_async::<()>(conn)
        .await
        .expect("delete");
}

/// A checkpoint re-pointed at an older sealed version: sealing alone reads the old value
/// back without complaint; an authenticated history refuses it.
#[tokio::test]
async fn re_pointed_version_is_refused_by_an_authenticated_history() -> Result<()> {
    let Some(keyed) = saver(common::keyed()?, Path::Pipeline).await? else {
        return Ok(());
    };
    let mut conn = keyed.connection();
    let (thread, first, second) = two_steps(&keyed, Path::Pipeline).await?;
    assert_eq!(latest_secret(&keyed, &thread).await?, json!("new"));
    re_point(&keyed, &mut conn, &thread, &first, &second).await;
    assert_eq!(latest_secret(&keyed, &thread).await?, json!("old"));

    for path in PATHS {
        let Some(saver) = saver(authenticated()?, path).await? else {
            return Ok(());
        };
        let (thread, first, second) = two_steps(&saver, path).await?;
        assert_eq!(latest_secret(&saver, &thread).await?, json!("new"));
        re_point(&saver, &mut conn, &thread, &first, &second).await;
        let r = latest_secret(&saver, &thread).await;
        assert!(matches!(r, Err(Error::Decrypt(_))), "{path:?}: {r:?}");
        // Read by id and listed: refused too.
        let r = saver.get_tuple(&second).await;
        assert!(matches!(r, Err(Error::Decrypt(_))), "{path:?}: {r:?}");
        let r = saver
            .list(
                Some(&CheckpointConfig::new(&thread)),
                &ListOptions::default(),
            )
            .await;
        assert!(matches!(r, Err(Error::Decrypt(_))), "{path:?}: {r:?}");
    }
    Ok(())
}

/// The newest checkpoint's keys deleted: the thread silently rolls back under sealing
/// alone; an authenticated history finds the sealed child record its parent keeps, and
/// refuses, naming the missing checkpoint. Every write path stores that record.
#[tokio::test]
async fn deleted_newest_checkpoint_is_refused_by_an_authenticated_history() -> Result<()> {
    let Some(keyed) = saver(common::keyed()?, Path::Pipeline).await? else {
        return Ok(());
    };
    let mut conn = keyed.connection();
    let (thread, _, second) = two_steps(&keyed, Path::Pipeline).await?;
    delete_checkpoint(&keyed, &mut conn, &thread, &second).await;
    assert_eq!(latest_secret(&keyed, &thread).await?, json!("old"));

    for path in PATHS {
        let Some(saver) = saver(authenticated()?, path).await? else {
            return Ok(());
        };
        let (thread, first, second) = two_steps(&saver, path).await?;
        delete_checkpoint(&saver, &mut conn, &thread, &second).await;
        let r = latest_secret(&saver, &thread).await;
        let Err(Error::Decrypt(message)) = r else {
            panic!("{path:?}: deleted newest: {r:?}");
        };
        assert!(message.contains(id(&second)), "{path:?}: {message}");
        // The parent is now the newest, whether read by id or listed.
        let r = saver.get_tuple(&first).await;
        assert!(matches!(r, Err(Error::Decrypt(_))), "{path:?}: {r:?}");
        let r = saver
            .list(
                Some(&CheckpointConfig::new(&thread)),
                &ListOptions::default(),
            )
            .await;
        assert!(matches!(r, Err(Error::Decrypt(_))), "{path:?}: {r:?}");
    }

    // A record seal stripped from the metadata is refused too.
    let Some(saver) = saver(authenticated()?, Path::Pipeline).await? else {
        return Ok(());
    };
    let (thread, _, second) = two_steps(&saver, Path::Pipeline).await?;
    let cp_key = format!("{}checkpoint:0::{}", base(&saver, &thread), id(&second));
    let meta: Vec<u8> = redis::cmd("HGET")
        .arg(&cp_key)
        .arg("m")
        .query_async(&mut conn)
        .await
        .expect("hget");
    let mut meta = record::decode_metadata(&meta).expect("metadata record");
    assert!(
        meta.extra[RECORD_KEY].is_string(),
        "stored with its seal: {meta:?}"
    );
    meta.extra.remove(RECORD_KEY);
    redis::cmd("HSET")
        .arg(&cp_key)
        .arg("m")
        .arg(record::encode_metadata(&meta))
        .query_async::<()>(&mut conn)
        .await
        .expect("hset");
    let r = latest_secret(&saver, &thread).await;
    assert!(matches!(r, Err(Error::Decrypt(_))), "no seal: {r:?}");
    Ok(())
}

/// An intact authenticated history reads back like any other, bookkeeping hidden: no
/// record seal in the metadata, no child record among the pending writes; under a ttl the
/// child record expires with the thread.
#[tokio::test]
async fn authenticated_history_hides_its_bookkeeping() -> Result<()> {
    for path in PATHS {
        let Some(saver) = saver(authenticated()?, path).await? else {
            return Ok(());
        };
        let mut conn = saver.connection();
        let (thread, first, _) = two_steps(&saver, path).await?;
        assert_eq!(latest_secret(&saver, &thread).await?, json!("new"));
        let parent = saver.get_tuple(&first).await?.expect("stored");
        assert!(
            parent.pending_writes.is_empty(),
            "{path:?}: {:?}",
            parent.pending_writes
        );
        assert!(!parent.metadata.extra.contains_key(RECORD_KEY), "{path:?}");
        let listed = saver
            .list(
                Some(&CheckpointConfig::new(&thread)),
                &ListOptions::default(),
            )
            .await?;
        assert_eq!(listed.len(), 2, "{path:?}");
        for tuple in &listed {
            assert!(tuple.pending_writes.is_empty(), "{path:?}: {tuple:?}");
            assert!(!tuple.metadata.extra.contains_key(RECORD_KEY), "{path:?}");
        }
        // The record is stored, on the parent's writes, in its own channel.
        let writes = format!("{}writes:0::{}", base(&saver, &thread), id(&first));
        let stored: Vec<Vec<u8>> = redis::cmd("HVALS")
            .arg(&writes)
            .query_async(&mut conn)
            .await
            .expect("hvals");
        let channel = format!("{}:{CHILD_CHANNEL}", CHILD_CHANNEL.len());
        assert_eq!(stored.len(), 1, "{path:?}");
        assert!(stored[0].starts_with(channel.as_bytes()), "{path:?}");
        let ttl = common::pttl(&mut conn, &writes).await;
        match path {
            Path::Script => assert!(ttl > 0, "{path:?}: the child record has no ttl"),
            _ => assert_eq!(ttl, -1, "{path:?}"),
        }
    }
    Ok(())
}

/// `delete_for_runs` deletes the child records its checkpoints left on their parents: the
/// thread's latest is then the parent, read back without error.
#[tokio::test]
async fn delete_for_runs_takes_child_records_along() -> Result<()> {
    for path in [Path::Pipeline, Path::Script] {
        let Some(saver) = saver(authenticated()?, path).await? else {
            return Ok(());
        };
        let mut conn = saver.connection();
        let (thread, first, _) = two_steps(&saver, path).await?;
        saver.delete_for_runs(&["run-1".to_owned()]).await?;
        assert_eq!(latest_secret(&saver, &thread).await?, json!("old"));
        let latest = saver
            .get_tuple(&CheckpointConfig::new(&thread))
            .await?
            .expect("stored");
        assert_eq!(latest.config, first, "{path:?}");
        let writes = format!("{}writes:0::{}", base(&saver, &thread), id(&first));
        let exists: i64 = redis::cmd("EXISTS")
            .arg(&writes)
            .query_async(&mut conn)
            .await
            .expect("exists");
        assert_eq!(exists, 0, "{path:?}: the emptied writes hash is gone");
        let registered: bool = redis::cmd("SISMEMBER")
            .arg(format!("{}registry", base(&saver, &thread)))
            .arg(&writes)
            .query_async(&mut conn)
            .await
            .expect("sismember");
        assert!(!registered, "{path:?}: the registry forgot it");
    }
    Ok(())
}
