//! The saver and the store behind PgBouncer in transaction pooling mode
//! (`WAYPOINT_TEST_PGBOUNCER_URL`, `?transaction_pooler=true` added): the checkpointer and
//! store conformance suites, each case on its own schema, and what a transaction pooler
//! breaks when a client does not know it is there (statements run on someone else's server
//! session, session settings and session locks).
//!
//! Without the pooler the tests pass without running, unless `WAYPOINT_REQUIRE_BACKENDS=1`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use waypoint_checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Serde,
};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};

/// The pooler's URL, saying it is one.
fn pooler_url() -> Option<String> {
    waypoint_test_kit::pgbouncer_url().map(|url| format!("{url}?transaction_pooler=true"))
}

/// Settings for a fresh schema behind the pooler.
fn settings(url: &str) -> PostgresConfig {
    PostgresConfig::new(url)
        .schema(common::fresh_schema())
        .max_connections(4)
}

/// A saver on a fresh schema, through the pooler; `None` without one.
async fn saver(serde: Serde) -> waypoint_checkpoint::Result<Option<PostgresSaver>> {
    let Some(url) = pooler_url() else {
        return Ok(None);
    };
    Ok(Some(
        PostgresSaver::connect(settings(&url).serde(serde)).await?,
    ))
}

mod conformance {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional saver(Serde::default()));
}

mod authenticated {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional saver(
        common::keyed()?.authenticate_history(true)
    ));
}

#[cfg(feature = "store")]
mod store_conformance {
    use waypoint_checkpoint_postgres::PostgresStore;
    use waypoint_store::{Result, StoreConfig};

    async fn open(store: StoreConfig) -> Result<Option<PostgresStore>> {
        let Some(url) = super::pooler_url() else {
            return Ok(None);
        };
        Ok(Some(
            PostgresStore::connect(super::settings(&url), store).await?,
        ))
    }

    waypoint_store::store_conformance!(
        |config: StoreConfig| open(config),
        second = |first: &PostgresStore, config: StoreConfig| {
            PostgresStore::connect(first.config().clone(), config)
        }
    );
}

/// Why the pooler needs saying: sqlx parses a statement (unnamed, unprepared) in one round
/// trip and binds and runs it in the next, and a transaction pooler may lend another server
/// session in between, whose unnamed statement is someone else's. Eight clients alternating
/// two statements of the same parameter types, outside any transaction, get each other's
/// results (40 % of the time here) or "unnamed prepared statement does not exist".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_statements_run_on_other_sessions_unnamed_statements() {
    let Some(url) = waypoint_test_kit::pgbouncer_url() else {
        return;
    };
    let options: PgConnectOptions = url.parse().expect("URL");
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options.statement_cache_capacity(0).extra_float_digits(None))
        .await
        .expect("pooler");
    let clients = (0..8i32).map(|client| {
        let pool = pool.clone();
        tokio::spawn(async move {
            // Client `c` adds `c * 1000000`: a result with another offset ran another's SQL.
            let sql = format!("SELECT $1::int4 + {}", client * 1_000_000);
            let mut wrong = 0;
            for i in 0..200i32 {
                let answer = sqlx::query_scalar::<_, i32>(&sql)
                    .persistent(false)
                    .bind(i)
                    .fetch_one(&pool)
                    .await;
                if answer.ok() != Some(i + client * 1_000_000) {
                    wrong += 1;
                }
            }
            wrong
        })
    });
    let mut wrong = 0;
    for client in clients.collect::<Vec<_>>() {
        wrong += client.await.expect("client");
    }
    assert!(
        wrong > 0,
        "statements outside transactions all found their own session: the pooler is not in transaction mode?"
    );
}

/// The same load through savers told about the pooler: every read finds its own thread's
/// checkpoint, on its own schema (the `search_path` set in each transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_savers_each_find_their_own_rows() -> waypoint_checkpoint::Result<()> {
    let Some(url) = pooler_url() else {
        return Ok(());
    };
    let mut clients = Vec::new();
    for client in 0..8 {
        let saver = Arc::new(PostgresSaver::connect(settings(&url).max_connections(2)).await?);
        clients.push(tokio::spawn(async move {
            for i in 0..40 {
                let thread = format!("t{client}-{i}");
                let stored = saver
                    .put(
                        &CheckpointConfig::new(&thread),
                        Checkpoint::new(i),
                        CheckpointMetadata::default(),
                        ChannelVersions::new(),
                    )
                    .await?;
                let read = saver.get_tuple(&CheckpointConfig::new(&thread)).await?;
                let read = read.expect("the checkpoint just put");
                assert_eq!(read.config.thread_id, thread);
                assert_eq!(read.config.checkpoint_id, stored.checkpoint_id);
            }
            waypoint_checkpoint::Result::Ok(())
        }));
    }
    for client in clients {
        client.await.expect("client")?;
    }
    Ok(())
}

