//! Reliability on a real SQLite file: a writer killed with SIGKILL mid-put, two processes
//! writing at once (two savers, or a saver and a store), hostile filters, and files that must
//! be refused at open.
//!
//! The child processes are this test binary re-run on one `#[ignore]`d entry point, which
//! does nothing unless `WAYPOINT_CHILD` tells it what to do.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use waypoint_checkpoint::serde::record;
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, ListOptions, Serde,
};
use waypoint_checkpoint_sqlite::{SCHEMA_VERSION, SqliteConfig, SqliteSaver};

const CHANNELS: [&str; 3] = ["messages", "counter", "notes"];

fn temp_db() -> PathBuf {
    tempfile::tempdir()
        .expect("temp dir")
        .keep()
        .join("reliability.db")
}

/// The value channel `channel` holds at `step` (only one channel changes per step).
fn value_at(channel: &str, step: u64) -> serde_json::Value {
    let i = CHANNELS.iter().position(|c| *c == channel).unwrap_or(0) as u64;
    let last_change = if step < 3 {
        i
    } else {
        step - ((step + 3 - i) % 3)
    };
    json!({"channel": channel, "changed_at": last_change, "pad": "x".repeat(200)})
}

/// Puts `steps` chained checkpoints on `thread` (until `until`, or forever), printing
/// `PUT <id> <step>` after each put returns when `announce` is set.
async fn put_loop(
    saver: &SqliteSaver,
    thread: &str,
    steps: Option<u64>,
    until: Option<Instant>,
    announce: bool,
) -> waypoint_checkpoint::Result<u64> {
    let serde = Serde::default();
    let mut parent = CheckpointConfig::new(thread).with_ns("");
    let mut versions: BTreeMap<String, ChannelVersion> = BTreeMap::new();
    let mut step = 0u64;
    while steps.is_none_or(|n| step < n) && until.is_none_or(|t| Instant::now() < t) {
        let mut cp = Checkpoint::new(step as i64);
        let mut new_versions = BTreeMap::new();
        for (i, channel) in CHANNELS.iter().enumerate() {
            if step < 3 || step % 3 == i as u64 || !versions.contains_key(*channel) {
                let v = saver.next_version(versions.get(*channel))?;
                versions.insert((*channel).to_owned(), v.clone());
                new_versions.insert((*channel).to_owned(), v);
            }
            cp.channel_values.insert(
                (*channel).to_owned(),
                serde.dumps(&value_at(channel, step))?,
            );
        }
        cp.channel_versions = versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64);
        parent = saver.put(&parent, cp, meta, new_versions).await?;
        saver
            .put_writes(
                &parent,
                vec![("messages".into(), serde.dumps(&step)?)],
                "task",
                "",
            )
            .await?;
        if announce {
            println!(
                "PUT {} {step}",
                parent.checkpoint_id.as_deref().unwrap_or_default()
            );
        }
        step += 1;
    }
    Ok(step)
}

/// Entry point of the child processes; a no-op unless `WAYPOINT_CHILD` is set.
#[test]
#[ignore = "run as a child process by the tests below"]
fn child() {
    let Ok(mode) = std::env::var("WAYPOINT_CHILD") else {
        return;
    };
    let path = std::env::var("WAYPOINT_CHILD_DB").expect("WAYPOINT_CHILD_DB");
    let thread = std::env::var("WAYPOINT_CHILD_THREAD").expect("WAYPOINT_CHILD_THREAD");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let saver = SqliteSaver::from_path(&path).await.expect("open");
        let done = match mode.as_str() {
            "forever" => put_loop(&saver, &thread, None, None, true).await,
            // Only the final count is printed, so a full stdout pipe never stalls a writer.
            "ten_seconds" => {
                put_loop(
                    &saver,
                    &thread,
                    None,
                    Some(Instant::now() + Duration::from_secs(10)),
                    false,
                )
                .await
            }
            other => panic!("unknown child mode {other}"),
        };
        // Any error (e.g. `database is locked`) fails the child, and so the test.
        println!("DONE {}", done.expect("every put succeeds"));
    });
}

fn spawn_child(mode: &str, db: &Path, thread: &str) -> std::process::Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WAYPOINT_CHILD", mode)
        .env("WAYPOINT_CHILD_DB", db)
        .env("WAYPOINT_CHILD_THREAD", thread)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child")
}

/// The count a `ten_seconds` child printed last, once it exited successfully.
fn final_count(mut child: std::process::Child, name: &str) -> u64 {
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    let done: Vec<u64> = stdout
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.split("DONE ").nth(1).and_then(|n| n.trim().parse().ok()))
        .collect();
    let status = child.wait().expect("reap");
    assert!(status.success(), "child {name} failed: {status}");
    assert_eq!(done.len(), 1, "child {name} printed no final count");
    done[0]
}

