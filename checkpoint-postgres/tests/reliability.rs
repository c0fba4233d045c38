//! Reliability on a real PostgreSQL server: the server stopped and restarted in the middle
//! of a write loop, concurrent setup, missing or newer schemas, LangGraph's inline values,
//! NUL characters, and statements without server-side preparation.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Row;
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, ListOptions, Result, Serde,
};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};

const CHANNELS: [&str; 3] = ["messages", "counter", "notes"];

/// One step of a chained thread: every channel at step 0, then one channel per step.
struct Chain {
    parent: CheckpointConfig,
    versions: BTreeMap<String, ChannelVersion>,
    step: i64,
    /// The id of every checkpoint a put was attempted for, failed ones included.
    attempted: Vec<String>,
}

impl Chain {
    fn new(thread: &str) -> Self {
        Chain {
            parent: CheckpointConfig::new(thread).with_ns(""),
            versions: BTreeMap::new(),
            step: 0,
            attempted: Vec::new(),
        }
    }

    /// Puts the next checkpoint; the chain advances only when the put succeeded.
    async fn put_next(&mut self, saver: &PostgresSaver) -> Result<CheckpointConfig> {
        let serde = Serde::default();
        let mut cp = Checkpoint::new(self.step);
        let mut versions = self.versions.clone();
        let mut new_versions = BTreeMap::new();
        for (i, channel) in CHANNELS.iter().enumerate() {
            if self.step == 0 || self.step % 3 == i as i64 {
                let v = saver.next_version(versions.get(*channel))?;
                versions.insert((*channel).to_owned(), v.clone());
                new_versions.insert((*channel).to_owned(), v);
                let value = json!({"channel": channel, "step": self.step, "pad": "x".repeat(300)});
                cp.channel_values
                    .insert((*channel).to_owned(), serde.dumps(&value)?);
            }
        }
        cp.channel_versions = versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, self.step);
        self.attempted.push(cp.id.clone());
        let stored = saver.put(&self.parent, cp, meta, new_versions).await?;
        self.parent = stored.clone();
        self.versions = versions;
        self.step += 1;
        Ok(stored)
    }
}

