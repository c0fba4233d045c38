//! `PostgresStore` on a live server (`WAYPOINT_TEST_POSTGRES_URL`): the conformance suite with
//! every store on its own schema, a saver and a store on one pool, setup on opening (and not,
//! with `auto_setup(false)`), two stores sharing one database, reopening, concurrent setup,
//! corrupt and unstorable data, foreign tables, LangGraph's Python `PostgresStore` on the
//! same tables, secrets in URLs, and a server restarted or hung (SIGSTOP) in the middle of a
//! write loop.
//!
//! Without the server the tests pass without running, unless `WAYPOINT_REQUIRE_BACKENDS=1`.

#![cfg(feature = "store")]

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver, PostgresStore};
use waypoint_store::conformance::{Restart, restart_mid_write_loop};
use waypoint_store::{
    Embedder, Error, Index, IndexConfig, Item, Namespace, Op, PutOp, Result, SearchOp, Store,
    StoreConfig, StoreExt, Ttl,
};

/// A fresh schema name, so cases running at once on one database never see each other.
fn fresh_schema() -> String {
    waypoint_test_kit::fresh_name("wp_store")
}

/// Settings for `schema` of the test server.
fn settings(url: &str, schema: &str) -> PostgresConfig {
    PostgresConfig::new(url).schema(schema).max_connections(4)
}

/// A store on a fresh schema of the test server, set up on opening; `None` without a server.
async fn open(store: StoreConfig) -> Result<Option<PostgresStore>> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(None);
    };
    let store = PostgresStore::connect(settings(&url, &fresh_schema()), store).await?;
    Ok(Some(store))
}

mod conformance {
    use super::*;

    waypoint_store::store_conformance!(
        |config: StoreConfig| open(config),
        second = |first: &PostgresStore, config: StoreConfig| {
            PostgresStore::connect(first.config().clone(), config)
        }
    );
}

// ---- one pool, one setup rule ---------------------------------------------------------------

/// A saver and the store it opens share one pool: both work, each set up its own tables on
/// opening, and the store's operations take no connection beyond the pool's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saver_and_its_store_share_one_pool() -> Result<()> {
    use waypoint_checkpoint::{
        Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    };
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let saver = PostgresSaver::connect(settings(&url, &schema).max_connections(2))
        .await
        .expect("saver");
    let store = saver.store(indexed()).await?;
    assert_eq!(store.config().schema.as_deref(), Some(schema.as_str()));
    // Both sets of tables, each in its own version tables.
    for table in [
        "checkpoint_migrations",
        "store_migrations",
        "waypoint_store_migrations",
    ] {
        let set_up: bool =
            sqlx::query_scalar(&format!("SELECT to_regclass('{table}') IS NOT NULL"))
                .fetch_one(saver.pool())
                .await
                .expect("catalog");
        assert!(set_up, "{table} missing");
    }
    // Interleaved, concurrently, on a pool of two.
    let thread = CheckpointConfig::new(waypoint_test_kit::fresh_name("thread"));
    let mut parent = thread.clone().with_ns("");
    for step in 0..10 {
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
        let put = saver.put(&parent, Checkpoint::new(step), meta, Default::default());
        let key = format!("k{step}");
        let item = store.put(
            ["shared", "pool"],
            &key,
            json!({"text": "shared pool", "step": step}),
        );
        let (config, stored) = futures::join!(put, item);
        parent = config.expect("checkpoint put");
        stored?;
    }
    let latest = saver
        .get_tuple(&thread)
        .await
        .expect("get")
        .expect("latest");
    assert_eq!(latest.metadata.step, Some(9));
    let hits = store
        .search(SearchOp::new(["shared"]).query("shared pool").limit(20))
        .await?;
    assert_eq!(hits.len(), 10);
    // One pool: the store's connections are the saver's, within its limit of two.
    assert!(std::ptr::eq(saver.pool(), store.pool()));
    assert!(
        saver.pool().size() <= 2,
        "{} connections",
        saver.pool().size()
    );
    Ok(())
}

/// With `auto_setup(false)` opening a store creates nothing (not even the schema) and its
/// operations say setup is missing; by default opening sets the tables up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_sets_up_on_opening_unless_told_not_to() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let saver = PostgresSaver::connect(settings(&url, &schema).auto_setup(false))
        .await
        .expect("saver");
    let store = saver.store(indexed()).await?;
    assert!(
        !common::schema_exists(saver.pool(), &schema).await,
        "auto_setup(false) created the schema"
    );
    let err = store.get(["a"], "k").await.expect_err("no tables");
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("setup()")),
        "{err:?}"
    );
    // Explicit setup, as before; the saver's tables are still its own business.
    store.setup().await?;
    store.put(["a"], "k", json!({"text": "x"})).await?;
    assert!(store.get(["a"], "k").await?.is_some());
    let saver_tables: bool = sqlx::query_scalar("SELECT to_regclass('checkpoints') IS NOT NULL")
        .fetch_one(saver.pool())
        .await
        .expect("catalog");
    assert!(
        !saver_tables,
        "the store's setup created the saver's tables"
    );
    // By default, opening sets up: a store on a fresh schema works at once.
    let fresh = PostgresStore::connect(settings(&url, &fresh_schema()), StoreConfig::new()).await?;
    fresh.put(["a"], "k", json!({"v": 1})).await?;
    assert!(fresh.get(["a"], "k").await?.is_some());
    Ok(())
}

/// Two indexed stores on one fresh schema (set up), as two processes would share it.
async fn two_instances() -> Result<Option<(PostgresStore, PostgresStore)>> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(None);
    };
    let schema = fresh_schema();
    let first = PostgresStore::connect(settings(&url, &schema), indexed()).await?;
    first.setup().await?;
    let second = PostgresStore::connect(settings(&url, &schema), indexed()).await?;
    Ok(Some((first, second)))
}

fn indexed() -> StoreConfig {
    StoreConfig::new().index(IndexConfig::hashing(32))
}

