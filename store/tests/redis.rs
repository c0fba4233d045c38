//! `RedisStore` on a live server (`WAYPOINT_TEST_REDIS_URL`): the conformance suite with every
//! store under its own key prefix, then what is particular to Redis (the key layout, reopening,
//! atomic batches, hostile names, bad settings) and a server restart in the middle of a write
//! loop, on a second server of its own (`WAYPOINT_TEST_REDIS_FAULTS_URL`, `_CTL`).
//!
//! Without the server the tests pass without running, unless `WAYPOINT_REQUIRE_BACKENDS=1`.

#![cfg(feature = "redis")]

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use waypoint_store::conformance::{Restart, restart_mid_write_loop};
use waypoint_store::{
    Error, Index, IndexConfig, ListNamespacesOp, Namespace, Op, PutOp, RedisStore,
    RedisStoreConfig, Result, SearchOp, Store, StoreConfig, StoreExt, Ttl,
};

/// The value of `var`; `None` (the test passes without running) unless
/// `WAYPOINT_REQUIRE_BACKENDS=1`, which makes a missing server a failure.
fn env(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ if std::env::var("WAYPOINT_REQUIRE_BACKENDS").as_deref() == Ok("1") => {
            panic!("{var} is not set but WAYPOINT_REQUIRE_BACKENDS=1: run scripts/test.sh")
        }
        _ => {
            eprintln!("skipped: {var} is not set (scripts/test.sh sets it)");
            None
        }
    }
}

/// A fresh key prefix, so cases running at once on one server never see each other.
fn fresh_prefix() -> String {
    format!("wp-store-test-{}", uuid::Uuid::new_v4().simple())
}

/// A store under a fresh prefix of the test server; `None` without a server.
async fn open(store: StoreConfig) -> Result<Option<RedisStore>> {
    let Some(url) = env("WAYPOINT_TEST_REDIS_URL") else {
        return Ok(None);
    };
    let store = RedisStore::connect(
        RedisStoreConfig::new(url)
            .prefix(fresh_prefix())
            .store(store),
    )
    .await?;
    Ok(Some(store))
}

mod conformance {
    use super::*;