/// Checkpoints of `thread` whose channel versions lack a stored value row.
async fn checkpoints_without_blobs(saver: &PostgresSaver, thread: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') cv
         WHERE c.thread_id = $1 AND NOT EXISTS (
            SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = c.thread_id
            AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = cv.key AND b.version = cv.value)",
    )
    .bind(thread)
    .fetch_one(saver.pool())
    .await
    .expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_mid_write_loop_fails_fast_then_recovers() -> Result<()> {
    let Some(faults) = waypoint_test_kit::postgres_faults() else {
        return Ok(());
    };
    let timeout = Duration::from_secs(2);
    let saver = PostgresSaver::connect(
        PostgresConfig::new(faults.url())
            .schema(common::fresh_schema())
            .timeout(timeout),
    )
    .await?;
    saver.setup().await?;
    let mut chain = Chain::new("restart");
    let (start, run_for) = (Instant::now(), Duration::from_secs(10));
    let (mut acknowledged, mut failures, mut after_restart) = (Vec::new(), 0, 0);
    let mut stopped = false;
    let mut restarted = None;
    while start.elapsed() < run_for {
        if !stopped && start.elapsed() > Duration::from_secs(3) {
            // Taken away mid-loop; back two seconds later, from another thread, while the
            // loop keeps calling.
            stopped = true;
            let faults = faults.clone();
            restarted = Some(std::thread::spawn(move || {
                faults.ctl("stop");
                std::thread::sleep(Duration::from_secs(2));
                faults.ctl("start");
                Instant::now()
            }));
        }
        let call = Instant::now();
        match chain.put_next(&saver).await {
            Ok(config) => {
                acknowledged.push(config);
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
                failures += 1;
            }
        }
    }
    let back = restarted
        .expect("the server was stopped")
        .join()
        .expect("restart");
    assert!(failures > 0, "no call failed while the server was down");
    assert!(
        after_restart > 10,
        "the saver did not recover after the restart ({after_restart} puts); restarted {:?} ago",
        back.elapsed()
    );
    // Every acknowledged checkpoint is there with all its values, and none lacks a value row.
    let listed = saver
        .list(
            Some(&CheckpointConfig::new("restart")),
            &ListOptions::default(),
        )
        .await?;
    let mut listed_ids: Vec<_> = listed.iter().map(|t| t.checkpoint.id.clone()).collect();
    let mut acked_ids: Vec<_> = acknowledged
        .iter()
        .map(|c| c.checkpoint_id.clone().unwrap_or_default())
        .collect();
    listed_ids.sort();
    acked_ids.sort();
    let missing: Vec<_> = acked_ids
        .iter()
        .filter(|id| !listed_ids.contains(id))
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged checkpoints lost: {missing:?}"
    );
    // A call that failed may still have committed (its answer lost with the connection, or
    // its deadline passing just after the commit): such a checkpoint may be listed, as
    // with any database; nothing else may.
    let unexplained: Vec<_> = listed_ids
        .iter()
        .filter(|id| !acked_ids.contains(id) && !chain.attempted.contains(id))
        .collect();
    assert!(
        unexplained.is_empty(),
        "checkpoints nobody put: {unexplained:?}"
    );
    let committed_unacknowledged = listed_ids.len() - acked_ids.len();
    assert!(
        committed_unacknowledged <= failures,
        "{committed_unacknowledged} listed checkpoints were never acknowledged, more than the {failures} failed calls"
    );
    assert!(
        listed
            .iter()
            .all(|t| t.checkpoint.channel_values.len() == CHANNELS.len())
    );
    assert_eq!(checkpoints_without_blobs(&saver, "restart").await, 0);
    eprintln!(
        "{} puts acknowledged, {failures} failed during the outage, {after_restart} after the restart",
        acknowledged.len()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_within_the_timeout() {
    // A port nothing listens on (bound, then released).
    let port = waypoint_test_kit::free_port();
    let start = Instant::now();
    let err = PostgresSaver::connect(
        PostgresConfig::new(format!("postgres://nobody@127.0.0.1:{port}/none"))
            .timeout(Duration::from_secs(1)),
    )
    .await
    .expect_err("nothing listens there");
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_is_idempotent_and_safe_when_run_at_once() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = common::fresh_schema();
    let mut savers = Vec::new();
    for _ in 0..4 {
        // Separate pools: separate sessions, as separate processes would have; none set up
        // on connecting, so the four setups below race.
        savers.push(
            PostgresSaver::connect(
                PostgresConfig::new(&url)
                    .schema(&schema)
                    .max_connections(1)
                    .auto_setup(false),
            )
            .await?,
        );
    }
    let runs = savers.iter().map(|s| s.setup());
    for done in futures::future::join_all(runs).await {
        done?;
    }
    savers[0].setup().await?;
    let pool = savers[0].pool();
    let lg: Vec<i32> = sqlx::query_scalar("SELECT v FROM checkpoint_migrations ORDER BY v")
        .fetch_all(pool)
        .await
        .expect("versions");
    assert_eq!(
        lg,
        (0..=waypoint_checkpoint_postgres::LANGGRAPH_SCHEMA_VERSION).collect::<Vec<_>>()
    );
    let wp: Vec<i32> = sqlx::query_scalar("SELECT v FROM waypoint_migrations ORDER BY v")
        .fetch_all(pool)
        .await
        .expect("versions");
    assert_eq!(
        wp,
        (1..=waypoint_checkpoint_postgres::WAYPOINT_SCHEMA_VERSION).collect::<Vec<_>>()
    );
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
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_setup_operations_say_so() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = common::fresh_schema();
    let saver =
        PostgresSaver::connect(PostgresConfig::new(url).schema(&schema).auto_setup(false)).await?;
    let err = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .expect_err("no tables");
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("setup()")),
        "{err:?}"
    );
    assert!(
        !common::schema_exists(saver.pool(), &schema).await,
        "auto_setup(false) created the schema"
    );
    // Setting up later makes the same saver usable.
    saver.setup().await?;
    assert!(
        saver
            .get_tuple(&CheckpointConfig::new("t"))
            .await?
            .is_none()
    );
    Ok(())
}

