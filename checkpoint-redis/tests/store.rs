//! `RedisStore` on a live server (`WAYPOINT_TEST_REDIS_URL`): the store conformance suite with
//! every store under its own key prefix, then what is particular to Redis (the key layout,
//! reopening, atomic batches, hostile names, bad settings, the setup rule) and a store sharing
//! a saver's connection. The server restart in the middle of a write loop is in
//! `reliability.rs`, with the saver's fault tests.
//!
//! Without the server the tests pass without running, unless `WAYPOINT_REQUIRE_BACKENDS=1`.

#![cfg(feature = "store")]

mod common;

use std::time::Duration;

use serde_json::json;
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver, RedisStore};
use waypoint_store::{
    Error, Index, IndexConfig, ListNamespacesOp, Namespace, Op, PutOp, Result, SearchOp, Store,
    StoreConfig, StoreExt, Ttl,
};

/// A store under a fresh prefix of the test server; `None` without a server.
async fn open(store: StoreConfig) -> Result<Option<RedisStore>> {
    let Some(config) = common::config() else {
        return Ok(None);
    };
    Ok(Some(RedisStore::connect(config, store).await?))
}

mod conformance {
    use super::*;

    waypoint_store::store_conformance!(
        |config: StoreConfig| open(config),
        second = |first: &RedisStore, config: StoreConfig| {
            RedisStore::connect(first.config().clone(), config)
        }
    );
}

fn indexed() -> StoreConfig {
    StoreConfig::new().index(IndexConfig::hashing(32))
}

/// A plain connection to the test server, to look at and tamper with the keys.
async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// Every key of a store: its buckets' (`{tag}/P:...`) and its layout marker (`{P}:meta`).
async fn keys_of(url: &str, prefix: &str) -> Vec<String> {
    let mut conn = raw(url).await;
    let mut keys = common::scan(&mut conn, &format!("{{*}}/{prefix}:*")).await;
    keys.extend(common::scan(&mut conn, &format!("{{{prefix}}}:*")).await);
    keys
}

/// The one key of a store whose name ends with `/P:<suffix>` (in the bucket it belongs to).
async fn bucket_key(url: &str, prefix: &str, suffix: &str) -> String {
    let keys = common::scan(&mut raw(url).await, &format!("{{*}}/{prefix}:{suffix}")).await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys.into_iter().next().unwrap_or_default()
}