/// Every checkpoint row refers only to stored channel versions.
fn assert_no_checkpoint_lacks_blobs(db: &Path) {
    let conn = rusqlite::Connection::open(db).expect("open raw");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity");
    assert_eq!(check, "ok");
    let rows: Vec<(String, String, Vec<u8>)> = conn
        .prepare("SELECT thread_id, checkpoint_ns, checkpoint FROM checkpoints")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        })
        .expect("query");
    let mut exists = conn
        .prepare(
            "SELECT EXISTS (SELECT 1 FROM checkpoint_blobs WHERE thread_id = ?1
                AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4)",
        )
        .expect("prepare");
    for (thread, ns, stored) in rows {
        let checkpoint = record::decode_checkpoint(&stored).expect("checkpoint record");
        for (channel, version) in &checkpoint.channel_versions {
            let found: bool = exists
                .query_row(
                    rusqlite::params![thread, ns, channel, version.as_str()],
                    |r| r.get(0),
                )
                .expect("query");
            assert!(
                found,
                "checkpoint row refers to missing blob {channel} {version}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_put_loses_no_acknowledged_checkpoint() -> waypoint_checkpoint::Result<()> {
    let db = temp_db();
    SqliteSaver::from_path(&db).await?; // create the schema before the child races it
    let mut child = spawn_child("forever", &db, "crash");
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The harness's own `test child ... ` may precede the first line on the same line.
            if let Some(rest) = line.split("PUT ").nth(1) {
                let (id, step) = rest.split_once(' ').expect("PUT id step");
                acked.push((id.to_owned(), step.parse::<u64>().expect("step")));
            }
        }
        acked
    });
    // Let it run, then kill it at an arbitrary point (most likely inside a transaction).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("reap");
    assert!(!status.success());
    let acked = reader.join().expect("reader");
    assert!(
        acked.len() > 50,
        "the child made too little progress: {}",
        acked.len()
    );

    assert_no_checkpoint_lacks_blobs(&db);
    let saver = SqliteSaver::from_path(&db).await?;
    let serde = Serde::default();
    for (id, step) in &acked {
        let config = CheckpointConfig::new("crash")
            .with_ns("")
            .with_id(id.clone());
        let tuple = saver
            .get_tuple(&config)
            .await?
            .unwrap_or_else(|| panic!("acknowledged {id} lost"));
        for channel in CHANNELS {
            let got: serde_json::Value = serde.loads(&tuple.checkpoint.channel_values[channel])?;
            assert_eq!(got, value_at(channel, *step), "{id} {channel}");
        }
        assert_eq!(tuple.pending_writes.len(), 1, "{id} lost its write");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_writing_for_ten_seconds_lose_nothing() -> waypoint_checkpoint::Result<()> {
    let db = temp_db();
    // Both children run setup() on a fresh file at the same time.
    let children: Vec<_> = ["left", "right"]
        .iter()
        .map(|t| (t, spawn_child("ten_seconds", &db, t)))
        .collect();
    let mut counts = BTreeMap::new();
    for (thread, child) in children {
        counts.insert(thread.to_string(), final_count(child, thread));
    }
    let saver = SqliteSaver::from_path(&db).await?;
    for (thread, count) in &counts {
        assert!(*count > 100, "{thread} wrote only {count}");
        let all = saver
            .list(
                Some(&CheckpointConfig::new(thread.as_str())),
                &ListOptions::default(),
            )
            .await?;
        assert_eq!(all.len() as u64, *count, "{thread}");
        assert!(
            all.iter()
                .all(|t| t.pending_writes.len() == 1 && t.checkpoint.channel_values.len() == 3)
        );
    }
    assert_no_checkpoint_lacks_blobs(&db);
    Ok(())
}

/// A saver in one process and a store in another, each committing back to back on one fresh
/// file for ten seconds: both create their tables, neither meets "database is locked",
/// nothing is lost.
#[cfg(feature = "store")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_beside_a_saver_in_another_process_loses_nothing() {
    use waypoint_checkpoint_sqlite::SqliteStore;
    use waypoint_store::{SearchOp, StoreConfig, StoreExt};

    let db = temp_db();
    let child = spawn_child("ten_seconds", &db, "saver");
    let store = SqliteStore::from_path(&db, StoreConfig::new())
        .await
        .expect("open the store");
    let until = Instant::now() + Duration::from_secs(10);
    let mut puts = 0usize;
    while Instant::now() < until {
        store
            .put(["side"], &format!("k{puts}"), json!({"i": puts}))
            .await
            .expect("every store put succeeds");
        puts += 1;
    }
    let done = final_count(child, "saver");
    assert!(done > 100, "the saver wrote only {done}");
    assert!(puts > 100, "the store wrote only {puts}");
    let saver = SqliteSaver::from_path(&db).await.expect("open the saver");
    let history = saver
        .list(
            Some(&CheckpointConfig::new("saver")),
            &ListOptions::default(),
        )
        .await
        .expect("list");
    assert_eq!(history.len() as u64, done);
    let items = store
        .search(SearchOp::new(["side"]).limit(puts + 1))
        .await
        .expect("search");
    assert_eq!(items.len(), puts);
    assert_no_checkpoint_lacks_blobs(&db);
}

