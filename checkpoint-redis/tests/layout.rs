//! The key layout on a real server: one hash tag per thread, nothing left behind by
//! `delete_thread` and `prune` (checked by SCAN over the whole keyspace), thread ttl on every
//! key renewed by reads, pins, and prefixes that keep tenants apart.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, ListOptions, PruneStrategy, Result, SerializedValue,
};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};

fn value(v: serde_json::Value) -> SerializedValue {
    SerializedValue::new("json", serde_json::to_vec(&v).expect("json"))
}

/// Puts `n` chained checkpoints on `(thread, ns)`, one of two channels changing per step,
/// with a pending write on each.
async fn history(
    saver: &RedisSaver,
    thread: &str,
    ns: &str,
    n: u64,
) -> Result<Vec<CheckpointConfig>> {
    let mut parent = CheckpointConfig::new(thread).with_ns(ns);
    let mut versions: BTreeMap<String, ChannelVersion> = BTreeMap::new();
    let mut out = Vec::new();
    for step in 0..n {
        let mut cp = Checkpoint::new(step as i64);
        let mut new = BTreeMap::new();
        for (i, channel) in ["a", "b"].into_iter().enumerate() {
            if step == 0 || step % 2 == i as u64 {
                let v = ChannelVersion::from(step + 1);
                versions.insert(channel.into(), v.clone());
                new.insert(channel.to_owned(), v);
                cp.channel_values
                    .insert(channel.into(), value(json!({"step": step})));
            }
        }
        cp.channel_versions = versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64);
        parent = saver.put(&parent, cp, meta, new).await?;
        saver
            .put_writes(&parent, vec![("a".into(), value(json!(step)))], "task", "")
            .await?;
        out.push(parent.clone());
    }
    Ok(out)
}