/// Connecting sets the tables up (auto_setup is on by default): no setup() call needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_sets_up_by_default() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let saver =
        PostgresSaver::connect(PostgresConfig::new(url).schema(common::fresh_schema())).await?;
    assert!(
        saver
            .get_tuple(&CheckpointConfig::new("t"))
            .await?
            .is_none()
    );
    let version: i32 = sqlx::query_scalar("SELECT max(v) FROM checkpoint_migrations")
        .fetch_one(saver.pool())
        .await
        .expect("version");
    assert_eq!(
        version,
        waypoint_checkpoint_postgres::LANGGRAPH_SCHEMA_VERSION
    );
    Ok(())
}

/// A statement timeout ends statements the server runs for longer, and never limits setup
/// (which ran here under a one-millisecond timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statement_timeout_limits_statements_but_not_setup() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let config = PostgresConfig::new(url).schema(common::fresh_schema());
    PostgresSaver::connect(config.clone().statement_timeout(Duration::from_millis(1))).await?;
    let saver =
        PostgresSaver::connect(config.statement_timeout(Duration::from_millis(200))).await?;
    let shown: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(saver.pool())
        .await
        .expect("setting");
    assert_eq!(shown, "200ms");
    let err = sqlx::query("SELECT pg_sleep(2)")
        .execute(saver.pool())
        .await
        .expect_err("cut off by the server");
    let code = err.as_database_error().and_then(|e| e.code());
    assert_eq!(code.as_deref(), Some("57014"), "{err:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_is_refused_at_setup() -> Result<()> {
    let Some(saver) = common::saver(Serde::default()).await? else {
        return Ok(());
    };
    sqlx::query("INSERT INTO checkpoint_migrations (v) VALUES (99)")
        .execute(saver.pool())
        .await
        .expect("insert");
    let err = saver.setup().await.expect_err("newer schema");
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("newer")),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn schema_names_are_identifiers_only() {
    for bad in ["a;drop table x", "1abc", "", "a\"b", &"x".repeat(64)] {
        let err =
            PostgresSaver::connect(PostgresConfig::new("postgres://u@127.0.0.1:1/x").schema(bad))
                .await
                .expect_err("bad schema");
        assert!(matches!(err, Error::InvalidConfig(_)), "{bad}: {err:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_anywhere_in_metadata_never_fails_a_write() -> Result<()> {
    let Some(saver) = common::saver(Serde::default()).await? else {
        return Ok(());
    };
    let config = CheckpointConfig::new("nul").with_ns("");
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0)
        .with(
            "nested",
            json!({"k\u{0}ey": ["a\u{0}b", {"deep": "\u{0}"}]}),
        )
        .with("top", "x\u{0}y");
    let stored = saver
        .put(&config, Checkpoint::new(0), meta, Default::default())
        .await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    assert_eq!(tuple.metadata.extra["top"], json!("xy"));
    assert_eq!(
        tuple.metadata.extra["nested"],
        json!({"key": ["ab", {"deep": ""}]})
    );
    Ok(())
}

/// A row as langgraph-checkpoint-postgres writes it: strings, numbers, booleans and null
/// inline in the checkpoint JSON, integer versions, a `true` marker whose blob wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langgraph_inline_values_are_read() -> Result<()> {
    let Some(saver) = common::saver(Serde::default()).await? else {
        return Ok(());
    };
    let checkpoint = json!({
        "v": 4, "id": "1f0a0000-0000-6000-8000-000000000001", "ts": "2026-11-21T00:00:00.000000+00:00",
        "channel_values": {"topic": "hello", "count": 3, "ratio": 0.5, "flag": true, "nothing": null, "delta": true},
        "channel_versions": {"topic": 1, "count": "00000000000000000000000000000002.0123456789012345",
                              "ratio": 1, "flag": 1, "nothing": 1, "delta": 4, "items": 2},
        "versions_seen": {"__input__": {}}, "updated_channels": ["topic"]
    });
    let pool = saver.pool();
    sqlx::query(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
         VALUES ('py', '', '1f0a0000-0000-6000-8000-000000000001', NULL, $1::jsonb, '{\"source\": \"loop\", \"step\": 1, \"parents\": {}, \"writes\": null}')",
    )
    .bind(checkpoint.to_string())
    .execute(pool)
    .await
    .expect("insert");
    let serde = Serde::default();
    for (channel, version, value) in [("items", "2", json!([1, "a"])), ("delta", "4", json!([7]))] {
        let v = serde.dumps(&value)?;
        sqlx::query("INSERT INTO checkpoint_blobs VALUES ('py', '', $1, $2, $3, $4)")
            .bind(channel)
            .bind(version)
            .bind(v.type_tag.as_ref())
            .bind(v.bytes.as_ref())
            .execute(pool)
            .await
            .expect("insert");
    }
    let tuple = saver
        .get_tuple(&CheckpointConfig::new("py"))
        .await?
        .expect("stored");
    let values: BTreeMap<String, Value> = tuple
        .checkpoint
        .channel_values
        .iter()
        .map(|(k, v)| Ok((k.clone(), serde.loads::<Value>(v)?)))
        .collect::<Result<_>>()?;
    let expected: BTreeMap<String, Value> = [
        ("topic", json!("hello")),
        ("count", json!(3)),
        ("ratio", json!(0.5)),
        ("flag", json!(true)),
        ("nothing", Value::Null),
        ("delta", json!([7])),
        ("items", json!([1, "a"])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(values, expected);
    assert_eq!(
        tuple.checkpoint.channel_versions["topic"].counter(),
        Some(1)
    );
    assert_eq!(tuple.metadata.step, Some(1));
    assert_eq!(tuple.metadata.extra["writes"], Value::Null);
    // The row is still LangGraph's: a put from this saver on the thread goes on from it.
    let next = saver
        .put(
            &tuple.config,
            Checkpoint::new(2),
            CheckpointMetadata::new(CheckpointSource::Loop, 2),
            Default::default(),
        )
        .await?;
    let row = sqlx::query("SELECT parent_checkpoint_id FROM checkpoints WHERE checkpoint_id = $1")
        .bind(next.checkpoint_id.as_deref())
        .fetch_one(pool)
        .await
        .expect("row");
    assert_eq!(
        row.get::<Option<String>, _>(0).as_deref(),
        Some("1f0a0000-0000-6000-8000-000000000001")
    );
    Ok(())
}

/// Values up to a page are stored in their row (migration 8), and a database set up before,
/// whose values went out of line, migrates and reads them as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_up_to_a_page_stay_in_the_row_and_older_ones_still_read() -> Result<()> {
    let Some(saver) = common::saver(Serde::default()).await? else {
        return Ok(());
    };
    let pool = saver.pool();
    let run = async |sql: &str| {
        sqlx::query(sql)
            .execute(pool)
            .await
            .expect(sql)
            .rows_affected()
    };
    // Rows in the values' TOAST table: values stored out of line.
    let toasted = async || -> i64 {
        let toast: String = sqlx::query_scalar(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'checkpoint_blobs'::regclass",
        )
        .fetch_one(pool)
        .await
        .expect("toast table");
        sqlx::query_scalar(&format!("SELECT count(*) FROM {toast}"))
            .fetch_one(pool)
            .await
            .expect("count")
    };
    // The schema as the version before left it.
    for table in ["checkpoint_blobs", "checkpoint_writes"] {
        let columns: String = sqlx::query_scalar(
            "SELECT string_agg(format('ALTER COLUMN %I SET STORAGE EXTENDED', attname), ', ')
             FROM pg_attribute WHERE attrelid = $1::regclass AND attstorage = 'm'",
        )
        .bind(table)
        .fetch_one(pool)
        .await
        .expect("columns");
        run(&format!("ALTER TABLE {table} {columns}")).await;
    }
    run("DELETE FROM waypoint_migrations WHERE v >= 8").await;
    // ~3.6 KB of hex digits, which neither pglz nor lz4 shrinks under 2 KB.
    let text = |seed: u8| {
        (0..100)
            .map(|i| format!("{seed}{i:03}{}", uuid::Uuid::new_v4().simple()))
            .collect::<String>()
    };
    let mut chain = Chain::new("toast");
    let serde = Serde::default();
    let mut put = async |saver: &PostgresSaver, value: &str| {
        let step = chain.step;
        let v = saver.next_version(chain.versions.get("big"))?;
        let mut cp = Checkpoint::new(step);
        cp.channel_versions.insert("big".into(), v.clone());
        cp.channel_values
            .insert("big".into(), serde.dumps(&json!(value))?);
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
        let stored = saver
            .put(
                &chain.parent,
                cp,
                meta,
                [("big".to_owned(), v.clone())].into(),
            )
            .await?;
        chain.versions.insert("big".into(), v);
        chain.parent = stored.clone();
        chain.step += 1;
        Result::Ok(stored)
    };
    let (old_value, new_value) = (text(1), text(2));
    let old = put(&saver, &old_value).await?;
    let out_of_line = toasted().await;
    assert!(
        out_of_line > 0,
        "the old settings store the value out of line"
    );
    saver.setup().await?;
    let not_main: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_attribute WHERE attnum > 0 AND attstorage <> 'm'
         AND atttypid IN ('text'::regtype, 'bytea'::regtype)
         AND attrelid IN ('checkpoint_blobs'::regclass, 'checkpoint_writes'::regclass)",
    )
    .fetch_one(pool)
    .await
    .expect("storage");
    assert_eq!(not_main, 0);
    let new = put(&saver, &new_value).await?;
    assert_eq!(
        toasted().await,
        out_of_line,
        "the new value is stored in its row"
    );
    for (config, value) in [(old, old_value), (new, new_value)] {
        let tuple = saver.get_tuple(&config).await?.expect("stored");
        let read: Value = serde.loads(&tuple.checkpoint.channel_values["big"])?;
        assert_eq!(read, json!(value));
    }
    Ok(())
}