fn obj(value: Value) -> waypoint_store::Object {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

async fn query_keys(store: &PostgresStore, ns: &Namespace, q: &str) -> Result<Vec<String>> {
    Ok(store
        .search(SearchOp::new(ns).query(q).limit(10))
        .await?
        .into_iter()
        .map(|i| i.item.key)
        .collect())
}

async fn sql(store: &PostgresStore, statement: &str) {
    sqlx::raw_sql(statement)
        .execute(store.pool())
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_see_each_others_semantic_puts_within_a_second() -> Result<()> {
    let Some((a, b)) = two_instances().await? else {
        return Ok(());
    };
    let ns = Namespace::from(["shared", "docs"]);
    // B has searched (its log cursor is current) before A writes.
    assert!(query_keys(&b, &ns, "gardening").await?.is_empty());

    a.put(
        &ns,
        "garden",
        json!({"text": "tomatoes and basil in the garden"}),
    )
    .await?;
    let start = Instant::now();
    loop {
        let got = query_keys(&b, &ns, "tomatoes and basil in the garden").await?;
        if got.first().map(String::as_str) == Some("garden") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "B did not see A's put within a second: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Updates and deletes travel the other way too.
    b.put(&ns, "garden", json!({"text": "a fleet of sailing boats"}))
        .await?;
    b.put(&ns, "boats", json!({"text": "harbour with rowing boats"}))
        .await?;
    let got = a
        .search(
            SearchOp::new(&ns)
                .query("a fleet of sailing boats")
                .limit(1),
        )
        .await?;
    assert_eq!(got[0].key, "garden");
    assert_eq!(got[0].value["text"], "a fleet of sailing boats");
    b.delete(&ns, "garden").await?;
    assert_eq!(query_keys(&a, &ns, "sailing boats").await?, ["boats"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_rebuilds_the_index_from_stored_vectors() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let ns = Namespace::from(["memories"]);
    let first = PostgresStore::connect(settings(&url, &schema), indexed()).await?;
    first.setup().await?;
    let texts = [
        ("cat", "my cat is called Miso"),
        ("food", "spicy ramen on fridays"),
        ("trip", "hiking in the alps last summer"),
    ];
    for (key, text) in texts {
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

    let again = PostgresStore::connect(settings(&url, &schema), indexed()).await?;
    let after = again
        .search(SearchOp::new(&ns).query("cat named Miso").limit(10))
        .await?;
    assert_eq!(after.len(), 3, "the unindexed item stays out");
    assert_eq!(after, before, "same items, same scores");
    assert_eq!(after[0].key, "cat");
    Ok(())
}

/// The change log holds each key a statement changed, whoever wrote it (plain SQL here):
/// inserts, an upsert's inserted and updated rows, value updates, renames (both keys), deletes,
/// a delete and an insert in one statement, and not the updates that change nothing a
/// reader's index holds (TTL changes, rewrites of the same value).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_log_holds_every_changed_key_and_no_refresh() -> Result<()> {
    let Some(store) = open(StoreConfig::new()).await? else {
        return Ok(());
    };
    let logged = async |statement: &str| -> Vec<String> {
        let before: i64 =
            sqlx::query_scalar("SELECT coalesce(max(seq), 0) FROM waypoint_store_changes")
                .fetch_one(store.pool())
                .await
                .expect("seq");
        sql(&store, statement).await;
        sqlx::query_scalar(
            "SELECT prefix || '/' || key FROM waypoint_store_changes WHERE seq > $1 ORDER BY 1",
        )
        .bind(before)
        .fetch_all(store.pool())
        .await
        .expect("log")
    };
    let insert = "INSERT INTO store (prefix, key, value) VALUES ('p', 'a', '{\"n\": 1}'), ('p', 'b', '{\"n\": 1}')";
    assert_eq!(logged(insert).await, ["p/a", "p/b"]);
    let upsert = "INSERT INTO store (prefix, key, value) VALUES ('p', 'b', '{\"n\": 2}'), ('p', 'c', '{\"n\": 1}')
        ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()";
    assert_eq!(logged(upsert).await, ["p/b", "p/c"]);
    let ttl = "UPDATE store SET ttl_minutes = 5, expires_at = now() + interval '5 minutes'";
    assert!(logged(ttl).await.is_empty(), "a TTL change is not logged");
    assert!(
        logged("UPDATE store SET value = value").await.is_empty(),
        "nothing changed"
    );
    assert_eq!(
        logged("UPDATE store SET value = '{\"n\": 3}' WHERE key = 'a'").await,
        ["p/a"]
    );
    assert_eq!(
        logged("UPDATE store SET key = 'z' WHERE key = 'c'").await,
        ["p/c", "p/z"]
    );
    assert_eq!(
        logged("DELETE FROM store WHERE key IN ('a', 'z')").await,
        ["p/a", "p/z"]
    );
    // A batch deletes and upserts in one statement (`del` and `up` CTEs): both are logged.
    let batch = "WITH del AS (DELETE FROM store WHERE key = 'b' RETURNING 1)
        INSERT INTO store (prefix, key, value) VALUES ('p', 'd', '{\"n\": 1}')";
    assert_eq!(logged(batch).await, ["p/b", "p/d"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_behind_a_trimmed_log_reloads_every_vector() -> Result<()> {
    let Some((writer, reader)) = two_instances().await? else {
        return Ok(());
    };
    let ns = Namespace::from(["log"]);
    assert!(query_keys(&reader, &ns, "anything").await?.is_empty());
    writer
        .put(&ns, "old", json!({"text": "written long ago"}))
        .await?;
    // The writer's change is older than the log keeps; a sweep trims it.
    sql(
        &writer,
        "UPDATE waypoint_store_changes SET changed_at = now() - interval '1 hour'",
    )
    .await;
    writer.sweep_expired().await?;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM waypoint_store_changes")
        .fetch_one(writer.pool())
        .await
        .expect("count");
    assert_eq!(left, 0, "the sweep trimmed the log");
    assert_eq!(
        query_keys(&reader, &ns, "written long ago").await?,
        ["old"],
        "the reader reloaded instead of replaying"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_writers_change_arrives_when_it_commits() -> Result<()> {
    let Some((writer, reader)) = two_instances().await? else {
        return Ok(());
    };
    let ns = Namespace::from(["slow"]);
    assert!(query_keys(&reader, &ns, "anything").await?.is_empty());

    // A transaction writes an item the way a store does (the trigger logs it), and stays
    // open: its log row takes its sequence number now, before the item below.
    let value = json!({"text": "the slow one"});
    let text = waypoint_store::get_text_at_path(&value, "$");
    let vector = waypoint_store::HashingEmbedder::new(32)
        .embed_documents(&text)
        .await?
        .remove(0);
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut slow = writer.pool().begin().await.expect("begin");
    for statement in [
        "INSERT INTO store (prefix, key, value, waypoint_embedded_at)
            VALUES ('slow', 'slow', $1::text::jsonb, now())",
        "INSERT INTO waypoint_store_vectors (prefix, key, field_name, embedding) VALUES ('slow', 'slow', '$', $2)",
    ] {
        sqlx::query(statement)
            .bind(value.to_string())
            .bind(&bytes)
            .execute(&mut *slow)
            .await
            .expect("slow write");
    }
    writer
        .put(&ns, "fast", json!({"text": "the fast one"}))
        .await?;
    assert_eq!(query_keys(&reader, &ns, "the fast one").await?, ["fast"]);
    slow.commit().await.expect("commit");
    assert_eq!(
        query_keys(&reader, &ns, "the slow one")
            .await?
            .first()
            .map(String::as_str),
        Some("slow"),
        "the change committed after the reader moved on is not skipped"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_is_idempotent_and_safe_when_run_at_once() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let mut stores = Vec::new();
    for _ in 0..4 {
        // Separate pools: separate sessions, as separate processes would have; none set up
        // on opening, so the four setups below race.
        stores.push(
            PostgresStore::connect(
                settings(&url, &schema).max_connections(1).auto_setup(false),
                StoreConfig::new(),
            )
            .await?,
        );
    }
    for done in futures::future::join_all(stores.iter().map(|s| s.setup())).await {
        done?;
    }
    stores[0].setup().await?;
    let pool = stores[0].pool();
    let langgraph: Vec<i32> = sqlx::query_scalar("SELECT v FROM store_migrations ORDER BY v")
        .fetch_all(pool)
        .await
        .expect("versions");
    assert_eq!(langgraph, [0, 1, 2, 3]);
    let ours: Vec<i32> = sqlx::query_scalar("SELECT v FROM waypoint_store_migrations ORDER BY v")
        .fetch_all(pool)
        .await
        .expect("versions");
    assert_eq!(ours, [1, 2, 3, 4, 5, 6, 7, 8]);
    // Every index is valid (a failed concurrent build would leave an invalid one).
    let invalid: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT i.indisvalid",
    )
    .bind(&schema)
    .fetch_one(pool)
    .await
    .expect("count");
    assert_eq!(invalid, 0);
    stores[1].put(["a"], "k", json!({"v": 1})).await?;
    assert!(stores[2].get(["a"], "k").await?.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_setup_operations_say_so() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let store = PostgresStore::connect(
        settings(&url, &schema).auto_setup(false),
        StoreConfig::new(),
    )
    .await?;
    let err = store.get(["a"], "k").await.expect_err("no tables");
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("setup()")),
        "{err:?}"
    );
    assert!(
        !common::schema_exists(store.pool(), &schema).await,
        "auto_setup(false) created the schema"
    );
    // Setting up later makes the same store usable.
    store.setup().await?;
    store.put(["a"], "k", json!({"v": 1})).await?;
    assert!(store.get(["a"], "k").await?.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_is_refused_at_setup() -> Result<()> {
    let Some(store) = open(StoreConfig::new()).await? else {
        return Ok(());
    };
    sql(
        &store,
        "INSERT INTO waypoint_store_migrations (v) VALUES (99)",
    )
    .await;
    let err = store.setup().await.expect_err("newer schema");
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("newer")),
        "{err:?}"
    );
    Ok(())
}

/// Compiles only if the store's futures are `Send` from a generic context (sqlx's executor
/// lifetimes can hide that), so they run in spawned tasks.
#[allow(dead_code)]
fn futures_can_be_spawned(store: &'static PostgresStore, saver: &'static PostgresSaver) {
    tokio::spawn(async move { store.setup().await });
    tokio::spawn(async move { store.get(["a"], "k").await });
    tokio::spawn(PostgresStore::from_url("postgres://x", StoreConfig::new()));
    tokio::spawn(PostgresSaver::from_url("postgres://x"));
    tokio::spawn(saver.store(StoreConfig::new()));
}

#[tokio::test]
async fn bad_urls_and_schema_names_are_config_errors() {
    for bad in ["a;drop table x", "1abc", "", "a\"b", &"x".repeat(64)] {
        let err = PostgresStore::connect(
            PostgresConfig::new("postgres://u@127.0.0.1:1/x").schema(bad),
            StoreConfig::new(),
        )
        .await
        .expect_err("bad schema");
        assert!(matches!(err, Error::InvalidConfig(_)), "{bad}: {err:?}");
    }
    let err = PostgresStore::from_url("mysql://nope", StoreConfig::new())
        .await
        .expect_err("not a PostgreSQL URL");
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_within_the_deadline() {
    // A port nothing listens on (bound, then released).
    let port = waypoint_test_kit::free_port();
    let start = Instant::now();
    let err = PostgresStore::connect(
        PostgresConfig::new(format!("postgres://nobody@127.0.0.1:{port}/none"))
            .timeout(Duration::from_secs(1)),
        StoreConfig::new(),
    )
    .await
    .expect_err("nothing listens there");
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_characters_are_refused_not_stripped() -> Result<()> {
    let Some(store) = open(StoreConfig::new()).await? else {
        return Ok(());
    };
    let ns = Namespace::from(["nul"]);
    for value in [
        json!({"text": "a\u{0}b"}),
        json!({"k\u{0}ey": 1}),
        json!({"deep": [{"x": "\u{0}"}]}),
    ] {
        let err = store.put(&ns, "k", value.clone()).await.expect_err("NUL");
        assert!(
            matches!(&err, Error::InvalidValue(m) if m.contains("`k`")),
            "{value}: {err:?}"
        );
    }
    // An escaped backslash before `u0000` is plain text.
    store.put(&ns, "k", json!({"text": "\\u0000"})).await?;
    let item = store.get(&ns, "k").await?.expect("stored");
    assert_eq!(item.value["text"], "\\u0000");
    // Keys and labels with NUL cannot be stored, and reads of them find nothing.
    let err = store
        .put(&ns, "a\u{0}b", json!({}))
        .await
        .expect_err("NUL key");
    assert!(matches!(err, Error::InvalidValue(_)), "{err:?}");
    let err = store
        .put(["x\u{0}y"], "k", json!({}))
        .await
        .expect_err("NUL label");
    assert!(matches!(err, Error::InvalidNamespace { .. }), "{err:?}");
    assert!(store.get(&ns, "a\u{0}b").await?.is_none());
    assert!(store.search(SearchOp::new(["x\u{0}y"])).await?.is_empty());
    // A batch with one bad put writes nothing.
    let batch = vec![
        Op::Put(PutOp::new(ns.clone(), "good", obj(json!({"v": 1})))),
        Op::Put(PutOp::new(ns.clone(), "bad", obj(json!({"v": "\u{0}"})))),
    ];
    assert!(store.batch(batch).await.is_err());
    assert!(store.get(&ns, "good").await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_vector_bytes_are_reported() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let store = PostgresStore::connect(settings(&url, &schema), indexed()).await?;
    store.setup().await?;
    store.put(["v"], "k", json!({"text": "hello"})).await?;
    sql(
        &store,
        "UPDATE waypoint_store_vectors SET embedding = '\\x010203'::bytea",
    )
    .await;
    let err = PostgresStore::connect(settings(&url, &schema), indexed())
        .await
        .expect_err("corrupt vector");
    assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
    // Stored vectors of the wrong dimension are corrupt too.
    sql(
        &store,
        "UPDATE waypoint_store_vectors SET embedding = '\\x0000803f'::bytea",
    )
    .await;
    let err = PostgresStore::connect(settings(&url, &schema), indexed())
        .await
        .expect_err("one dimension");
    assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_named_twice_is_stored_once() -> Result<()> {
    let config = StoreConfig::new().index(IndexConfig::hashing(32).fields(["text", "text"]));
    let Some(store) = open(config).await? else {
        return Ok(());
    };
    let ns = Namespace::from(["twice"]);
    store.put(&ns, "k", json!({"text": "said twice"})).await?;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM waypoint_store_vectors")
        .fetch_one(store.pool())
        .await
        .expect("count");
    assert_eq!(rows, 1);
    assert_eq!(query_keys(&store, &ns, "said twice").await?, ["k"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_scans_page_in_order_across_equal_timestamps() -> Result<()> {
    let Some(store) = open(StoreConfig::new()).await? else {
        return Ok(());
    };
    // Three batches: every item of a batch has the same `updated_at`, so the key breaks ties
    // on every page boundary.
    let ns = Namespace::from(["scan"]);
    let mut expected = Vec::new();
    for batch in 0..3 {
        let mut ops = Vec::new();
        let mut keys = Vec::new();
        for i in 0..700 {
            let key = format!("b{batch}-{i:04}");
            ops.push(Op::Put(PutOp::new(
                ns.clone(),
                key.clone(),
                obj(json!({"i": i, "even": i % 2 == 0})),
            )));
            keys.push(key);
        }
        store.batch(ops).await?;
        keys.sort();
        expected.splice(0..0, keys);
    }
    // A sibling namespace sharing the text prefix stays out.
    store.put(["scanner"], "other", json!({"i": 0})).await?;
    let all = store
        .search(SearchOp::new(&ns).limit(5000))
        .await?
        .into_iter()
        .map(|i| i.item.key)
        .collect::<Vec<_>>();
    assert_eq!(all, expected);
    let page = store
        .search(SearchOp::new(&ns).offset(1000).limit(500))
        .await?
        .into_iter()
        .map(|i| i.item.key)
        .collect::<Vec<_>>();
    assert_eq!(page, expected[1000..1500]);
    let evens = store
        .search(SearchOp::new(&ns).filter(json!({"even": true})).limit(5000))
        .await?;
    assert_eq!(evens.len(), 1050);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_without_prepared_statements() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let store = PostgresStore::connect(
        settings(&url, &fresh_schema()).prepared_statements(false),
        indexed(),
    )
    .await?;
    store.setup().await?;
    let ns = Namespace::from(["plain"]);
    store
        .put_with(
            &ns,
            "k",
            json!({"text": "plain statements"}),
            Index::Default,
            Ttl::Minutes(5.5),
        )
        .await?;
    assert_eq!(
        store.get(&ns, "k").await?.expect("put").value["text"],
        "plain statements"
    );
    assert_eq!(query_keys(&store, &ns, "plain statements").await?, ["k"]);
    assert_eq!(
        store.list_namespaces(Default::default()).await?,
        std::slice::from_ref(&ns)
    );
    store.delete(&ns, "k").await?;
    assert!(store.get(&ns, "k").await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fractional_ttls_are_stored_exactly() -> Result<()> {
    let Some(store) = open(StoreConfig::new()).await? else {
        return Ok(());
    };
    store
        .put_with(["ttl"], "k", json!({}), Index::Default, Ttl::Minutes(0.75))
        .await?;
    let (ttl, span): (f64, f64) = sqlx::query_as(
        "SELECT ttl_minutes, extract(epoch from expires_at - updated_at)::float8 FROM store",
    )
    .fetch_one(store.pool())
    .await
    .expect("row");
    assert_eq!(ttl, 0.75);
    assert_eq!(span, 45.0);
    Ok(())
}

// ---- LangGraph's Python PostgresStore on the same tables -----------------------------------

/// Runs one of the Python fixtures with `input` (as a JSON file) and returns the JSON it
/// wrote.
fn run_python(python: &Path, script: &str, url: &str, input: &Value) -> Value {
    let input_path =
        std::env::temp_dir().join(format!("{}.in.json", waypoint_test_kit::fresh_name(script)));
    std::fs::write(&input_path, input.to_string()).expect("write input");
    let path = input_path.to_str().expect("a UTF-8 temp path");
    let answer = common::run_python(python, script, &[url, path]);
    let _ = std::fs::remove_file(input_path);
    answer
}

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().expect("ISO timestamp"))
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

/// Asserts that Python's JSON view of an item (`namespace`, `key`, `value`, `created_at`,
/// `updated_at`) is `item`.
fn assert_same(py: &Value, item: &Item) {
    let labels: Vec<&str> = py["namespace"]
        .as_array()
        .expect("namespace")
        .iter()
        .map(|l| l.as_str().expect("label"))
        .collect();
    assert_eq!(labels, item.namespace.labels());
    assert_eq!(py["key"], json!(item.key));
    assert_eq!(
        py["value"],
        Value::Object((*item.value).clone()),
        "{}",
        item.key
    );
    assert_eq!(time(&py["created_at"]), item.created_at, "{}", item.key);
    assert_eq!(time(&py["updated_at"]), item.updated_at, "{}", item.key);
}

fn keys_of(list: &Value) -> Vec<&str> {
    list.as_array()
        .expect("list")
        .iter()
        .map(|i| i["key"].as_str().expect("key"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langgraph_puts_read_back_in_rust() -> Result<()> {
    let Some((url, python)) = common::fresh_database("store_interop").await else {
        return Ok(());
    };
    // Python sets the database up first (TTL minutes as INT), then writes.
    let written = run_python(&python, "python_store_writes.py", &url, &json!({}));
    let store = PostgresStore::from_url(&url, indexed()).await?;
    store.setup().await?;
    let items = written["items"].as_array().expect("items");
    assert!(items.len() >= 4);
    for py in items {
        let labels: Vec<String> = serde_json::from_value(py["namespace"].clone()).expect("ns");
        let key = py["key"].as_str().expect("key");
        let item = store
            .get(Namespace::new(labels), key)
            .await?
            .unwrap_or_else(|| panic!("{key} is missing"));
        assert_same(py, &item);
    }
    // Prefix search on whole labels, newest first, and filters.
    let under = store
        .search(SearchOp::new(["interop", "py"]).limit(100))
        .await?;
    let ours: Vec<&str> = under.iter().map(|i| i.item.key.as_str()).collect();
    assert_eq!(ours, keys_of(&written["search"]));
    let found = store
        .search(SearchOp::new(["interop"]).filter(json!({"n": 2})))
        .await?;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key, "nested");
    // Python wrote them before Waypoint's setup installed the log trigger: they are embedded
    // all the same (from the store's index fields), and a Rust re-put keeps them found.
    assert_eq!(
        query_keys(&store, &Namespace::from(["interop"]), "hello from python")
            .await?
            .first()
            .map(String::as_str),
        Some("plain")
    );
    let plain = store.get(["interop", "py"], "plain").await?.expect("plain");
    store
        .put(
            ["interop", "py"],
            "plain",
            Value::Object((*plain.value).clone()),
        )
        .await?;
    assert_eq!(
        query_keys(&store, &Namespace::from(["interop"]), "hello from python")
            .await?
            .first()
            .map(String::as_str),
        Some("plain")
    );
    let again = store.get(["interop", "py"], "plain").await?.expect("plain");
    assert_eq!(again.created_at, plain.created_at, "created_at survives");
    assert!(again.updated_at > plain.updated_at);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_puts_read_back_in_langgraph() -> Result<()> {
    let Some((url, python)) = common::fresh_database("store_interop").await else {
        return Ok(());
    };
    let store = PostgresStore::from_url(&url, indexed()).await?;
    store.setup().await?;
    let puts = [
        (
            vec!["interop", "rs"],
            "one",
            json!({"text": "first", "n": 1}),
        ),
        (
            vec!["interop", "rs", "deep"],
            "two",
            json!({"text": "ünïcödé ✓", "n": 2, "nested": {"list": [1, 2.5, null, true]}}),
        ),
        (vec!["interop", "rsx"], "sibling", json!({"n": 2})),
        (
            vec!["interop", "rs"],
            "three",
            json!({"text": "third", "n": 3.5}),
        ),
    ];
    let mut items = Vec::new();
    for (labels, key, value) in &puts {
        store.put(labels.clone(), key, value.clone()).await?;
    }
    store
        .put_with(
            ["interop", "rs"],
            "ttl",
            json!({"n": 4}),
            Index::Default,
            Ttl::Minutes(2.5),
        )
        .await?;
    for (labels, key, _) in &puts {
        items.push(store.get(labels.clone(), key).await?.expect("just put"));
    }
    let ask = json!({
        "get": items.iter().map(|i| json!([i.namespace.labels(), i.key])).collect::<Vec<_>>(),
        "search_prefix": ["interop", "rs"],
        "filter": {"n": 2},
    });
    let ours: Vec<String> = store
        .search(SearchOp::new(["interop", "rs"]).limit(100))
        .await?
        .into_iter()
        .map(|i| i.item.key)
        .collect();
    let read = run_python(&python, "python_store_reads.py", &url, &ask);
    for (py, item) in read["get"].as_array().expect("gets").iter().zip(&items) {
        assert_same(py, item);
    }
    assert_eq!(keys_of(&read["search"]), ours, "same items, newest first");
    assert_eq!(keys_of(&read["filtered"]), ["two"]);
    assert_eq!(read["ttl_item"]["value"], json!({"n": 4}));
    // Python deletes; Rust no longer finds the item, by key or by meaning.
    assert!(store.get(["interop", "rs"], "one").await?.is_none());
    assert!(
        !query_keys(&store, &Namespace::from(["interop"]), "first")
            .await?
            .contains(&String::from("one"))
    );
    Ok(())
}

/// LangGraph's Python store on a live database, taking one command at a time
/// (`python_store_edits.py`): each answer comes once the write has committed.
struct PythonEditor {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl PythonEditor {
    /// Starts the fixture on `url` (it runs Python's setup) and waits until it is ready.
    fn start(python: &Path, url: &str) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/python_store_edits.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(url)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run python");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut editor = PythonEditor {
            child,
            stdin,
            stdout,
        };
        assert_eq!(editor.answer()["ready"], json!(true));
        editor
    }

    fn answer(&mut self) -> Value {
        use std::io::BufRead;
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read python");
        assert!(
            !line.is_empty(),
            "python_store_edits.py ended early (see its stderr)"
        );
        serde_json::from_str(&line).expect("JSON line")
    }

    fn send(&mut self, command: Value) -> Value {
        use std::io::Write;
        writeln!(self.stdin, "{command}").expect("write python");
        self.stdin.flush().expect("flush python");
        let answer = self.answer();
        assert_eq!(answer["ok"], json!(true), "{command}: {answer}");
        answer
    }

    fn put(&mut self, ns: &Namespace, key: &str, value: Value) {
        self.send(json!({"op": "put", "namespace": ns.labels(), "key": key, "value": value}));
    }

    fn put_for(&mut self, ns: &Namespace, key: &str, value: Value, ttl_minutes: f64) {
        self.send(json!({
            "op": "put", "namespace": ns.labels(), "key": key, "value": value, "ttl": ttl_minutes
        }));
    }

    fn delete(&mut self, ns: &Namespace, key: &str) {
        self.send(json!({"op": "delete", "namespace": ns.labels(), "key": key}));
    }
}

impl Drop for PythonEditor {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = writeln!(self.stdin);
        let _ = self.child.wait();
    }
}

/// Runs `check` until it holds, at most `limit` after the start; returns how long it took.
async fn holds_within<F, Fut>(limit: Duration, what: &str, mut check: F) -> Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let start = Instant::now();
    loop {
        if check().await? {
            return Ok(start.elapsed());
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The semantic hits for `query` under `ns` as (key, score, text).
async fn hits(
    store: &PostgresStore,
    ns: &Namespace,
    query: &str,
) -> Result<Vec<(String, f32, Value)>> {
    Ok(store
        .search(SearchOp::new(ns).query(query).limit(10))
        .await?
        .into_iter()
        .map(|i| {
            (
                i.item.key.clone(),
                i.score.unwrap_or(0.0),
                i.item.value["text"].clone(),
            )
        })
        .collect())
}

/// An index of the `text` field (so a query for an item's text scores it 1), embedding with
/// `embedder`.
fn on_text(embedder: Arc<dyn Embedder>) -> StoreConfig {
    StoreConfig::new().index(IndexConfig::new(embedder).fields(["text"]))
}

/// Whether the best hit for `text` is `key`, holding `text`, with a score of (about) 1.
async fn found_exactly(
    store: &PostgresStore,
    ns: &Namespace,
    text: &str,
    key: &str,
) -> Result<bool> {
    Ok(hits(store, ns, text)
        .await?
        .first()
        .is_some_and(|(k, score, t)| k == key && *score > 0.999 && *t == json!(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langgraph_writes_reach_the_semantic_index_within_a_second() -> Result<()> {
    let Some((url, python)) = common::fresh_database("store_interop").await else {
        return Ok(());
    };
    // Python sets the database up first; Waypoint's setup then adds its migrations.
    let mut py = PythonEditor::start(&python, &url);
    let hashing = Arc::new(waypoint_store::HashingEmbedder::new(32));
    let store = PostgresStore::from_url(&url, on_text(hashing)).await?;
    store.setup().await?;
    let ns = Namespace::from(["py", "docs"]);
    assert!(query_keys(&store, &ns, "anything").await?.is_empty());
    let second = Duration::from_secs(1);
    let mut latencies = Vec::new();

    // New items are embedded.
    for (key, text, kind) in [
        ("garden", "tomatoes and basil in the garden", "plant"),
        ("boats", "a fleet of sailing boats", "boat"),
    ] {
        py.put(&ns, key, json!({"text": text, "kind": kind}));
        latencies.push(
            holds_within(second, &format!("Python's new {key}"), || {
                found_exactly(&store, &ns, text, key)
            })
            .await?,
        );
    }

    // An overwritten item is embedded again: found by its new text, and its old text no
    // longer scores it as a match.
    let old = "tomatoes and basil in the garden";
    let new = "harbour with rowing boats";
    py.put(&ns, "garden", json!({"text": new, "kind": "boat"}));
    latencies.push(
        holds_within(second, "Python's overwrite", || async {
            let stale = hits(&store, &ns, old)
                .await?
                .iter()
                .any(|(key, score, _)| key == "garden" && *score > 0.99);
            Ok(!stale && found_exactly(&store, &ns, new, "garden").await?)
        })
        .await?,
    );

    // Filters apply to Python's items as to any.
    let filtered = |kind: &'static str| {
        let store = &store;
        let ns = &ns;
        async move {
            let found = store
                .search(
                    SearchOp::new(ns)
                        .query("boats")
                        .filter(json!({"kind": kind}))
                        .limit(10),
                )
                .await?;
            let mut keys: Vec<String> = found.into_iter().map(|i| i.item.key).collect();
            keys.sort();
            Result::Ok(keys)
        }
    };
    assert_eq!(filtered("boat").await?, ["boats", "garden"]);
    assert!(filtered("plant").await?.is_empty());

    // A deleted item leaves, and so does one Python's TTL sweep removes (the log has it).
    py.delete(&ns, "boats");
    latencies.push(
        holds_within(second, "Python's delete", || async {
            Ok(!query_keys(&store, &ns, "a fleet of sailing boats")
                .await?
                .contains(&String::from("boats")))
        })
        .await?,
    );
    py.put_for(&ns, "brief", json!({"text": "gone in a moment"}), 0.01);
    holds_within(second, "Python's short-lived item", || {
        found_exactly(&store, &ns, "gone in a moment", "brief")
    })
    .await?;
    // 0.01 minutes: expired 600 ms after the put.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(py.send(json!({"op": "sweep"}))["swept"], json!(1));
    let logged: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM waypoint_store_changes WHERE prefix = 'py.docs' AND key = 'brief'",
    )
    .fetch_one(store.pool())
    .await
    .expect("count");
    assert!(
        logged >= 2,
        "the put and the sweep's delete are logged: {logged}"
    );
    assert!(
        !query_keys(&store, &ns, "gone in a moment")
            .await?
            .contains(&String::from("brief"))
    );

    // Python's own reads still see what it wrote, and nothing Waypoint added.
    let read = run_python(
        &python,
        "python_store_reads.py",
        &url,
        &json!({"get": [[["py", "docs"], "garden"]], "search_prefix": ["py"], "filter": {"kind": "boat"}}),
    );
    assert_eq!(
        read["get"][0]["value"],
        json!({"text": new, "kind": "boat"})
    );
    assert_eq!(keys_of(&read["filtered"]), ["garden"]);

    let ms: Vec<String> = latencies
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
        .collect();
    eprintln!(
        "Python write -> Waypoint semantic search, ms: {}",
        ms.join(", ")
    );
    Ok(())
}

// ---- other writers: a store without an index, several indexed processes -----------------

/// The hashing embedder, counting the documents it embeds (not the queries).
#[derive(Debug)]
struct Counting {
    inner: waypoint_store::HashingEmbedder,
    documents: std::sync::atomic::AtomicUsize,
    /// Refuses any call with a text containing this.
    refuse: Option<&'static str>,
}

impl Counting {
    fn new(refuse: Option<&'static str>) -> Arc<Self> {
        Arc::new(Counting {
            inner: waypoint_store::HashingEmbedder::new(32),
            documents: Default::default(),
            refuse,
        })
    }

    fn documents(&self) -> usize {
        self.documents.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Embedder for Counting {
    fn dims(&self) -> usize {
        32
    }

    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if let Some(word) = self.refuse
            && texts.iter().any(|t| t.contains(word))
        {
            return Err(Error::Embedding(format!("refused: {word}")));
        }
        self.documents.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed_documents(texts).await
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.inner.embed_query(text).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_other_writers_change_are_embedded_once_for_every_process() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    // A store without an index writes; two indexed ones (two processes) search.
    let writer = PostgresStore::connect(settings(&url, &schema), StoreConfig::new()).await?;
    writer.setup().await?;
    let embedder = Counting::new(None);
    let indexed = on_text(embedder.clone());
    let a = PostgresStore::connect(settings(&url, &schema), indexed.clone()).await?;
    let b = PostgresStore::connect(settings(&url, &schema), indexed).await?;
    let ns = Namespace::from(["notes"]);
    assert!(query_keys(&a, &ns, "anything").await?.is_empty());
    assert!(query_keys(&b, &ns, "anything").await?.is_empty());

    for i in 0..20 {
        writer
            .put(
                &ns,
                &format!("k{i}"),
                json!({"text": format!("note {i} on topic {i}")}),
            )
            .await?;
    }
    // Both search at once: each item is embedded by one of them, and both find every item.
    let second = Duration::from_secs(1);
    let both = |text: String, key: &'static str| {
        let (a, b, ns) = (&a, &b, &ns);
        async move {
            let (x, y) = tokio::join!(
                found_exactly(a, ns, &text, key),
                found_exactly(b, ns, &text, key)
            );
            Result::Ok(x? && y?)
        }
    };
    holds_within(second, "both find k7", || {
        both(String::from("note 7 on topic 7"), "k7")
    })
    .await?;
    for i in 0..20 {
        let key: &'static str = Box::leak(format!("k{i}").into_boxed_str());
        holds_within(second, key, || both(format!("note {i} on topic {i}"), key)).await?;
    }
    assert_eq!(embedder.documents(), 20, "every item embedded once");

    // An overwrite is embedded again, once; its old text no longer matches it anywhere.
    writer
        .put(&ns, "k7", json!({"text": "something else entirely"}))
        .await?;
    holds_within(second, "the overwrite", || {
        both(String::from("something else entirely"), "k7")
    })
    .await?;
    assert_eq!(embedder.documents(), 21);
    for store in [&a, &b] {
        assert!(
            !hits(store, &ns, "note 7 on topic 7")
                .await?
                .iter()
                .any(|(key, score, _)| key == "k7" && *score > 0.99)
        );
    }

    // What an indexed store writes is not embedded again by the other, and an item it puts
    // unindexed stays out of both.
    a.put(&ns, "fresh", json!({"text": "written by a"})).await?;
    a.put_with(
        &ns,
        "off",
        json!({"text": "never indexed"}),
        Index::Off,
        Ttl::Default,
    )
    .await?;
    holds_within(second, "a's put reaches b", || {
        found_exactly(&b, &ns, "written by a", "fresh")
    })
    .await?;
    assert!(
        !query_keys(&b, &ns, "never indexed")
            .await?
            .contains(&String::from("off"))
    );
    assert_eq!(embedder.documents(), 22, "only a embedded its own put");

    // A store opened later embeds what was written while none was open.
    writer
        .put(
            &ns,
            "late",
            json!({"text": "written while nobody searched"}),
        )
        .await?;
    drop((a, b));
    let c = PostgresStore::connect(settings(&url, &schema), on_text(embedder.clone())).await?;
    assert!(found_exactly(&c, &ns, "written while nobody searched", "late").await?);
    assert_eq!(embedder.documents(), 23);
    Ok(())
}

/// Whether `key` under `ns` still waits to be embedded.
async fn unembedded(store: &PostgresStore, ns: &Namespace, key: &str) -> bool {
    sqlx::query_scalar(
        "SELECT waypoint_embedded_at IS DISTINCT FROM updated_at FROM store
         WHERE prefix = $1 AND key = $2",
    )
    .bind(ns.labels().join("."))
    .bind(key)
    .fetch_one(store.pool())
    .await
    .expect("the item")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_processes_with_the_applications_index_embed_for_the_others() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let writer = PostgresStore::connect(settings(&url, &schema), StoreConfig::new()).await?;
    writer.setup().await?;
    let hashing = |dims| Arc::new(waypoint_store::HashingEmbedder::new(dims));
    let app = PostgresStore::connect(settings(&url, &schema), on_text(hashing(32))).await?;
    let ns = Namespace::from(["tools"]);
    app.put(&ns, "own", json!({"text": "the application's item"}))
        .await?;

    // A tool whose index has other dimensions cannot use the stored vectors (opening it says
    // so), and writes no vectors of its own for the others to trip on.
    writer
        .put(&ns, "theirs", json!({"text": "written by another client"}))
        .await?;
    let err = PostgresStore::connect(settings(&url, &schema), on_text(hashing(16)))
        .await
        .expect_err("vectors of another size");
    assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
    assert!(unembedded(&writer, &ns, "theirs").await);

    // One told not to embed for the others leaves the item to the application.
    let reader = PostgresStore::connect(
        settings(&url, &schema),
        on_text(hashing(32)).embed_others(false),
    )
    .await?;
    assert!(!found_exactly(&reader, &ns, "written by another client", "theirs").await?);
    assert!(unembedded(&writer, &ns, "theirs").await);
    assert!(found_exactly(&app, &ns, "written by another client", "theirs").await?);
    assert!(!unembedded(&writer, &ns, "theirs").await);
    assert!(found_exactly(&reader, &ns, "written by another client", "theirs").await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_the_embedder_refuses_holds_up_no_other() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let writer = PostgresStore::connect(settings(&url, &schema), StoreConfig::new()).await?;
    writer.setup().await?;
    let embedder = Counting::new(Some("REFUSED"));
    let reader = PostgresStore::connect(settings(&url, &schema), on_text(embedder.clone())).await?;
    let ns = Namespace::from(["mixed"]);
    writer
        .put(&ns, "one", json!({"text": "first good one"}))
        .await?;
    writer
        .put(&ns, "bad", json!({"text": "REFUSED text"}))
        .await?;
    writer
        .put(&ns, "two", json!({"text": "second good one"}))
        .await?;
    // Searches succeed and find the others; the refused item stays out.
    assert!(found_exactly(&reader, &ns, "first good one", "one").await?);
    assert!(found_exactly(&reader, &ns, "second good one", "two").await?);
    assert!(
        !query_keys(&reader, &ns, "REFUSED text")
            .await?
            .contains(&String::from("bad"))
    );
    // Once its value changes, it is tried again.
    writer
        .put(&ns, "bad", json!({"text": "now acceptable"}))
        .await?;
    assert!(found_exactly(&reader, &ns, "now acceptable", "bad").await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_keeps_stored_vectors_and_embeds_the_items_without() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let old = PostgresStore::connect(settings(&url, &schema), StoreConfig::new()).await?;
    old.setup().await?;
    // The schema as the previous version left it: no log trigger, no embedded mark.
    sql(
        &old,
        "DROP TRIGGER waypoint_store_log_inserts ON store;
         DROP TRIGGER waypoint_store_log_deletes ON store;
         DROP TRIGGER waypoint_store_log_update ON store;
         DROP TRIGGER waypoint_store_log_truncate ON store;
         DROP FUNCTION waypoint_store_log_rows();
         DROP FUNCTION waypoint_store_log_change();
         DROP FUNCTION waypoint_store_log_truncate();
         DROP INDEX waypoint_store_unembedded_idx;
         DROP TABLE waypoint_store_lexical;
         ALTER TABLE store DROP COLUMN waypoint_embedded_at;
         DELETE FROM waypoint_store_migrations WHERE v >= 5",
    )
    .await;
    // An item Waypoint embedded (its text field, as the index below does), one Python wrote.
    let vector = waypoint_store::HashingEmbedder::new(32)
        .embed_query("kept as it was")
        .await?;
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    for statement in [
        "INSERT INTO store (prefix, key, value) VALUES ('up', 'ours', '{\"text\": \"kept as it was\"}')",
        "INSERT INTO waypoint_store_vectors (prefix, key, field_name, embedding) VALUES ('up', 'ours', 'text', $1)",
        "INSERT INTO store (prefix, key, value) VALUES ('up', 'theirs', '{\"text\": \"written by python\"}')",
    ] {
        sqlx::query(statement)
            .bind(&bytes)
            .execute(old.pool())
            .await
            .expect("old rows");
    }
    drop(old);
    // A new version opens the store before its setup has run, then sets it up.
    let embedder = Counting::new(None);
    let store = PostgresStore::connect(
        settings(&url, &schema).auto_setup(false),
        on_text(embedder.clone()),
    )
    .await?;
    store.setup().await?;
    let ns = Namespace::from(["up"]);
    assert!(found_exactly(&store, &ns, "kept as it was", "ours").await?);
    assert!(found_exactly(&store, &ns, "written by python", "theirs").await?);
    assert_eq!(
        embedder.documents(),
        1,
        "only the item without vectors was embedded"
    );
    Ok(())
}

/// What the log trigger costs a put: single puts and batches of 100, indexed (a flat
/// in-process index, so that the graph's build time stays out of it) and not, in short rounds
/// rotating between everything on, the trigger disabled, and the trigger disabled with the
/// partial index of unembedded items dropped; commits do not wait for the WAL flush (a shared
/// disk's fsync time would drown the difference). Also the server's own account of the
/// trigger (EXPLAIN ANALYZE). A measurement, not a check:
/// `cargo test -p waypoint-checkpoint-postgres --test store -- --ignored --nocapture put_cost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement"]
async fn put_cost_with_and_without_the_log_trigger() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{sep}options=-c%20synchronous_commit%3Doff");
    let mut flat = IndexConfig::hashing(32);
    flat.ann.flat_threshold = usize::MAX;
    for config in [StoreConfig::new(), StoreConfig::new().index(flat)] {
        let label = if config.index.is_some() {
            "indexed"
        } else {
            "no index"
        };
        let store = PostgresStore::connect(settings(&url, &fresh_schema()), config).await?;
        store.setup().await?;
        let sync: String = sqlx::query_scalar("SHOW synchronous_commit")
            .fetch_one(store.pool())
            .await
            .expect("setting");
        assert_eq!(sync, "off");
        let ns = Namespace::from(["bench"]);
        // Warm up: connections, prepared statements, the table's first pages.
        for i in 0..500 {
            store
                .put(&ns, &format!("k{i}"), json!({"text": format!("warm {i}")}))
                .await?;
        }
        const N: usize = 200;
        const ROUNDS: usize = 30;
        const VARIANTS: [&str; 3] = ["trigger", "no trigger", "no trigger, no partial index"];
        let mut single: [Vec<f64>; 3] = Default::default();
        let mut batch: [Vec<f64>; 3] = Default::default();
        for round in 0..ROUNDS {
            let variant = round % 3;
            let trigger = if variant == 0 { "ENABLE" } else { "DISABLE" };
            sql(
                &store,
                &format!(
                    "ALTER TABLE store {trigger} TRIGGER waypoint_store_log_inserts;
                     ALTER TABLE store {trigger} TRIGGER waypoint_store_log_update"
                ),
            )
            .await;
            if variant == 2 {
                sql(&store, "DROP INDEX waypoint_store_unembedded_idx").await;
            }
            // Three in four puts update an item, one inserts.
            let start = Instant::now();
            for i in 0..N {
                let key = format!("r{round}k{}", i % (N / 4));
                store
                    .put(&ns, &key, json!({"text": format!("value {i}"), "n": i}))
                    .await?;
            }
            single[variant].push(start.elapsed().as_secs_f64() * 1e6 / N as f64);
            let start = Instant::now();
            for b in 0..4 {
                let ops = (0..100)
                    .map(|i| {
                        let key = format!("b{round}k{}", (b * 100 + i) % 100);
                        Op::Put(PutOp::new(
                            &ns,
                            key,
                            obj(json!({"text": format!("batch {b} {i}")})),
                        ))
                    })
                    .collect();
                store.batch(ops).await?;
            }
            batch[variant].push(start.elapsed().as_secs_f64() * 1e6 / 400.0);
            if variant == 2 {
                sql(
                    &store,
                    "CREATE INDEX waypoint_store_unembedded_idx ON store (updated_at DESC)
                     WHERE waypoint_embedded_at IS DISTINCT FROM updated_at",
                )
                .await;
            }
        }
        sql(
            &store,
            "ALTER TABLE store ENABLE TRIGGER waypoint_store_log_inserts;
             ALTER TABLE store ENABLE TRIGGER waypoint_store_log_update",
        )
        .await;
        // The server's own account of the trigger: 1000 rows inserted, then updated.
        for what in ["insert", "update"] {
            let plan: Value = sqlx::query_scalar(
                "EXPLAIN (ANALYZE, FORMAT JSON)
                 INSERT INTO store (prefix, key, value, created_at, updated_at)
                 SELECT 'explain', 'e' || i, jsonb_build_object('text', 'v' || i), now(), clock_timestamp()
                 FROM generate_series(0, 999) AS i
                 ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
            )
            .fetch_one(store.pool())
            .await
            .expect("explain");
            // Milliseconds for 1000 rows: microseconds per row.
            let total = plan[0]["Execution Time"].as_f64().unwrap_or(0.0);
            let trigger: f64 = plan[0]["Triggers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| {
                    t["Trigger Name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("waypoint_store_log"))
                })
                .map(|t| t["Time"].as_f64().unwrap_or(0.0))
                .sum();
            eprintln!(
                "{label}, server side, 1000-row {what}: {total:.2} us per row in all, {trigger:.2} us of it in the log trigger"
            );
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        for (i, variant) in VARIANTS.iter().enumerate() {
            eprintln!(
                "{label}, {variant}: single put {:.1} us, batched put {:.1} us per item (medians of {} rounds)",
                median(&mut single[i]),
                median(&mut batch[i]),
                ROUNDS / 3,
            );
        }
    }
    Ok(())
}

// ---- a server restarted or hung mid-loop ---------------------------------------------------

/// One fault case at a time on the fault server.
static FAULT_SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_mid_write_loop_fails_fast_then_recovers() -> Result<()> {
    let Some(faults) = waypoint_test_kit::postgres_faults() else {
        return Ok(());
    };
    let _turn = FAULT_SERVER.lock().await;
    let timeout = Duration::from_secs(2);
    let store = PostgresStore::connect(
        settings(faults.url(), &fresh_schema()).timeout(timeout),
        indexed(),
    )
    .await?;
    store.setup().await?;
    let summary = restart_mid_write_loop(
        &store,
        move |action| faults.ctl(action),
        timeout + Duration::from_millis(500),
        Restart::KeepsData,
    )
    .await?;
    eprintln!("{summary}");
    Ok(())
}

/// Writers putting items while the server hangs (SIGSTOP) past the deadline: calls fail
/// within the deadline, the loop goes on once the server is back, no session is left inside a
/// transaction, and another store finds every acknowledged item with its value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_past_the_deadline_loses_no_acknowledged_put() -> Result<()> {
    let Some(faults) = waypoint_test_kit::postgres_faults() else {
        return Ok(());
    };
    let _turn = FAULT_SERVER.lock().await;
    let timeout = Duration::from_secs(1);
    let schema = fresh_schema();
    let config = settings(faults.url(), &schema)
        .max_connections(8)
        .timeout(timeout);
    let store = PostgresStore::connect(config.clone(), StoreConfig::new()).await?;
    store.setup().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let resumed = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (store, stop, resumed) = (store.clone(), stop.clone(), resumed.clone());
        writers.push(tokio::spawn(async move {
            let (mut acked, mut failed, mut after) = (Vec::new(), 0, 0);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let (key, value) = (format!("w{w}-{i}"), json!({"writer": w, "i": i}));
                let started = Instant::now();
                match store.put(["stall"], &key, value.clone()).await {
                    Ok(()) => {
                        after += usize::from(resumed.load(Ordering::Relaxed));
                        acked.push((key, value));
                    }
                    Err(e) => {
                        assert!(matches!(e, Error::Backend { .. }), "{e:?}");
                        let took = started.elapsed();
                        assert!(took < timeout * 2, "a failed put took {took:?}");
                        failed += 1;
                    }
                }
            }
            (acked, failed, after)
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stalled = faults.clone();
    tokio::task::spawn_blocking(move || {
        stalled.ctl("pause");
        std::thread::sleep(Duration::from_millis(2500));
        stalled.ctl("resume");
    })
    .await
    .expect("stall");
    resumed.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut acked, mut failed, mut after) = (Vec::new(), 0, 0);
    for writer in writers {
        let (a, f, r) = writer.await.expect("writer");
        acked.extend(a);
        failed += f;
        after += r;
    }
    let idle: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'",
    )
    .fetch_one(store.pool())
    .await
    .expect("count");
    let other = PostgresStore::connect(config, StoreConfig::new()).await?;
    let mut lost = 0;
    for (key, value) in &acked {
        match other.get(["stall"], key).await? {
            Some(item) if serde_json::Value::Object((*item.value).clone()) == *value => {}
            _ => lost += 1,
        }
    }
    eprintln!(
        "store stall past the deadline: {} puts acknowledged and checked, {lost} lost, {failed} failed during the stall, {after} after it",
        acked.len()
    );
    assert_eq!(lost, 0, "acknowledged puts lost");
    assert_eq!(idle, 0, "sessions left idle in a transaction");
    assert!(failed > 0, "no put failed while the server hung");
    assert!(after > 0, "no put succeeded once the server was back");
    let timeout: String = sqlx::query_scalar("SHOW idle_in_transaction_session_timeout")
        .fetch_one(store.pool())
        .await
        .expect("setting");
    assert_eq!(timeout, "3s", "three times the timeout by default");
    Ok(())
}

// ---- what is not ours, what cannot be stored, what must not show ----------------------------

/// A schema whose `store` table another program made is refused at setup, with one line,
/// and left exactly as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_store_table_is_refused_untouched() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let store = PostgresStore::connect(
        settings(&url, &schema).auto_setup(false),
        StoreConfig::new(),
    )
    .await?;
    let pool = store.pool();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(pool)
        .await
        .expect("schema");
    sqlx::query("CREATE TABLE store (id serial PRIMARY KEY, body text)")
        .execute(pool)
        .await
        .expect("foreign table");
    sqlx::query("INSERT INTO store (body) VALUES ('theirs')")
        .execute(pool)
        .await
        .expect("row");
    let layout = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT string_agg(c.relname || ':' || a.attname, ',' ORDER BY c.relname, a.attnum)
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
             WHERE n.nspname = $1",
        )
        .bind(&schema)
        .fetch_one(pool)
        .await
        .expect("layout")
    };
    let before = layout().await;
    let err = store.setup().await.expect_err("a foreign store table");
    let message = err.to_string();
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("`store`") && m.contains("neither Waypoint nor LangGraph")),
        "{err:?}"
    );
    assert!(!message.contains('\n'), "one line: {message}");
    assert_eq!(layout().await, before, "the schema was changed");
    Ok(())
}

/// Keys, namespaces and index paths too long to index are refused with the store's own
/// errors before any statement; at the limit, all at once, they are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_too_long_to_index_are_refused_clearly() -> Result<()> {
    let Some(store) = open(StoreConfig::new()).await? else {
        return Ok(());
    };
    // Random hex: PostgreSQL cannot compress it into a small index entry.
    let random = |n: usize| {
        let mut s = String::new();
        while s.len() < n {
            s.push_str(&uuid::Uuid::new_v4().simple().to_string());
        }
        s.truncate(n);
        s
    };
    for n in [513, 9000] {
        let err = store
            .put(["long"], &random(n), json!({}))
            .await
            .expect_err("long key");
        assert!(
            matches!(&err, Error::InvalidValue(m) if m.contains("512") && m.contains(&n.to_string())),
            "{err:?}"
        );
        let err = store
            .put([random(n)], "k", json!({}))
            .await
            .expect_err("long namespace");
        assert!(
            matches!(&err, Error::InvalidNamespace { reason, .. } if reason.contains("512")),
            "{err:?}"
        );
    }
    // Two labels of 256 bytes and their dot: 513.
    let err = store
        .put([random(256), random(256)], "k", json!({}))
        .await
        .expect_err("long namespace");
    assert!(matches!(err, Error::InvalidNamespace { .. }), "{err:?}");
    // Index paths start with a letter: `a` and random hex.
    let path = |n: usize| format!("a{}", random(n - 1));
    let too_long = path(513);
    let indexed = open(StoreConfig::new().index(IndexConfig::hashing(8).fields([&too_long])))
        .await?
        .expect("server");
    let err = indexed
        .put(["long"], "k", json!({ too_long.clone(): "text" }))
        .await
        .expect_err("long index path");
    assert!(
        matches!(&err, Error::InvalidValue(m) if m.contains("index path")),
        "{err:?}"
    );
    // At the limit: a 512-byte namespace, key and index path in one row and its vector.
    let (ns, key, field) = (random(512), random(512), path(512));
    let indexed = open(StoreConfig::new().index(IndexConfig::hashing(8).fields([&field])))
        .await?
        .expect("server");
    indexed
        .put([ns.as_str()], &key, json!({ field: "text" }))
        .await?;
    assert!(indexed.get([ns.as_str()], &key).await?.is_some());
    // A long key another client stored is still read.
    assert!(store.get(["long"], &random(600)).await?.is_none());
    Ok(())
}

/// Neither the config's nor the store's `Debug`, nor a URL error, shows the URL's password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_never_show() {
    let secret = "hunter2-secret";
    let config = PostgresConfig::new(format!("postgres://app:{secret}@127.0.0.1:1/db"));
    let shown = format!("{config:?}");
    assert!(
        !shown.contains(secret) && shown.contains("app:***@"),
        "{shown}"
    );
    for bad in [
        format!("postgres://app:{secret}@[::1/db"),
        format!("postgres://app@127.0.0.1:1/db?password={secret}&port=x"),
    ] {
        let err = PostgresStore::from_url(&bad, StoreConfig::new())
            .await
            .expect_err("bad URL");
        assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains(secret), "{shown}");
    }
    let unreachable =
        PostgresStore::connect(config.timeout(Duration::from_secs(1)), StoreConfig::new())
            .await
            .expect_err("nothing there");
    let shown = format!("{unreachable} {unreachable:?}");
    assert!(!shown.contains(secret), "{shown}");
}

/// The lexical leg in PostgreSQL follows another writer (Python LangGraph's SQL): an item it
/// inserts or rewrites is found by its new words once the catch-up embeds it, not by its old
/// ones, and its delete takes the item out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lexical_leg_follows_other_writers() -> Result<()> {
    let index = IndexConfig::new(Arc::new(waypoint_store::HashingEmbedder::new(32)))
        .fields(["text"])
        .lexical(true);
    let Some(store) = open(StoreConfig::new().index(index)).await? else {
        return Ok(());
    };
    let ns = Namespace::from(["lex"]);
    let lexical = |query: &'static str| {
        let store = store.clone();
        let ns = ns.clone();
        async move {
            let found = store
                .search(
                    SearchOp::new(&ns)
                        .query(query)
                        .mode(waypoint_store::SearchMode::Lexical),
                )
                .await?;
            Ok::<_, waypoint_store::Error>(
                found.into_iter().map(|i| i.key.clone()).collect::<Vec<_>>(),
            )
        }
    };
    sql(
        &store,
        "INSERT INTO store (prefix, key, value) VALUES ('lex', 'py', '{\"text\": \"zebra crossing\"}')",
    )
    .await;
    assert_eq!(lexical("zebra").await?, ["py"]);
    sql(
        &store,
        "UPDATE store SET value = '{\"text\": \"giraffe\"}', updated_at = now() WHERE key = 'py'",
    )
    .await;
    assert_eq!(lexical("giraffe").await?, ["py"]);
    assert!(lexical("zebra").await?.is_empty());
    // About 100 KB of distinct words, quotes and tsquery syntax: still only words.
    let long: String = (0..12_000).map(|i| format!("w{i} ")).collect::<String>()
        + "'giraffe' & !(zebra) | <-> :* \\ \0";
    let found = store
        .search(
            SearchOp::new(&ns)
                .query(long)
                .mode(waypoint_store::SearchMode::Lexical),
        )
        .await?;
    assert_eq!(found.first().map(|i| i.key.as_str()), Some("py"));
    sql(&store, "DELETE FROM store WHERE key = 'py'").await;
    assert!(lexical("giraffe").await?.is_empty());
    Ok(())
}

// ---- lexical rows ---------------------------------------------------------------------------

/// The lexical rows in `schema`, and how many were made from their item's current value.
async fn lexical_rows(store: &PostgresStore, schema: &str) -> (i64, i64) {
    let statement = format!(
        "SELECT count(*), count(*) FILTER (WHERE l.made_at = s.updated_at)
         FROM {schema}.waypoint_store_lexical l
         JOIN {schema}.store s ON s.prefix = l.prefix AND s.key = l.key"
    );
    sqlx::query_as(&statement)
        .fetch_one(store.pool())
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"))
}

/// The keys a lexical search of `q` under `ns` finds.
async fn lexical_keys(store: &PostgresStore, ns: &Namespace, q: &str) -> Result<Vec<String>> {
    let op = SearchOp::new(ns)
        .query(q)
        .mode(waypoint_store::SearchMode::Lexical);
    Ok(store
        .search(op)
        .await?
        .into_iter()
        .map(|i| i.item.key)
        .collect())
}

/// Without `lexical` a put writes no lexical row; the next open with it writes the rows of
/// the items put meanwhile, and of items rewritten meanwhile (their old row is stale), so
/// lexical search finds them by their current value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lexical_rows_only_with_lexical_and_backfilled_at_open() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let ns = Namespace::from(["memories"]);
    let with_lexical = || StoreConfig::new().index(IndexConfig::hashing(32).lexical(true));
    let plain = PostgresStore::connect(settings(&url, &schema), indexed()).await?;
    plain
        .put(&ns, "cat", json!({"text": "my cat Miso"}))
        .await?;
    plain
        .put(&ns, "trip", json!({"text": "hiking the alps"}))
        .await?;
    assert_eq!(lexical_rows(&plain, &schema).await, (0, 0));
    drop(plain);

    let lexical = PostgresStore::connect(settings(&url, &schema), with_lexical()).await?;
    assert_eq!(lexical_rows(&lexical, &schema).await, (2, 2));
    assert_eq!(lexical_keys(&lexical, &ns, "miso").await?, ["cat"]);
    drop(lexical);

    let plain = PostgresStore::connect(settings(&url, &schema), indexed()).await?;
    plain
        .put(&ns, "cat", json!({"text": "my cat Tofu"}))
        .await?;
    assert_eq!(lexical_rows(&plain, &schema).await, (2, 1));
    drop(plain);

    let lexical = PostgresStore::connect(settings(&url, &schema), with_lexical()).await?;
    assert_eq!(lexical_rows(&lexical, &schema).await, (2, 2));
    assert!(lexical_keys(&lexical, &ns, "miso").await?.is_empty());
    assert_eq!(lexical_keys(&lexical, &ns, "tofu").await?, ["cat"]);
    Ok(())
}

/// The in-process index saves its graph in the database after a build, and a reopened store
/// restores it instead of rebuilding, finding exactly what the first one found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopened_store_restores_its_index_snapshot() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = fresh_schema();
    let approximate = || {
        StoreConfig::new().index(IndexConfig::hashing(64).ann(waypoint_store::AnnConfig {
            flat_threshold: 200,
            ef_search: 200,
            ..waypoint_store::AnnConfig::default()
        }))
    };
    let ns = Namespace::from(["mem"]);
    let store = PostgresStore::connect(settings(&url, &schema), approximate()).await?;
    let ops: Vec<Op> = (0..1_500)
        .map(|i| {
            let text = format!("memory {i} about w{} and w{}", i % 97, i % 89);
            Op::Put(PutOp::new(
                ns.clone(),
                format!("k{i}"),
                obj(json!({ "text": text })),
            ))
        })
        .collect();
    store.batch(ops).await?;
    let queries: Vec<String> = (0..20).map(|q| format!("w{} w{}", q * 3, q * 5)).collect();
    let mut before = Vec::new();
    for q in &queries {
        before.push(
            store
                .search(SearchOp::new(ns.clone()).query(q).limit(10))
                .await?,
        );
    }
    // The snapshot is written in the background after the graph is built.
    let saved = format!("SELECT count(*) FROM {schema}.waypoint_store_index_snapshot");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let rows: i64 = sqlx::query_scalar(&saved)
            .fetch_one(store.pool())
            .await
            .expect("count snapshots");
        if rows == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "no snapshot was saved");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(store);

    let reopened = PostgresStore::connect(settings(&url, &schema), approximate()).await?;
    let stats = reopened.index_stats().expect("an index");
    assert!(stats.restored > 0, "the snapshot was not used: {stats:?}");
    for (q, want) in queries.iter().zip(&before) {
        let got = reopened
            .search(SearchOp::new(ns.clone()).query(q).limit(10))
            .await?;
        let keys = |items: &[waypoint_store::SearchItem]| {
            items
                .iter()
                .map(|i| (i.item.key.clone(), i.score))
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&got), keys(want), "query {q}");
    }
    Ok(())
}