fn table_fingerprint(db: &Path) -> (String, Vec<i64>) {
    let conn = rusqlite::Connection::open(db).expect("open raw");
    let schema: String = conn
        .query_row(
            "SELECT group_concat(sql, ';') FROM (SELECT sql FROM sqlite_master ORDER BY name)",
            [],
            |r| r.get(0),
        )
        .expect("schema");
    let counts = [
        "checkpoints",
        "checkpoint_blobs",
        "checkpoint_writes",
        "waypoint_migrations",
    ]
    .iter()
    .map(|t| {
        conn.query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0))
            .expect("count")
    })
    .collect();
    (schema, counts)
}

#[tokio::test]
async fn hostile_filters_are_data_and_leave_the_tables_intact() -> waypoint_checkpoint::Result<()> {
    let db = temp_db();
    let saver = SqliteSaver::from_path(&db).await?;
    put_loop(&saver, "victim", Some(5), None, false).await?;
    let before = table_fingerprint(&db);
    let payloads = [
        "a') OR 1=1 --",
        "source') = 'loop' OR json_extract(metadata, '$.step",
        "x'; DROP TABLE checkpoints; --",
        "$.source\" OR \"1\"=\"1",
        "step) UNION SELECT thread_id, checkpoint_ns, checkpoint_id, NULL, checkpoint, metadata FROM checkpoints --",
        "it's; \"quoted\"",
        "nul\u{0}byte",
        "ключ-🔑",
    ];
    for p in payloads {
        for filter in [
            json!({p: "loop"}),
            json!({"source": p}),
            json!({p: {p: [p]}}),
        ] {
            let got = saver
                .list(None, &ListOptions::default().filter(filter.clone()))
                .await?;
            assert!(got.is_empty(), "{filter} matched {}", got.len());
        }
    }
    assert_eq!(table_fingerprint(&db), before);
    let all = saver
        .list(
            Some(&CheckpointConfig::new("victim")),
            &ListOptions::default().filter(json!({"source": "loop"})),
        )
        .await?;
    assert_eq!(all.len(), 5);
    Ok(())
}

#[tokio::test]
async fn a_file_that_is_not_sqlite_fails_at_open() {
    let db = temp_db();
    std::fs::write(&db, b"this is a text file, not a database, padded past the header size....................................").expect("write");
    let err = SqliteSaver::from_path(&db).await.expect_err("must refuse");
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    assert!(
        err.to_string().contains("is not a SQLite database"),
        "{err}"
    );
}

#[tokio::test]
async fn a_newer_schema_fails_at_open() -> waypoint_checkpoint::Result<()> {
    let db = temp_db();
    drop(SqliteSaver::from_path(&db).await?);
    let conn = rusqlite::Connection::open(&db).expect("open raw");
    conn.execute(
        "INSERT INTO waypoint_migrations (v) VALUES (?1)",
        [SCHEMA_VERSION + 1],
    )
    .expect("bump");
    drop(conn);
    for auto_setup in [true, false] {
        let err = SqliteSaver::open(SqliteConfig::file(&db).auto_setup(auto_setup))
            .await
            .expect_err("must refuse");
        assert!(err.to_string().contains("newer than this build"), "{err}");
    }
    Ok(())
}