/// Stored bytes that are not what their tag says fail the read with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_rows_fail_reads_clearly() -> Result<()> {
    let Some(saver) = common::saver(Serde::default()).await? else {
        return Ok(());
    };
    let mut chain = Chain::new("corrupt");
    let config = chain.put_next(&saver).await?;
    sqlx::query("UPDATE checkpoint_blobs SET blob = '\\xc1ffff'::bytea WHERE channel = 'messages'")
        .execute(saver.pool())
        .await
        .expect("corrupt");
    let tuple = saver.get_tuple(&config).await?.expect("stored");
    let err = Serde::default()
        .loads::<Value>(&tuple.checkpoint.channel_values["messages"])
        .expect_err("corrupt value");
    assert!(matches!(err, Error::Serialization { .. }), "{err:?}");
    sqlx::query("UPDATE checkpoints SET checkpoint = '{\"v\": \"four\"}'::jsonb")
        .execute(saver.pool())
        .await
        .expect("corrupt");
    let err = saver.get_tuple(&config).await.expect_err("corrupt row");
    assert!(matches!(err, Error::Serialization { .. }), "{err:?}");
    Ok(())
}

/// The whole suite's core operations behind PgBouncer's transaction mode: no server-side
/// prepared statements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprepared_statements_work() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let saver = PostgresSaver::connect(
        PostgresConfig::new(url)
            .schema(common::fresh_schema())
            .prepared_statements(false),
    )
    .await?;
    saver.setup().await?;
    let mut chain = Chain::new("unprepared");
    for _ in 0..5 {
        chain.put_next(&saver).await?;
    }
    let thread = CheckpointConfig::new("unprepared");
    let listed = saver.list(Some(&thread), &ListOptions::default()).await?;
    assert_eq!(listed.len(), 5);
    saver.copy_thread("unprepared", "unprepared-copy").await?;
    saver
        .prune(
            &["unprepared".into()],
            waypoint_checkpoint::PruneStrategy::KeepLatest,
        )
        .await?;
    assert_eq!(
        saver
            .list(Some(&thread), &ListOptions::default())
            .await?
            .len(),
        1
    );
    let prepared: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_prepared_statements")
        .persistent(false)
        .fetch_one(saver.pool())
        .await
        .expect("count");
    assert_eq!(prepared, 0, "a statement was prepared on the server");
    Ok(())
}