/// The keys of `thread` (by its hash tag) under the saver's prefix.
async fn thread_keys(saver: &RedisSaver, tag: &str) -> Vec<String> {
    let mut conn = saver.connection();
    let prefix = &saver.config().prefix;
    common::scan(&mut conn, &format!("{prefix}:*"))
        .await
        .into_iter()
        .filter(|k| k.contains(&format!("{{{tag}}}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_a_thread_carries_its_hash_tag() -> Result<()> {
    let Some(saver) = common::saver(Default::default()).await? else {
        return Ok(());
    };
    // Braces in the id would end the tag early were they not escaped.
    let thread = "a}b{c%d";
    history(&saver, thread, "", 3).await?;
    history(&saver, thread, "child:1", 2).await?;
    saver.pin_thread(thread).await?;
    let mut conn = saver.connection();
    let prefix = saver.config().prefix.clone();
    let keys = common::scan(&mut conn, &format!("{prefix}:*")).await;
    // registry, meta, index, 2 x (ns, blobs), 5 checkpoints, 5 writes; plus the thread's
    // shard of the global index.
    assert_eq!(keys.len(), 3 + 4 + 10 + 1, "{keys:#?}");
    for key in &keys {
        if key.starts_with(&format!("{prefix}:index:{{")) {
            continue;
        }
        let open = key.find('{').expect("a hash tag");
        let close = open + key[open..].find('}').expect("a closed hash tag");
        assert_eq!(&key[open + 1..close], "a%7Db%7Bc%25d", "{key}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_thread_leaves_no_key_behind() -> Result<()> {
    let Some(saver) = common::saver(Default::default()).await? else {
        return Ok(());
    };
    let (doomed, kept) = ("doomed", "kept");
    let configs = history(&saver, doomed, "", 4).await?;
    history(&saver, doomed, "child:1|grand:2", 2).await?;
    // Writes for a checkpoint that was never stored belong to the thread too.
    let early = CheckpointConfig::new(doomed)
        .with_ns("")
        .with_id("zzz-not-stored");
    saver
        .put_writes(&early, vec![("a".into(), value(json!("early")))], "t", "")
        .await?;
    saver.pin_thread(doomed).await?;
    history(&saver, kept, "", 2).await?;
    let kept_before = thread_keys(&saver, kept).await;
    assert!(!thread_keys(&saver, doomed).await.is_empty());

    saver.delete_thread(doomed).await?;
    assert_eq!(thread_keys(&saver, doomed).await, Vec::<String>::new());
    assert_eq!(thread_keys(&saver, kept).await, kept_before);
    let mut conn = saver.connection();
    let members = common::global_entries(&mut conn, &saver.config().prefix).await;
    assert_eq!(
        members, 2,
        "only the kept thread's checkpoints stay indexed"
    );
    assert!(saver.get_tuple(&configs[3]).await?.is_none());
    let listed = saver.list(None, &ListOptions::default()).await?;
    assert!(listed.iter().all(|t| t.config.thread_id == kept));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_leaves_no_key_behind() -> Result<()> {
    let Some(saver) = common::saver(Default::default()).await? else {
        return Ok(());
    };
    let thread = "pruned";
    let root = history(&saver, thread, "", 6).await?;
    let child = history(&saver, thread, "child:1", 3).await?;
    let before = saver.get_tuple(&root[5]).await?.expect("latest");

    saver
        .prune(&[thread.to_owned()], PruneStrategy::KeepLatest)
        .await?;
    let keys = thread_keys(&saver, thread).await;
    let base = format!("{}:{{{thread}}}:", saver.config().prefix);
    let id = |c: &CheckpointConfig| c.checkpoint_id.clone().expect("id");
    let mut expected = vec![
        format!("{base}registry"),
        format!("{base}meta"),
        format!("{base}index"),
        format!("{base}ns:0:"),
        format!("{base}ns:7:child:1"),
        format!("{base}blobs:0:"),
        format!("{base}blobs:7:child:1"),
        format!("{base}checkpoint:0::{}", id(&root[5])),
        format!("{base}checkpoint:7:child:1:{}", id(&child[2])),
        format!("{base}writes:0::{}", id(&root[5])),
        format!("{base}writes:7:child:1:{}", id(&child[2])),
    ];
    expected.sort();
    assert_eq!(keys, expected);
    // Only the values the kept checkpoints name remain.
    let mut conn = saver.connection();
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(format!("{base}blobs:0:"))
        .query_async(&mut conn)
        .await
        .expect("hkeys");
    assert_eq!(fields.len(), 2, "{fields:?}");
    assert_eq!(saver.get_tuple(&root[5]).await?.expect("kept"), before);
    // The registry names exactly the keys that exist.
    let mut registered: Vec<String> = redis::cmd("SMEMBERS")
        .arg(format!("{base}registry"))
        .query_async(&mut conn)
        .await
        .expect("smembers");
    registered.sort();
    let mut data: Vec<String> = keys
        .iter()
        .filter(|k| !k.ends_with(":registry") && !k.ends_with(":meta"))
        .cloned()
        .collect();
    data.sort();
    assert_eq!(registered, data);

    saver
        .prune(&[thread.to_owned()], PruneStrategy::Delete)
        .await?;
    assert_eq!(thread_keys(&saver, thread).await, Vec::<String>::new());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_for_runs_drops_emptied_keys() -> Result<()> {
    let Some(saver) = common::saver(Default::default()).await? else {
        return Ok(());
    };
    let parent = CheckpointConfig::new("runs").with_ns("");
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("a".into(), value(json!(1)));
    cp.channel_versions
        .insert("a".into(), ChannelVersion::from(1u64));
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0).with_run_id("run-1");
    let stored = saver
        .put(
            &parent,
            cp,
            meta,
            [("a".to_owned(), ChannelVersion::from(1u64))].into(),
        )
        .await?;
    saver
        .put_writes(&stored, vec![("a".into(), value(json!(2)))], "task", "")
        .await?;
    saver.delete_for_runs(&["run-1".to_owned()]).await?;
    assert_eq!(thread_keys(&saver, "runs").await, Vec::<String>::new());
    Ok(())
}

async fn ttl_saver(ttl: Duration) -> Result<Option<RedisSaver>> {
    match common::config() {
        Some(config) => RedisSaver::connect(config.ttl(ttl)).await.map(Some),
        None => Ok(None),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_covers_every_key_and_reads_renew_it() -> Result<()> {
    // Long enough that a loaded machine cannot let keys lapse between the steps; the sleeps
    // only need to pass a tenth of it, when reads renew every key.
    let ttl = Duration::from_secs(10);
    let Some(saver) = ttl_saver(ttl).await? else {
        return Ok(());
    };
    let configs = history(&saver, "ttl", "", 4).await?;
    history(&saver, "ttl", "sub", 2).await?;
    let mut conn = saver.connection();
    let keys = thread_keys(&saver, "ttl").await;
    assert_eq!(keys.len(), 3 + 4 + 12, "{keys:#?}");
    for key in &keys {
        let left = common::pttl(&mut conn, key).await;
        assert!(left > 0 && left <= 10_000, "{key}: {left}");
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // A read more than a tenth of the ttl after the last full renewal renews every key.
    saver.get_tuple(&configs[0]).await?.expect("stored");
    for key in &keys {
        let left = common::pttl(&mut conn, key).await;
        assert!(left > 9_000, "{key} was not renewed: {left}");
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // So does a list.
    let listed = saver
        .list(Some(&CheckpointConfig::new("ttl")), &ListOptions::default())
        .await?;
    assert_eq!(listed.len(), 6);
    for key in &keys {
        let left = common::pttl(&mut conn, key).await;
        assert!(left > 9_000, "{key} was not renewed by list: {left}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_left_alone_expire_whole() -> Result<()> {
    let ttl = Duration::from_millis(400);
    let Some(saver) = ttl_saver(ttl).await? else {
        return Ok(());
    };
    let configs = history(&saver, "brief", "", 3).await?;
    history(&saver, "brief", "sub", 1).await?;
    common::past(ttl).await;
    assert_eq!(thread_keys(&saver, "brief").await, Vec::<String>::new());
    assert!(saver.get_tuple(&configs[2]).await?.is_none());
    // The global index still names them until a list meets them and drops them.
    assert!(saver.list(None, &ListOptions::default()).await?.is_empty());
    let mut conn = saver.connection();
    let left = common::scan(&mut conn, &format!("{}:*", saver.config().prefix)).await;
    assert_eq!(left, Vec::<String>::new());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_threads_never_expire() -> Result<()> {
    let ttl = Duration::from_millis(400);
    let Some(saver) = ttl_saver(ttl).await? else {
        return Ok(());
    };
    // Pinned before it has data, then written: nothing gets a ttl.
    saver.pin_thread("pinned").await?;
    let configs = history(&saver, "pinned", "", 3).await?;
    history(&saver, "loose", "", 1).await?;
    common::past(ttl).await;
    assert!(thread_keys(&saver, "loose").await.is_empty());
    let mut conn = saver.connection();
    let keys = thread_keys(&saver, "pinned").await;
    assert_eq!(keys.len(), 3 + 2 + 6, "{keys:#?}");
    for key in &keys {
        assert_eq!(common::pttl(&mut conn, key).await, -1, "{key}");
    }
    assert!(saver.get_tuple(&configs[2]).await?.is_some());
    // Pinning a thread that has keys removes their ttl; unpinning restores it.
    history(&saver, "later", "", 2).await?;
    saver.pin_thread("later").await?;
    for key in thread_keys(&saver, "later").await {
        assert_eq!(common::pttl(&mut conn, &key).await, -1, "{key}");
    }
    saver.unpin_thread("pinned").await?;
    for key in &keys {
        let left = common::pttl(&mut conn, key).await;
        assert!(left > 0 && left <= 400, "{key}: {left}");
    }
    common::past(ttl).await;
    assert!(thread_keys(&saver, "pinned").await.is_empty());
    assert!(!thread_keys(&saver, "later").await.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixes_keep_tenants_apart() -> Result<()> {
    let (Some(a), Some(b)) = (
        common::saver(Default::default()).await?,
        common::saver(Default::default()).await?,
    ) else {
        return Ok(());
    };
    let configs = history(&a, "shared-id", "", 2).await?;
    assert!(b.get_tuple(&configs[1]).await?.is_none());
    assert!(b.list(None, &ListOptions::default()).await?.is_empty());
    b.delete_thread("shared-id").await?;
    assert!(a.get_tuple(&configs[1]).await?.is_some());
    Ok(())
}

#[tokio::test]
async fn bad_settings_are_invalid_config() {
    for config in [
        RedisConfig::new("redis://127.0.0.1:1/").prefix(""),
        RedisConfig::new("redis://127.0.0.1:1/").prefix("a{b"),
        RedisConfig::new("redis://127.0.0.1:1/").ttl(Duration::ZERO),
        RedisConfig::new("not a url"),
    ] {
        let err = RedisSaver::connect(config.clone())
            .await
            .expect_err("bad settings");
        assert!(
            matches!(err, Error::InvalidConfig(_)),
            "{config:?}: {err:?}"
        );
    }
}

/// A global index written before it had shards (one sorted set, `P:index`) is moved into the
/// shards by `setup()`, which connecting runs: `list` across threads finds every checkpoint
/// of the old layout again, and the old key is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_moves_the_old_global_index_into_its_shards() -> Result<()> {
    let Some(config) = common::config() else {
        return Ok(());
    };
    let saver = RedisSaver::connect(config.clone()).await?;
    for thread in ["t1", "t2", "t3"] {
        history(&saver, thread, "", 2).await?;
    }
    let prefix = config.prefix.clone();
    let mut conn = saver.connection();
    // Back to the old layout: every entry in `P:index`, none in a shard.
    let old = format!("{prefix}:index");
    for shard in common::scan(&mut conn, &format!("{prefix}:index:{{*")).await {
        let members: Vec<Vec<u8>> = redis::cmd("ZRANGE")
            .arg(&shard)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .expect("zrange");
        for m in members {
            redis::cmd("ZADD")
                .arg(&old)
                .arg(0)
                .arg(m)
                .query_async::<()>(&mut conn)
                .await
                .expect("zadd");
        }
        redis::cmd("DEL")
            .arg(&shard)
            .query_async::<()>(&mut conn)
            .await
            .expect("del");
    }
    assert!(saver.list(None, &ListOptions::default()).await?.is_empty());

    let reopened = RedisSaver::connect(config).await?;
    let listed = reopened.list(None, &ListOptions::default()).await?;
    assert_eq!(listed.len(), 6);
    let ids: Vec<&str> = listed.iter().map(|t| t.checkpoint.id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(ids, sorted, "newest first across threads");
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&old)
        .query_async(&mut conn)
        .await
        .expect("exists");
    assert_eq!(exists, 0);
    assert_eq!(common::global_entries(&mut conn, &prefix).await, 6);
    // Idempotent.
    reopened.setup().await?;
    assert_eq!(reopened.list(None, &ListOptions::default()).await?.len(), 6);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_records_and_the_json_of_earlier_versions_both_read() -> Result<()> {
    let Some(saver) = common::saver(Default::default()).await? else {
        return Ok(());
    };
    let thread = "legacy-record";
    let configs = history(&saver, thread, "", 2).await?;
    let mut conn = saver.connection();
    let key = thread_keys(&saver, thread)
        .await
        .into_iter()
        .find(|k| {
            k.contains("checkpoint:")
                && k.ends_with(configs[1].checkpoint_id.as_deref().unwrap_or("-"))
        })
        .expect("the checkpoint's hash");
    let stored: Vec<u8> = redis::cmd("HGET")
        .arg(&key)
        .arg("c")
        .query_async(&mut conn)
        .await
        .expect("hget");
    assert_eq!(stored[0], waypoint_checkpoint::serde::record::RECORD_TAG);
    let before = saver.get_tuple(&configs[1]).await?.expect("stored");
    // Rewrite the record as the JSON text earlier versions stored.
    let mut head = before.checkpoint.clone();
    head.channel_values.clear();
    let json = serde_json::to_vec(&head).expect("json");
    let meta = serde_json::to_vec(&before.metadata.to_json()).expect("json");
    redis::cmd("HSET")
        .arg(&key)
        .arg("c")
        .arg(json)
        .arg("m")
        .arg(meta)
        .query_async::<()>(&mut conn)
        .await
        .expect("hset");
    let after = saver.get_tuple(&configs[1]).await?.expect("stored");
    assert_eq!(after, before);
    assert_eq!(
        saver
            .list(
                Some(&CheckpointConfig::new(thread)),
                &ListOptions::default()
            )
            .await?
            .len(),
        2
    );
    // A corrupt record is a clear error.
    redis::cmd("HSET")
        .arg(&key)
        .arg("c")
        .arg(&[waypoint_checkpoint::serde::record::RECORD_TAG, 1, 0xff][..])
        .query_async::<()>(&mut conn)
        .await
        .expect("hset");
    let err = saver.get_tuple(&configs[1]).await.unwrap_err();
    assert!(
        err.to_string().contains("corrupt checkpoint record"),
        "{err}"
    );
    Ok(())
}