/// Setup through the pooler is one transaction: tables land in the configured schema (never
/// in the server session's default), and several processes setting up at once take turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_lands_in_the_schema_and_takes_turns() -> waypoint_checkpoint::Result<()> {
    let (Some(url), Some(direct)) = (pooler_url(), waypoint_test_kit::postgres_url()) else {
        return Ok(());
    };
    let config = settings(&url).auto_setup(false);
    let schema = config.schema.clone().expect("schema");
    let savers = futures::future::join_all((0..4).map(|_| PostgresSaver::connect(config.clone())))
        .await
        .into_iter()
        .collect::<waypoint_checkpoint::Result<Vec<_>>>()?;
    let setups = futures::future::join_all(savers.iter().map(|s| s.setup())).await;
    setups
        .into_iter()
        .collect::<waypoint_checkpoint::Result<Vec<_>>>()?;
    savers[0]
        .put(
            &CheckpointConfig::new("t"),
            Checkpoint::new(1),
            CheckpointMetadata::new(CheckpointSource::Loop, 1),
            ChannelVersions::new(),
        )
        .await?;
    let server = PgPoolOptions::new()
        .max_connections(1)
        .connect(&direct)
        .await
        .expect("server");
    let rows: i64 = sqlx::query_scalar(&format!(r#"SELECT count(*) FROM "{schema}".checkpoints"#))
        .fetch_one(&server)
        .await
        .expect("the schema's table");
    assert_eq!(rows, 1);
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        r#"SELECT v FROM "{schema}".waypoint_migrations ORDER BY v"#
    ))
    .fetch_all(&server)
    .await
    .expect("versions");
    let expected: Vec<i32> = (1..=waypoint_checkpoint_postgres::WAYPOINT_SCHEMA_VERSION).collect();
    assert_eq!(versions, expected, "each migration once");
    Ok(())
}

/// The statement timeout applies behind the pooler too (as `SET LOCAL`, since PgBouncer
/// drops startup options): a statement over it fails instead of running on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statement_timeout_applies_behind_the_pooler() -> waypoint_checkpoint::Result<()> {
    let Some(url) = pooler_url() else {
        return Ok(());
    };
    let saver =
        PostgresSaver::connect(settings(&url).statement_timeout(Duration::from_millis(200)))
            .await?;
    // A writer holding the thread's per-namespace turn (the head trigger's advisory lock)
    // makes the put wait: past the statement timeout, it fails.
    let direct = waypoint_test_kit::postgres_url().expect("server");
    let holder = PgPoolOptions::new()
        .max_connections(1)
        .connect(&direct)
        .await
        .expect("server");
    let mut tx = holder.begin().await.expect("begin");
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('slow|', 2026))")
        .execute(&mut *tx)
        .await
        .expect("lock");
    let started = std::time::Instant::now();
    let put = saver
        .put(
            &CheckpointConfig::new("slow"),
            Checkpoint::new(1),
            CheckpointMetadata::default(),
            ChannelVersions::new(),
        )
        .await;
    tx.rollback().await.expect("rollback");
    let err = put.expect_err("the put waits past the statement timeout");
    assert!(
        err.to_string().contains("statement timeout"),
        "unexpected error: {err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    Ok(())
}

/// `transaction_pooler` in the URL: `true` turns the mode on, a value other than `true` or
/// `false` is refused.
#[test]
fn the_url_says_whether_a_pooler_is_in_front() {
    let on = PostgresConfig::from_url("postgres://u@h/db?transaction_pooler=true").expect("URL");
    assert!(on.transaction_pooler);
    let off = PostgresConfig::from_url("postgres://u@h/db?sslmode=disable").expect("URL");
    assert!(!off.transaction_pooler);
    let err = PostgresConfig::from_url("postgres://u@h/db?transaction_pooler=yes").unwrap_err();
    assert!(err.to_string().contains("transaction_pooler"), "{err}");
}

/// A store that embeds items other writers changed locks each item while embedding it; behind
/// the pooler those locks are the transaction's. A session lock would stay behind on a server
/// session the pooler lends to others, and the item's next version could not be locked (nor
/// embedded) by any other session: each overwrite here is found by its own text.
#[cfg(feature = "store")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_others_overwrite_are_embedded_again_each_time() -> waypoint_store::Result<()> {
    use waypoint_checkpoint_postgres::PostgresStore;
    use waypoint_store::{IndexConfig, Namespace, SearchOp, StoreConfig, StoreExt};

    let Some(url) = pooler_url() else {
        return Ok(());
    };
    let config = settings(&url);
    let plain = PostgresStore::connect(config.clone(), StoreConfig::new()).await?;
    let indexed =
        PostgresStore::connect(config, StoreConfig::new().index(IndexConfig::hashing(32))).await?;
    let ns = Namespace::from(["docs"]);
    for text in [
        "tomatoes and basil in the garden",
        "a fleet of sailing boats",
        "harbour with rowing boats",
        "tomatoes and basil in the garden",
    ] {
        plain
            .put(&ns, "doc", serde_json::json!({ "text": text }))
            .await?;
        let found = indexed
            .search(SearchOp::new(&ns).query(text).limit(1))
            .await?;
        assert_eq!(found[0].item.value["text"], text);
        let score = found[0].score.expect("embedded, so scored");
        assert!(score > 0.9, "{text}: scored {score} against its own text");
    }
    Ok(())
}

/// `list_stream` behind the pooler reads in one transaction, as `list` does: the same
/// checkpoints, newest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_stream_matches_list() -> waypoint_checkpoint::Result<()> {
    use futures::TryStreamExt;
    use waypoint_checkpoint::ListOptions;

    let Some(saver) = saver(Serde::default()).await? else {
        return Ok(());
    };
    let mut config = CheckpointConfig::new("streamed");
    for step in 0..5 {
        config = saver
            .put(
                &config,
                Checkpoint::new(step),
                CheckpointMetadata::new(CheckpointSource::Loop, step),
                ChannelVersions::new(),
            )
            .await?;
    }
    let thread = CheckpointConfig::new("streamed");
    let listed = saver.list(Some(&thread), &ListOptions::default()).await?;
    let streamed: Vec<_> = saver
        .list_stream(Some(&thread), &ListOptions::default())
        .try_collect()
        .await?;
    assert_eq!(listed.len(), 5);
    let ids = |tuples: &[waypoint_checkpoint::CheckpointTuple]| {
        tuples
            .iter()
            .map(|t| t.config.checkpoint_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&streamed), ids(&listed));
    Ok(())
}