/// `n` bytes of random hex: ids PostgreSQL cannot compress into a small index entry.
fn random_id(n: usize) -> String {
    let mut id = String::new();
    while id.len() < n {
        id.push_str(&uuid::Uuid::new_v4().simple().to_string());
    }
    id.truncate(n);
    id
}

/// Ids PostgreSQL cannot store (NUL characters, or too long to index) are refused with
/// Waypoint's own error naming the field, before any statement; ids at the limit, all at
/// once in the widest keys, are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_postgres_cannot_store_are_refused_clearly() -> Result<()> {
    use waypoint_checkpoint_postgres::MAX_ID_BYTES;
    let Some(saver) = common::saver(Serde::default()).await? else {
        return Ok(());
    };
    let serde = Serde::default();
    let refused = |r: Result<()>, field: &str, why: &str| match r {
        Err(Error::InvalidConfig(m)) => {
            assert!(m.contains(field) && m.contains(why), "{m}");
            assert!(m.len() < 200, "the message echoes the id: {m}");
        }
        other => panic!("{field}: expected InvalidConfig, got {other:?}"),
    };
    let put = |config: CheckpointConfig, id: Option<String>, channel: String| {
        let saver = &saver;
        let serde = &serde;
        async move {
            let mut cp = Checkpoint::new(0);
            if let Some(id) = id {
                cp.id = id;
            }
            let v = saver.next_version(None)?;
            cp.channel_values.insert(channel.clone(), serde.dumps(&1)?);
            cp.channel_versions.insert(channel.clone(), v.clone());
            let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
            saver
                .put(&config, cp, meta, BTreeMap::from([(channel, v)]))
                .await
                .map(drop)
        }
    };
    let x = || "x".to_owned();
    let long = random_id(MAX_ID_BYTES + 1);
    let huge = random_id(9000);
    for (bad, why) in [
        ("a\u{0}b".to_owned(), "NUL"),
        (long.clone(), "512"),
        (huge, "512"),
    ] {
        refused(
            put(CheckpointConfig::new(&bad), None, x()).await,
            "thread_id",
            why,
        );
        let in_ns = CheckpointConfig::new("t").with_ns(&bad);
        refused(put(in_ns, None, x()).await, "checkpoint_ns", why);
        refused(
            put(CheckpointConfig::new("t"), Some(bad.clone()), x()).await,
            "checkpoint id",
            why,
        );
        refused(
            put(CheckpointConfig::new("t"), None, bad.clone()).await,
            "channel name",
            why,
        );
        let config = CheckpointConfig::of("t", "", "c");
        let writes = |channel: &str| Ok::<_, Error>(vec![(channel.to_owned(), serde.dumps(&1)?)]);
        refused(
            saver.put_writes(&config, writes("x")?, &bad, "").await,
            "task_id",
            why,
        );
        refused(
            saver.put_writes(&config, writes(&bad)?, "task", "").await,
            "channel name",
            why,
        );
        let lease = saver
            .acquire_lease(&bad, Duration::from_secs(5))
            .await
            .map(drop);
        refused(lease, "thread_id", why);
    }
    // Reads of NUL ids are refused too; reads of long ids (another client's rows) are not.
    let nul = CheckpointConfig::new("a\u{0}b");
    refused(saver.get_tuple(&nul).await.map(drop), "thread_id", "NUL");
    let listed = saver
        .list(Some(&nul), &ListOptions::default())
        .await
        .map(drop);
    refused(listed, "thread_id", "NUL");
    assert!(
        saver
            .get_tuple(&CheckpointConfig::new(&long))
            .await?
            .is_none()
    );
    // Every id at the limit, at once in each table's key.
    let [thread, ns, id, task, channel] = [(); 5].map(|()| random_id(MAX_ID_BYTES));
    let config = CheckpointConfig::new(&thread).with_ns(&ns);
    put(config.clone(), Some(id.clone()), channel.clone()).await?;
    let stored = CheckpointConfig::of(&thread, &ns, &id);
    let value = serde.dumps(&2)?;
    saver
        .put_writes(&stored, vec![(channel.clone(), value)], &task, "")
        .await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    assert!(tuple.checkpoint.channel_values.contains_key(&channel));
    assert_eq!(tuple.pending_writes.len(), 1);
    saver.acquire_lease(&thread, Duration::from_secs(5)).await?;
    Ok(())
}