async fn query_keys(store: &RedisStore, ns: &Namespace, q: &str) -> Result<Vec<String>> {
    Ok(store
        .search(SearchOp::new(ns).query(q).limit(10))
        .await?
        .into_iter()
        .map(|i| i.item.key)
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_rebuilds_the_index_from_stored_vectors() -> Result<()> {
    let Some(url) = waypoint_test_kit::redis_url() else {
        return Ok(());
    };
    let prefix = common::fresh_prefix();
    let settings = || RedisConfig::new(&url).prefix(&prefix);
    let ns = Namespace::from(["memories"]);
    let first = RedisStore::connect(settings(), indexed()).await?;
    for (key, text) in [
        ("cat", "my cat is called Miso"),
        ("food", "spicy ramen on fridays"),
        ("trip", "hiking in the alps last summer"),
    ] {
        first.put(&ns, key, json!({ "text": text })).await?;
    }
    first
        .put_with(
            &ns,
            "hidden",
            json!({"text": "my cat"}),
            Index::Off,
            Ttl::Default,
        )
        .await?;
    let before = first
        .search(SearchOp::new(&ns).query("cat named Miso").limit(10))
        .await?;
    drop(first);

    let again = RedisStore::connect(settings(), indexed()).await?;
    let after = again
        .search(SearchOp::new(&ns).query("cat named Miso").limit(10))
        .await?;
    assert_eq!(after.len(), 3, "the unindexed item stays out");
    assert_eq!(after, before, "same items, same scores");
    assert_eq!(after[0].key, "cat");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_and_sweeps_leave_no_key_behind() -> Result<()> {
    let Some(url) = waypoint_test_kit::redis_url() else {
        return Ok(());
    };
    let prefix = common::fresh_prefix();
    let store = RedisStore::connect(RedisConfig::new(&url).prefix(&prefix), indexed()).await?;
    for i in 0..20 {
        let ns = Namespace::new(["a".to_owned(), format!("n{}", i % 3)]);
        let ttl = if i % 2 == 0 {
            Ttl::Minutes(0.2 / 60.0)
        } else {
            Ttl::Never
        };
        store
            .put_with(
                &ns,
                &format!("k{i}"),
                json!({"text": format!("item {i}")}),
                Index::Default,
                ttl,
            )
            .await?;
    }
    assert!(keys_of(&url, &prefix).await.len() > 20);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(store.sweep_expired().await?, 10);
    for i in (1..20).step_by(2) {
        let ns = Namespace::new(["a".to_owned(), format!("n{}", i % 3)]);
        store.delete(&ns, &format!("k{i}")).await?;
    }
    let left = keys_of(&url, &prefix).await;
    assert!(
        left.iter()
            .all(|k| k.ends_with(&format!("/{prefix}:changes"))
                || *k == format!("{{{prefix}}}:meta")),
        "only the buckets' change feeds (capped) and the layout marker stay: {left:?}"
    );
    assert!(
        query_keys(&store, &Namespace::from(["a"]), "item 3")
            .await?
            .is_empty()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_cannot_apply_writes_nothing() -> Result<()> {
    let Some(url) = waypoint_test_kit::redis_url() else {
        return Ok(());
    };
    let prefix = common::fresh_prefix();
    let store = RedisStore::connect(RedisConfig::new(&url).prefix(&prefix), indexed()).await?;
    // Both namespaces start with the same two labels: one bucket, one script (a batch over
    // several buckets is atomic per bucket).
    let ns = Namespace::from(["atomic", "x"]);
    let other = Namespace::from(["atomic", "x", "other"]);
    store.put(&other, "gone", json!({"text": "soon"})).await?;
    let taken = bucket_key(&url, &prefix, "n:atomic.x.other").await;
    store.delete(&other, "gone").await?;
    store.put(&ns, "kept", json!({"text": "before"})).await?;
    // Something else took the key of the second item's namespace.
    let mut conn = raw(&url).await;
    redis::cmd("SET")
        .arg(&taken)
        .arg("not a sorted set")
        .query_async::<()>(&mut conn)
        .await
        .expect("set");
    let err = store
        .batch(vec![
            Op::Put(PutOp::new(
                &ns,
                "kept",
                json!({"text": "after"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            )),
            Op::Put(PutOp::new(
                &other,
                "new",
                json!({"text": "new"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            )),
        ])
        .await
        .expect_err("a key of the wrong type");
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    let kept = store.get(&ns, "kept").await?.expect("still there");
    assert_eq!(kept.value["text"], "before");
    assert!(store.get(&other, "new").await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_data() -> Result<()> {
    let Some(store) = open(indexed()).await? else {
        return Ok(());
    };
    let names = [
        "a\0b",
        "}{",
        "*",
        "[a-z]",
        "\\",
        "']] return redis_call('FLUSHALL') --[['",
        "%s%n",
        "é✓😀",
        "",
    ];
    let root = uuid::Uuid::new_v4().simple().to_string();
    for (i, label) in names.iter().enumerate() {
        if label.is_empty() {
            continue;
        }
        let ns = Namespace::new([root.as_str(), label]);
        for key in names {
            store
                .put(&ns, key, json!({"text": format!("{label} {key}"), "i": i}))
                .await?;
        }
    }
    for label in names.iter().filter(|l| !l.is_empty()) {
        let ns = Namespace::new([root.as_str(), label]);
        for key in names {
            let item = store.get(&ns, key).await?.expect("stored");
            assert_eq!(item.key, key);
            assert_eq!(item.namespace, ns);
        }
        let all = store.search(SearchOp::new(&ns).limit(100)).await?;
        assert_eq!(all.len(), names.len(), "{label:?}");
    }
    let listed = store
        .list_namespaces(ListNamespacesOp::new().prefix([root.as_str()]))
        .await?;
    assert_eq!(listed.len(), names.len() - 1);
    // `a` must not match the namespace `a\0b` or `[a-z]`.
    let ns = Namespace::new([root.as_str(), "a"]);
    store.put(&ns, "k", json!({"v": 1})).await?;
    assert_eq!(store.search(SearchOp::new(&ns).limit(100)).await?.len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_url_opens_redis_urls() -> Result<()> {
    let Some(url) = waypoint_test_kit::redis_url() else {
        return Ok(());
    };
    let store = RedisStore::from_url(&url, StoreConfig::new()).await?;
    assert_eq!(store.config().prefix, "waypoint");
    let ns = Namespace::new(["connect", &uuid::Uuid::new_v4().simple().to_string()]);
    store.put(&ns, "k", json!({"v": 1})).await?;
    assert!(store.get(&ns, "k").await?.is_some());
    store.delete(&ns, "k").await?;
    Ok(())
}

/// An entry of a change feed: its id and its fields.
type FeedEntry = (String, Vec<(String, Vec<u8>)>);

/// The `n` of every entry of a store's change feed (the store's one bucket with a feed),
/// oldest first.
async fn feed_entries(url: &str, prefix: &str) -> Vec<i64> {
    let entries: Vec<FeedEntry> = redis::cmd("XRANGE")
        .arg(bucket_key(url, prefix, "changes").await)
        .arg("-")
        .arg("+")
        .query_async(&mut raw(url).await)
        .await
        .expect("xrange");
    entries
        .iter()
        .map(|(id, _)| id.strip_prefix("0-").expect("0-n").parse().expect("n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_behind_a_trimmed_feed_reloads_its_index() -> Result<()> {
    let Some(url) = waypoint_test_kit::redis_url() else {
        return Ok(());
    };
    let prefix = common::fresh_prefix();
    let settings = || RedisConfig::new(&url).prefix(&prefix);
    let a = RedisStore::connect(settings(), indexed()).await?;
    let b = RedisStore::connect(settings(), indexed()).await?;
    let ns = Namespace::from(["docs"]);
    assert!(query_keys(&b, &ns, "ramen").await?.is_empty());
    a.put(&ns, "first", json!({"text": "spicy ramen"})).await?;
    a.put(&ns, "second", json!({"text": "ramen again"})).await?;
    // The feed drops the first entry before B reads it, as its cap would.
    let entries = feed_entries(&url, &prefix).await;
    assert_eq!(entries.len(), 2, "one entry per batch: {entries:?}");
    let trimmed: i64 = redis::cmd("XTRIM")
        .arg(bucket_key(&url, &prefix, "changes").await)
        .arg("MINID")
        .arg(format!("0-{}", entries[1]))
        .query_async(&mut raw(&url).await)
        .await
        .expect("xtrim");
    assert_eq!(trimmed, 1);
    // B cannot replay the lost entry: it reloads every vector and finds both items.
    let mut got = query_keys(&b, &ns, "ramen").await?;
    got.sort();
    assert_eq!(got, ["first", "second"]);
    // A sweep reaches the feed too: B's index drops what A's sweep removed.
    a.put_with(
        &ns,
        "brief",
        json!({"text": "ramen for a moment"}),
        Index::Default,
        Ttl::Minutes(0.2 / 60.0),
    )
    .await?;
    assert_eq!(query_keys(&b, &ns, "ramen").await?.len(), 3);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let before = feed_entries(&url, &prefix).await.len();
    assert_eq!(a.sweep_expired().await?, 1);
    assert_eq!(feed_entries(&url, &prefix).await.len(), before + 1);
    assert_eq!(query_keys(&b, &ns, "ramen").await?.len(), 2);
    Ok(())
}

/// The hashes of a store's keys of one kind (`i` items, `v` vectors), by item id.
async fn hashes_of(
    conn: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
    kind: &str,
) -> Vec<(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>)> {
    let mut out = Vec::new();
    for key in common::scan(conn, &format!("{{*}}/{prefix}:{kind}:*")).await {
        let id = key
            .split_once(&format!("/{prefix}:{kind}:"))
            .expect("a bucket key")
            .1
            .as_bytes()
            .to_vec();
        let hash: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
            .arg(&key)
            .query_async(conn)
            .await
            .expect("hgetall");
        out.push((id, hash));
    }
    out
}

/// Stores of layouts 1 and 2 (every key under `{P}:`, one slot, one node) are moved into
/// their buckets by `setup`, which opening runs: values, times, TTLs and vectors are kept,
/// the index finds the items, and no old key is left but the layout marker, now 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layouts_1_and_2_move_into_buckets() -> Result<()> {
    let Some(url) = waypoint_test_kit::redis_url() else {
        return Ok(());
    };
    let mut conn = raw(&url).await;
    // The items, written by this version under a scratch prefix, then written by hand as
    // layout 2 has them.
    let scratch = common::fresh_prefix();
    let written = RedisStore::connect(RedisConfig::new(&url).prefix(&scratch), indexed()).await?;
    written
        .put(["users", "alice"], "prefs", json!({"theme": "dark"}))
        .await?;
    written
        .put(["memories", "u1"], "m1", json!({"text": "spicy ramen"}))
        .await?;
    written
        .put_with(
            ["memories", "u2"],
            "m2",
            json!({"text": "green tea"}),
            Index::Default,
            Ttl::Minutes(60.0),
        )
        .await?;
    let items = hashes_of(&mut conn, &scratch, "i").await;
    let vectors = hashes_of(&mut conn, &scratch, "v").await;
    assert_eq!((items.len(), vectors.len()), (3, 3));
    for old in [1, 2] {
        let prefix = common::fresh_prefix();
        let key = |kind: &str, rest: &[u8]| {
            [format!("{{{prefix}}}:{kind}").into_bytes(), rest.to_vec()].concat()
        };
        let mut pipe = redis::pipe();
        for (id, hash) in &items {
            let field = |name: &[u8]| {
                hash.iter()
                    .find(|(f, _)| f == name)
                    .map(|(_, v)| v.clone())
                    .expect("a field")
            };
            let (ns, updated) = (field(b"ns"), field(b"updated"));
            let score = format!("-{}", String::from_utf8_lossy(&updated));
            pipe.hset_multiple(key("i:", id), hash)
                .zadd(key("order", b""), id, &score)
                .zadd(key("n:", &ns), id, &score)
                .zadd(key("namespaces", b""), &ns, 0);
            if let Some((_, at)) = hash.iter().find(|(f, _)| f == b"expires") {
                pipe.zadd(key("expiry", b""), id, at);
            }
        }
        for (id, hash) in &vectors {
            pipe.hset_multiple(key("v:", id), hash)
                .sadd(key("vectored", b""), id);
        }
        if old == 2 {
            pipe.cmd("XADD")
                .arg(key("changes", b""))
                .arg("0-1")
                .arg("i")
                .arg(&vectors[0].0);
        }
        pipe.hset(key("meta", b""), "layout", old);
        pipe.query_async::<()>(&mut conn).await.expect("layout 2");

        let store = RedisStore::connect(RedisConfig::new(&url).prefix(&prefix), indexed()).await?;
        let left = common::scan(&mut conn, &format!("{{{prefix}}}:*")).await;
        assert_eq!(left, [format!("{{{prefix}}}:meta")], "layout {old}");
        let layout: String = redis::cmd("HGET")
            .arg(format!("{{{prefix}}}:meta"))
            .arg("layout")
            .query_async(&mut conn)
            .await
            .expect("hget");
        assert_eq!(layout, "3");
        for (ns, k) in [
            (["users", "alice"], "prefs"),
            (["memories", "u1"], "m1"),
            (["memories", "u2"], "m2"),
        ] {
            let moved = store.get(ns, k).await?.expect("moved");
            let original = written.get(ns, k).await?.expect("written");
            assert_eq!(moved, original, "layout {old}");
        }
        assert_eq!(
            store.list_namespaces(ListNamespacesOp::new()).await?.len(),
            3
        );
        let mut found = query_keys(&store, &Namespace::from(["memories"]), "ramen").await?;
        assert_eq!(found.first().map(String::as_str), Some("m1"));
        found.sort();
        assert_eq!(found, ["m1", "m2"]);
        // The TTL came along: a sweep far in the future would take m2 only.
        assert_eq!(store.sweep_expired().await?, 0);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_layout_is_refused() -> Result<()> {
    let Some(url) = waypoint_test_kit::redis_url() else {
        return Ok(());
    };
    let prefix = common::fresh_prefix();
    let mut conn = raw(&url).await;
    redis::cmd("HSET")
        .arg(format!("{{{prefix}}}:meta"))
        .arg("layout")
        .arg(99)
        .query_async::<()>(&mut conn)
        .await
        .expect("hset");
    let err = RedisStore::connect(RedisConfig::new(&url).prefix(&prefix), StoreConfig::new())
        .await
        .expect_err("newer layout");
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("99")),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn bad_urls_and_prefixes_are_config_errors() {
    for bad in ["", "a{b", "}", &"x".repeat(300)] {
        let err = RedisStore::connect(
            RedisConfig::new("redis://127.0.0.1:1/").prefix(bad),
            StoreConfig::new(),
        )
        .await
        .expect_err("bad prefix");
        assert!(matches!(err, Error::InvalidConfig(_)), "{bad}: {err:?}");
    }
    // (`rediss://` is a Redis URL since TLS support.)
    for bad in ["mysql://nope", "redis", "redis://:x:y:z"] {
        let err = RedisStore::from_url(bad, StoreConfig::new())
            .await
            .expect_err("not a Redis URL");
        assert!(matches!(err, Error::InvalidConfig(_)), "{bad}: {err:?}");
    }
}

/// The result of a test of both the saver (`waypoint_checkpoint::Error`) and the store.
type Mixed = std::result::Result<(), Box<dyn std::error::Error>>;

/// The last command the connection named `name` ran, from `CLIENT LIST`.
async fn last_command_of(url: &str, name: &str) -> Option<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut raw(url).await)
        .await
        .expect("client list");
    list.lines()
        .find(|line| line.split(' ').any(|f| f == format!("name={name}")))
        .and_then(|line| line.split(' ').find_map(|f| f.strip_prefix("cmd=")))
        .map(str::to_owned)
}

/// `saver.store(...)` runs its commands on the saver's connection, and the two keep their
/// keys apart under one prefix, even for a thread named like the store's keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saver_and_its_store_share_one_connection() -> Mixed {
    let Some(config) = common::config() else {
        return Ok(());
    };
    let url = config.url.clone();
    let prefix = config.prefix.clone();
    let saver = RedisSaver::connect(config).await?;
    let store = saver.store(indexed()).await?;
    assert_eq!(store.config().prefix, prefix);

    let name = waypoint_test_kit::fresh_name("wp-shared");
    redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(&name)
        .query_async::<()>(&mut saver.connection())
        .await
        .expect("client setname");
    let ns = Namespace::from(["shared"]);
    store
        .put(&ns, "k", json!({"text": "one connection"}))
        .await?;
    assert!(store.get(&ns, "k").await?.is_some());
    assert_eq!(
        last_command_of(&url, &name).await.as_deref(),
        Some("hmget"),
        "the store's read ran on the saver's connection"
    );

    // A thread named after the store's hash tag, and one named like its keys.
    let checkpoint = || waypoint_checkpoint::Checkpoint::new(0);
    let meta = || {
        waypoint_checkpoint::CheckpointMetadata::new(
            waypoint_checkpoint::CheckpointSource::Input,
            0,
        )
    };
    let mut threads = Vec::new();
    for thread in [format!("{{{prefix}}}"), prefix.clone(), "order".to_owned()] {
        let root = CheckpointConfig::new(&thread).with_ns("");
        let stored = saver
            .put(&root, checkpoint(), meta(), Default::default())
            .await?;
        threads.push((thread, stored));
    }
    let mut conn = raw(&url).await;
    let saver_keys = common::scan(&mut conn, &format!("{prefix}:*")).await;
    let store_keys = common::scan(&mut conn, &format!("{{{prefix}}}:*")).await;
    assert!(!saver_keys.is_empty() && !store_keys.is_empty());
    assert!(
        saver_keys.iter().all(|k| !k.starts_with('{')),
        "{saver_keys:?}"
    );
    assert!(
        saver_keys.iter().all(|k| !store_keys.contains(k)),
        "{saver_keys:?} / {store_keys:?}"
    );
    for (thread, stored) in &threads {
        let found = saver.get_tuple(stored).await?;
        assert!(found.is_some(), "{thread}");
        saver.delete_thread(thread).await?;
    }
    assert_eq!(
        common::scan(&mut conn, &format!("{{{prefix}}}:*")).await,
        store_keys,
        "deleting threads left the store alone"
    );
    assert!(store.get(&ns, "k").await?.is_some());
    Ok(())
}

/// With `auto_setup(false)` neither the saver nor the store writes anything on opening, and
/// a store opens only where `setup()` has run; with it (the default) opening sets up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_follows_auto_setup_like_the_saver() -> Mixed {
    let Some(config) = common::config() else {
        return Ok(());
    };
    let (url, prefix) = (config.url.clone(), config.prefix.clone());
    let manual = config.clone().auto_setup(false);
    let under_prefix = || async {
        let mut conn = raw(&url).await;
        let mut keys = common::scan(&mut conn, &format!("{prefix}:*")).await;
        keys.extend(common::scan(&mut conn, &format!("{{{prefix}}}:*")).await);
        keys
    };

    let saver = RedisSaver::connect(manual.clone()).await?;
    saver.setup().await?;
    for opened in [
        RedisStore::connect(manual.clone(), StoreConfig::new()).await,
        saver.store(StoreConfig::new()).await,
    ] {
        let err = opened.expect_err("not set up");
        assert!(
            matches!(&err, Error::InvalidConfig(m) if m.contains("setup")),
            "{err:?}"
        );
    }
    assert!(under_prefix().await.is_empty(), "nothing written");

    // Set up by a store opened with the default, then opened without.
    let store = RedisStore::connect(config.clone(), StoreConfig::new()).await?;
    assert_eq!(under_prefix().await, [format!("{{{prefix}}}:meta")]);
    store.setup().await?;
    let store = saver.store(StoreConfig::new()).await?;
    store.put(["a"], "k", json!({"v": 1})).await?;
    assert!(
        RedisStore::connect(manual.clone(), StoreConfig::new())
            .await?
            .get(["a"], "k")
            .await?
            .is_some()
    );

    // A layout-1 store is upgraded by setup only.
    let meta = format!("{{{prefix}}}:meta");
    let mut conn = raw(&url).await;
    let set_layout = |layout: i64| {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&meta).arg("layout").arg(layout);
        cmd
    };
    set_layout(1)
        .query_async::<()>(&mut conn)
        .await
        .expect("hset");
    let err = RedisStore::connect(manual.clone(), StoreConfig::new())
        .await
        .expect_err("layout 1 without setup");
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("layout 1")),
        "{err:?}"
    );
    store.setup().await?;
    let layout: String = redis::cmd("HGET")
        .arg(&meta)
        .arg("layout")
        .query_async(&mut conn)
        .await
        .expect("hget");
    assert_eq!(layout, "3");
    RedisStore::connect(manual, StoreConfig::new()).await?;
    Ok(())
}

/// A zero operation or connect timeout is a config error, before anything is sent.
#[tokio::test]
async fn timeouts_must_be_positive() {
    for config in [
        RedisConfig::new("redis://127.0.0.1:1/").timeout(Duration::ZERO),
        RedisConfig::new("redis://127.0.0.1:1/").connect_timeout(Duration::ZERO),
    ] {
        let err = RedisStore::connect(config, StoreConfig::new())
            .await
            .expect_err("zero timeout");
        assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    }
}
