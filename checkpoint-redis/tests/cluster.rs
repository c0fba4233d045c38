//! The saver and the store on a real Redis Cluster (`WAYPOINT_TEST_REDIS_CLUSTER_URL`, three
//! primaries): the conformance suites as on one server, every key of a thread in one slot,
//! listing across threads spread over every node, and a store spread over nodes by
//! namespace. Skipped without the cluster, like every live test.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde_json::json;
use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    ListOptions, Result, Serde,
};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver, RedisStore};
use waypoint_store::{
    IndexConfig, ListNamespacesOp, Namespace, Op, PutOp, SearchOp, Store, StoreConfig, StoreExt,
};

/// Default settings on a fresh prefix of the test cluster; `None` without it.
fn config() -> Option<RedisConfig> {
    let url = waypoint_test_kit::redis_cluster_url()?;
    Some(RedisConfig::new(url).prefix(common::fresh_prefix()))
}

/// A saver on a fresh prefix of the test cluster; `None` without it.
async fn saver(serde: Serde) -> Result<Option<RedisSaver>> {
    let Some(config) = config() else {
        return Ok(None);
    };
    let saver = RedisSaver::connect(config.serde(serde)).await?;
    assert!(saver.connection().is_cluster(), "connected as a cluster");
    Ok(Some(saver))
}

/// A plain connection to each node of the cluster, by address.
async fn nodes() -> BTreeMap<String, MultiplexedConnection> {
    let mut out = BTreeMap::new();
    for node in waypoint_test_kit::redis_cluster_nodes().expect("the cluster's nodes") {
        let client = redis::Client::open(format!("redis://{node}/")).expect("node url");
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect to a node");
        out.insert(node, conn);
    }
    out
}

/// Every key matching `pattern`, by node (SCAN on each).
async fn keys_by_node(pattern: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for (node, mut conn) in nodes().await {
        let keys = common::scan(&mut conn, pattern).await;
        if !keys.is_empty() {
            out.insert(node, keys);
        }
    }
    out
}

/// The slot of a key, as the cluster computes it.
async fn keyslot(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .expect("cluster keyslot")
}

mod direct {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional saver(Serde::default()));
}

mod dyn_saver {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional async {
        Ok::<_, waypoint_checkpoint::Error>(
            saver(Serde::default())
                .await?
                .map(|s| std::sync::Arc::new(s) as std::sync::Arc<dyn CheckpointSaver>),
        )
    });
}

mod encrypted {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional saver(common::keyed()?));
}

mod authenticated {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional saver(
        common::keyed()?.authenticate_history(true)
    ));
}

mod with_ttl {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional async {
        match config() {
            Some(config) => RedisSaver::connect(config.ttl(Duration::from_secs(600)))
                .await
                .map(Some),
            None => Ok(None),
        }
    });
}

mod store_conformance {
    use super::*;

    /// A store under a fresh prefix of the test cluster; `None` without it.
    async fn open(store: StoreConfig) -> waypoint_store::Result<Option<RedisStore>> {
        let Some(config) = config() else {
            return Ok(None);
        };
        Ok(Some(RedisStore::connect(config, store).await?))
    }

    waypoint_store::store_conformance!(
        |config: StoreConfig| open(config),
        second = |first: &RedisStore, config: StoreConfig| {
            RedisStore::connect(first.config().clone(), config)
        }
    );
}