/// Neither the config's nor the saver's `Debug`, nor an error, shows the URL's password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_never_show() {
    let secret = "hunter2-secret";
    let port = waypoint_test_kit::free_port();
    let url = format!("postgres://app:{secret}@127.0.0.1:{port}/db?sslmode=disable");
    let config = PostgresConfig::new(&url).timeout(Duration::from_secs(1));
    let shown = format!("{config:?}");
    assert!(
        !shown.contains(secret) && shown.contains("app:***@"),
        "{shown}"
    );
    let unreachable = PostgresSaver::connect(config)
        .await
        .expect_err("nothing there");
    for bad in [
        format!("postgres://app:{secret}@[::1/db"),
        format!("postgres://app@127.0.0.1:{port}/db?password={secret}&port=x"),
    ] {
        let err = PostgresSaver::from_url(&bad).await.expect_err("bad URL");
        assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains(secret), "{shown}");
    }
    let shown = format!("{unreachable} {unreachable:?}");
    assert!(!shown.contains(secret), "{shown}");
    if let Some(url) = waypoint_test_kit::postgres_url() {
        // The test server trusts every login: a password is ignored, and never shown.
        let with_password = url.replacen("waypoint@", &format!("waypoint:{secret}@"), 1);
        let saver = PostgresSaver::connect(PostgresConfig::new(with_password).auto_setup(false))
            .await
            .expect("connect");
        let shown = format!("{saver:?}");
        assert!(!shown.contains(secret), "{shown}");
    }
}