#[tokio::test]
async fn setup_is_idempotent_and_concurrent_safe() -> waypoint_checkpoint::Result<()> {
    let db = temp_db();
    let (a, b) = tokio::join!(SqliteSaver::from_path(&db), SqliteSaver::from_path(&db));
    let (a, b) = (a?, b?);
    a.setup().await?;
    b.setup().await?;
    let conn = rusqlite::Connection::open(&db).expect("open raw");
    let applied: Vec<i64> = conn
        .prepare("SELECT v FROM waypoint_migrations ORDER BY v")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("versions");
    assert_eq!(applied, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    Ok(())
}

/// A put hands every channel's value over, one of them versioned anew: this process knows the
/// others are stored and may skip them, but only while no other connection has written. After
/// a delete of the thread by another connection (or by this saver), the values handed over
/// again are stored again, and the next checkpoint reads back whole.
#[tokio::test]
async fn values_handed_over_again_are_stored_again_after_a_delete()
-> waypoint_checkpoint::Result<()> {
    let db = temp_db();
    let a = SqliteSaver::from_path(&db).await?;
    let b = SqliteSaver::from_path(&db).await?;
    let serde = Serde::default();
    for (round, deleter) in [&b, &a].into_iter().enumerate() {
        let thread = format!("t{round}");
        let mut parent = CheckpointConfig::new(thread.as_str()).with_ns("");
        let mut versions: BTreeMap<String, ChannelVersion> = BTreeMap::new();
        for step in 0..4u64 {
            if step == 3 {
                deleter.delete_thread(&thread).await?;
            }
            let mut cp = Checkpoint::new(step as i64);
            let mut new_versions = BTreeMap::new();
            for (i, channel) in CHANNELS.iter().enumerate() {
                if step == 0 || step % 3 == i as u64 {
                    let v = a.next_version(versions.get(*channel))?;
                    versions.insert((*channel).to_owned(), v.clone());
                    new_versions.insert((*channel).to_owned(), v);
                }
                let value = serde.dumps(&value_at(channel, step))?;
                cp.channel_values.insert((*channel).to_owned(), value);
            }
            cp.channel_versions = versions.clone();
            let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64);
            parent = a.put(&parent, cp, meta, new_versions).await?;
        }
        for reader in [&a, &b, &SqliteSaver::from_path(&db).await?] {
            let tuple = reader
                .get_tuple(&parent)
                .await?
                .expect("the last checkpoint");
            for channel in CHANNELS {
                let value = tuple.checkpoint.channel_values.get(channel);
                let value = value
                    .map(|v| serde.loads::<serde_json::Value>(v))
                    .transpose()?;
                assert_eq!(
                    value,
                    Some(value_at(channel, 3)),
                    "round {round}, {channel}"
                );
            }
        }
    }
    Ok(())
}

/// A write that meets another connection's write lock waits for it (up to the busy timeout)
/// instead of failing, on both runtime flavours; nothing is lost.
async fn a_held_write_lock_delays_a_put(saver: SqliteSaver, db: &Path) {
    let conn = rusqlite::Connection::open(db).expect("open raw");
    conn.execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        conn.execute_batch("COMMIT")
            .expect("release the write lock");
    });
    let started = Instant::now();
    let config = CheckpointConfig::new("busy");
    let stored = saver
        .put(
            &config,
            Checkpoint::new(0),
            CheckpointMetadata::new(CheckpointSource::Input, -1),
            BTreeMap::new(),
        )
        .await
        .expect("the put waits for the lock, then succeeds");
    assert!(started.elapsed() >= Duration::from_millis(250));
    release.join().expect("the lock holder");
    let tuple = saver
        .get_tuple(&config)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(Some(tuple.checkpoint.id), stored.checkpoint_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_write_lock_delays_a_put_multi_thread() {
    let db = temp_db();
    a_held_write_lock_delays_a_put(SqliteSaver::from_path(&db).await.expect("open"), &db).await;
}

#[tokio::test]
async fn a_held_write_lock_delays_a_put_current_thread() {
    let db = temp_db();
    a_held_write_lock_delays_a_put(SqliteSaver::from_path(&db).await.expect("open"), &db).await;
}

#[tokio::test]
async fn without_setup_operations_say_so() {
    let db = temp_db();
    let saver = SqliteSaver::open(SqliteConfig::file(&db).auto_setup(false))
        .await
        .expect("open");
    let err = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .expect_err("no tables");
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(err.to_string().contains("setup()"), "{err}");
}

#[tokio::test]
async fn a_database_of_another_layout_is_refused_and_left_untouched() {
    let db = temp_db();
    {
        // LangGraph's SqliteSaver keeps whole checkpoints as blobs in a `checkpoints` table.
        let conn = rusqlite::Connection::open(&db).expect("open raw");
        conn.execute_batch(
            "CREATE TABLE checkpoints (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT,
             parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB)",
        )
        .expect("foreign table");
    }
    let schema = || {
        rusqlite::Connection::open(&db)
            .and_then(|c| {
                c.query_row(
                    "SELECT group_concat(name, ',') FROM sqlite_master",
                    [],
                    |r| r.get::<_, String>(0),
                )
            })
            .expect("schema")
    };
    let before = schema();
    // Without setup too (as `waypoint threads` opens a file): refused at open, not read as
    // Waypoint's records and failing on the first row.
    for auto_setup in [true, false] {
        let err = SqliteSaver::open(SqliteConfig::file(&db).auto_setup(auto_setup))
            .await
            .expect_err("a foreign checkpoints table is refused");
        assert!(
            matches!(&err, waypoint_checkpoint::Error::InvalidConfig(m)
                if m.contains("did not create") && m.contains("SqliteSaver")),
            "auto_setup {auto_setup}: {err}"
        );
        assert_eq!(schema(), before, "the schema is unchanged");
    }
}