/// Puts `n` chained checkpoints on `thread`, with a value and a pending write each.
async fn history(saver: &RedisSaver, thread: &str, n: i64) -> Result<Vec<CheckpointConfig>> {
    let mut parent = CheckpointConfig::new(thread);
    let mut out = Vec::new();
    for step in 0..n {
        let mut cp = Checkpoint::new(step);
        let value = waypoint_checkpoint::SerializedValue::new(
            "json",
            serde_json::to_vec(&json!({ "step": step })).expect("json"),
        );
        cp.channel_values.insert("a".into(), value.clone());
        let version = waypoint_checkpoint::ChannelVersion::from(step as u64 + 1);
        cp.channel_versions.insert("a".into(), version.clone());
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
        parent = saver
            .put(&parent, cp, meta, [("a".to_owned(), version)].into())
            .await?;
        saver
            .put_writes(&parent, vec![("a".into(), value)], "task", "")
            .await?;
        out.push(parent.clone());
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_a_thread_is_in_one_slot() -> Result<()> {
    let Some(saver) = saver(Serde::default()).await? else {
        return Ok(());
    };
    let thread = "a}b{c%d";
    history(&saver, thread, 3).await?;
    let lease = saver.acquire_lease(thread, Duration::from_secs(30)).await?;
    let prefix = saver.config().prefix.clone();
    let found = keys_by_node(&format!("{prefix}:*a%7Db%7Bc%25d*")).await;
    assert_eq!(found.len(), 1, "one node holds the thread: {found:#?}");
    let (_, keys) = found.into_iter().next().expect("a node");
    // registry, meta, index, ns, blobs, 3 checkpoints, 3 writes, and the lease.
    assert_eq!(keys.len(), 12, "{keys:#?}");
    let mut nodes = nodes().await;
    let conn = nodes.values_mut().next().expect("a node");
    let mut slots = BTreeSet::new();
    for key in &keys {
        slots.insert(keyslot(conn, key).await);
    }
    assert_eq!(slots.len(), 1, "{keys:#?}");
    saver.release_lease(&lease).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_across_threads_merges_every_node() -> Result<()> {
    let Some(saver) = saver(Serde::default()).await? else {
        return Ok(());
    };
    let prefix = saver.config().prefix.clone();
    let mut ids = Vec::new();
    for i in 0..12 {
        for config in history(&saver, &format!("thread-{i}"), 2).await? {
            ids.push(config.checkpoint_id.expect("an id"));
        }
    }
    ids.sort_by(|a, b| b.cmp(a));
    let threads = keys_by_node(&format!("{prefix}:{{thread-*}}:meta")).await;
    assert_eq!(threads.len(), 3, "threads on every node: {threads:#?}");
    let shards = keys_by_node(&format!("{prefix}:index:{{*")).await;
    assert!(shards.len() >= 2, "the global index spreads: {shards:#?}");

    let listed = saver.list(None, &ListOptions::default()).await?;
    let listed: Vec<String> = listed.into_iter().map(|t| t.checkpoint.id).collect();
    assert_eq!(listed, ids, "every checkpoint, newest first");
    // Pages with `before` and `limit` walk the same order.
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let options = ListOptions {
            before: before.clone(),
            limit: Some(5),
            filter: None,
        };
        let page = saver.list(None, &options).await?;
        let Some(last) = page.last() else { break };
        before = Some(last.checkpoint.id.clone());
        paged.extend(page.into_iter().map(|t| t.checkpoint.id));
    }
    assert_eq!(paged, ids);
    // A filter across threads, and a thread deleted: its entries leave the index.
    let steps = saver
        .list(None, &ListOptions::default().filter(json!({"step": 1})))
        .await?;
    assert_eq!(steps.len(), 12);
    saver.delete_thread("thread-3").await?;
    let listed = saver.list(None, &ListOptions::default()).await?;
    assert_eq!(listed.len(), 22);
    assert!(listed.iter().all(|t| t.config.thread_id != "thread-3"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_spreads_over_nodes_by_namespace() -> waypoint_store::Result<()> {
    let Some(config) = config() else {
        return Ok(());
    };
    let prefix = config.prefix.clone();
    let store = RedisStore::connect(
        config.clone(),
        StoreConfig::new().index(IndexConfig::hashing(32)),
    )
    .await?;
    // One namespace per user under a shared first label: the first two labels choose the
    // bucket, so the users spread.
    for i in 0..24 {
        let ns = Namespace::new(["memories".to_owned(), format!("user-{i}")]);
        store
            .put(&ns, "m", json!({"text": format!("note {i}"), "i": i}))
            .await?;
    }
    let items = keys_by_node(&format!("{{*}}/{prefix}:i:*")).await;
    assert_eq!(items.len(), 3, "items on every node: {items:#?}");
    // Across buckets: a one-label prefix, the whole store, namespaces, a semantic search.
    let under = store
        .search(SearchOp::new(Namespace::from(["memories"])).limit(100))
        .await?;
    assert_eq!(under.len(), 24);
    let mut seen: Vec<i64> = under
        .iter()
        .filter_map(|hit| hit.item.value["i"].as_i64())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..24).collect::<Vec<_>>());
    // Newest first across buckets.
    assert_eq!(under[0].item.value["i"], 23);
    let all = store
        .search(SearchOp::new(Namespace::root()).limit(100))
        .await?;
    assert_eq!(all.len(), 24);
    let namespaces = store.list_namespaces(ListNamespacesOp::new()).await?;
    assert_eq!(namespaces.len(), 24);
    let hits = store
        .search(
            SearchOp::new(Namespace::from(["memories"]))
                .query("note 7")
                .limit(1),
        )
        .await?;
    assert_eq!(hits[0].item.key, "m");
    // A batch over several buckets applies (atomically per bucket), and a second store on
    // the same prefix follows every bucket's change feed.
    let other =
        RedisStore::connect(config, StoreConfig::new().index(IndexConfig::hashing(32))).await?;
    let put = |user: &str, text: &str| {
        Op::Put(PutOp::new(
            Namespace::new(["memories", user]),
            "late",
            json!({"text": text})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        ))
    };
    store
        .batch(
            (0..6)
                .map(|i| put(&format!("user-{i}"), "spicy ramen"))
                .collect(),
        )
        .await?;
    let found = other
        .search(
            SearchOp::new(Namespace::from(["memories"]))
                .query("spicy ramen")
                .limit(6),
        )
        .await?;
    assert!(found.iter().all(|hit| hit.item.key == "late"), "{found:?}");
    assert_eq!(found.len(), 6);
    Ok(())
}