/// A schema whose `checkpoints` table another program made (no `checkpoint_migrations`
/// beside it) is refused in one line, and nothing in it changes.
#[tokio::test]
async fn a_foreign_checkpoints_table_is_refused_untouched() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let schema = common::fresh_schema();
    let saver = PostgresSaver::connect(
        PostgresConfig::new(url)
            .schema(schema.clone())
            .max_connections(2)
            .auto_setup(false),
    )
    .await?;
    let pool = saver.pool();
    for sql in [
        format!("CREATE SCHEMA {schema}"),
        format!("CREATE TABLE {schema}.checkpoints (id serial PRIMARY KEY, body text)"),
        format!("INSERT INTO {schema}.checkpoints (body) VALUES ('theirs')"),
    ] {
        sqlx::query(&sql)
            .execute(pool)
            .await
            .expect("foreign table");
    }
    let layout = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT string_agg(c.relname || ':' || coalesce(a.attname, ''), ',' ORDER BY c.relname, a.attnum)
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
    let err = saver
        .setup()
        .await
        .expect_err("a foreign checkpoints table");
    let message = err.to_string();
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("`checkpoints`") && m.contains("neither Waypoint nor LangGraph")),
        "{err:?}"
    );
    assert!(!message.contains('\n'), "one line: {message}");
    assert_eq!(layout().await, before, "the schema was changed");
    Ok(())
}

/// A saver dropped outside any runtime, or after its runtime, closes quietly (its connection
/// parked after use): handing a connection back to sqlx's pool needs a task, spawned on the
/// saver's runtime.
#[test]
fn a_saver_dropped_outside_its_runtime_does_not_panic() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let used = |runtime: &tokio::runtime::Runtime| {
        runtime.block_on(async {
            let config = PostgresConfig::new(url.as_str()).schema(common::fresh_schema());
            let saver = PostgresSaver::connect(config).await?;
            saver.get_tuple(&CheckpointConfig::new("t")).await?;
            Ok::<_, Error>(saver)
        })
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let saver = used(&runtime)?;
    drop(saver);
    // And after its runtime is gone.
    let saver = used(&runtime)?;
    drop(runtime);
    drop(saver);
    Ok(())
}