    waypoint_store::store_conformance!(
        |config: StoreConfig| open(config),
        second = |first: &RedisStore, config: StoreConfig| {
            RedisStore::connect(first.config().clone().store(config))
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

/// Every key under a store's prefix.
async fn keys_of(url: &str, prefix: &str) -> Vec<Vec<u8>> {
    let mut conn = raw(url).await;
    let mut found = Vec::new();
    let mut cursor = String::from("0");
    loop {
        let (next, keys): (String, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(&cursor)
            .arg("MATCH")
            .arg(format!("{{{prefix}}}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .expect("scan");
        found.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    found.sort();
    found
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
    let Some(url) = env("WAYPOINT_TEST_REDIS_URL") else {
        return Ok(());
    };
    let prefix = fresh_prefix();
    let settings = || RedisStoreConfig::new(&url).prefix(&prefix).store(indexed());
    let ns = Namespace::from(["memories"]);
    let first = RedisStore::connect(settings()).await?;
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

    let again = RedisStore::connect(settings()).await?;
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
    let Some(url) = env("WAYPOINT_TEST_REDIS_URL") else {
        return Ok(());
    };
    let prefix = fresh_prefix();
    let store =
        RedisStore::connect(RedisStoreConfig::new(&url).prefix(&prefix).store(indexed())).await?;
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
    assert_eq!(
        left,
        [
            format!("{{{prefix}}}:changes").into_bytes(),
            format!("{{{prefix}}}:meta").into_bytes()
        ],
        "only the change feed (capped) and the layout marker stay"
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
    let Some(url) = env("WAYPOINT_TEST_REDIS_URL") else {
        return Ok(());
    };
    let prefix = fresh_prefix();
    let store =
        RedisStore::connect(RedisStoreConfig::new(&url).prefix(&prefix).store(indexed())).await?;
    let ns = Namespace::from(["atomic"]);
    store.put(&ns, "kept", json!({"text": "before"})).await?;
    // Something else took the key of the second item's namespace.
    let mut conn = raw(&url).await;
    redis::cmd("SET")
        .arg(format!("{{{prefix}}}:n:other"))
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
                ["other"],
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
    assert!(store.get(["other"], "new").await?.is_none());
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
async fn connect_opens_redis_urls() -> Result<()> {
    let Some(url) = env("WAYPOINT_TEST_REDIS_URL") else {
        return Ok(());
    };
    let store = waypoint_store::connect(&url, StoreConfig::new()).await?;
    let ns = Namespace::new(["connect", &uuid::Uuid::new_v4().simple().to_string()]);
    store.put(&ns, "k", json!({"v": 1})).await?;
    assert!(store.get(&ns, "k").await?.is_some());
    store.delete(&ns, "k").await?;
    Ok(())
}

/// An entry of a change feed: its id and its fields.
type FeedEntry = (String, Vec<(String, Vec<u8>)>);

/// The `n` of every entry of a store's change feed, oldest first.
async fn feed_entries(url: &str, prefix: &str) -> Vec<i64> {
    let entries: Vec<FeedEntry> = redis::cmd("XRANGE")
        .arg(format!("{{{prefix}}}:changes"))
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
    let Some(url) = env("WAYPOINT_TEST_REDIS_URL") else {
        return Ok(());
    };
    let prefix = fresh_prefix();
    let settings = || RedisStoreConfig::new(&url).prefix(&prefix).store(indexed());
    let a = RedisStore::connect(settings()).await?;
    let b = RedisStore::connect(settings()).await?;
    let ns = Namespace::from(["docs"]);
    assert!(query_keys(&b, &ns, "ramen").await?.is_empty());
    a.put(&ns, "first", json!({"text": "spicy ramen"})).await?;
    a.put(&ns, "second", json!({"text": "ramen again"})).await?;
    // The feed drops the first entry before B reads it, as its cap would.
    let entries = feed_entries(&url, &prefix).await;
    assert_eq!(entries.len(), 2, "one entry per batch: {entries:?}");
    let trimmed: i64 = redis::cmd("XTRIM")
        .arg(format!("{{{prefix}}}:changes"))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_1_is_upgraded_to_the_change_feed() -> Result<()> {
    let Some(url) = env("WAYPOINT_TEST_REDIS_URL") else {
        return Ok(());
    };
    let prefix = fresh_prefix();
    let meta = format!("{{{prefix}}}:meta");
    let mut conn = raw(&url).await;
    redis::cmd("HSET")
        .arg(&meta)
        .arg("layout")
        .arg(1)
        .query_async::<()>(&mut conn)
        .await
        .expect("hset");
    RedisStore::connect(RedisStoreConfig::new(&url).prefix(&prefix)).await?;
    let layout: String = redis::cmd("HGET")
        .arg(&meta)
        .arg("layout")
        .query_async(&mut conn)
        .await
        .expect("hget");
    assert_eq!(layout, "2");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_layout_is_refused() -> Result<()> {
    let Some(url) = env("WAYPOINT_TEST_REDIS_URL") else {
        return Ok(());
    };
    let prefix = fresh_prefix();
    let mut conn = raw(&url).await;
    redis::cmd("HSET")
        .arg(format!("{{{prefix}}}:meta"))
        .arg("layout")
        .arg(99)
        .query_async::<()>(&mut conn)
        .await
        .expect("hset");
    let err = RedisStore::connect(RedisStoreConfig::new(&url).prefix(&prefix))
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
        let err = RedisStore::connect(RedisStoreConfig::new("redis://127.0.0.1:1/").prefix(bad))
            .await
            .expect_err("bad prefix");
        assert!(matches!(err, Error::InvalidConfig(_)), "{bad}: {err:?}");
    }
    for bad in ["mysql://nope", "redis", "redis://:x:y:z"] {
        let err = RedisStore::from_url(bad, StoreConfig::new())
            .await
            .expect_err("not a Redis URL");
        assert!(matches!(err, Error::InvalidConfig(_)), "{bad}: {err:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_within_the_deadline() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let start = Instant::now();
    let err = RedisStore::connect(
        RedisStoreConfig::new(format!("redis://127.0.0.1:{port}/")).timeout(Duration::from_secs(1)),
    )
    .await
    .expect_err("nothing listens there");
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

// ---- a server restart mid-loop -------------------------------------------------------------

fn ctl(action: &str) {
    let script =
        std::env::var("WAYPOINT_TEST_REDIS_FAULTS_CTL").expect("the server's control script");
    let status = Command::new(&script)
        .arg(action)
        .status()
        .expect("run the control script");
    assert!(status.success(), "{script} {action} failed: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_mid_write_loop_fails_fast_then_recovers() -> Result<()> {
    // A server of its own: stopping it must not disturb tests running on the shared one.
    let Some(url) = env("WAYPOINT_TEST_REDIS_FAULTS_URL") else {
        return Ok(());
    };
    if env("WAYPOINT_TEST_REDIS_FAULTS_CTL").is_none() {
        return Ok(());
    }
    let timeout = Duration::from_secs(1);
    let store = RedisStore::connect(
        RedisStoreConfig::new(&url)
            .prefix(fresh_prefix())
            .timeout(timeout)
            .connect_timeout(Duration::from_millis(500))
            .store(indexed()),
    )
    .await?;
    let summary = restart_mid_write_loop(
        &store,
        ctl,
        timeout + Duration::from_millis(500),
        Restart::Empties,
    )
    .await?;
    eprintln!("{summary}");
    Ok(())
}
