//! The saver and the store on one database: a store opened from a saver shares its
//! connections (in memory, its database), and both follow the one setup rule and the one
//! connection setup (the busy handler that keeps writers from starving reaches the store too).
//! A store beside a saver in another process is in `reliability.rs`.
#![cfg(feature = "store")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;
use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
};
use waypoint_checkpoint_sqlite::{SqliteConfig, SqliteSaver, SqliteStore};
use waypoint_store::{Error, IndexConfig, SearchOp, StoreConfig, StoreExt};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// A fresh directory, removed when dropped, and a database path inside it.
fn temp_db() -> std::io::Result<(TempDir, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("one.db");
    Ok((dir, path))
}

/// Puts one checkpoint on `thread` and returns its config.
async fn put_one(
    saver: &SqliteSaver,
    thread: &str,
) -> waypoint_checkpoint::Result<CheckpointConfig> {
    saver
        .put(
            &CheckpointConfig::new(thread),
            Checkpoint::new(0),
            CheckpointMetadata::new(CheckpointSource::Input, -1),
            BTreeMap::new(),
        )
        .await
}

/// The names of the database's tables, sorted.
fn tables(path: &Path) -> rusqlite::Result<Vec<String>> {
    let conn = rusqlite::Connection::open(path)?;
    let mut stmt =
        conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")?;
    stmt.query_map([], |r| r.get(0))?.collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saver_and_its_store_share_one_file() -> TestResult {
    let (_dir, path) = temp_db()?;
    let saver = SqliteSaver::from_path(&path).await?;
    let store = saver.store(StoreConfig::new()).await?;
    let stored = put_one(&saver, "t").await?;
    store
        .put(["users", "alice"], "prefs", json!({"theme": "dark"}))
        .await?;
    let tuple = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await?
        .ok_or("no checkpoint")?;
    assert_eq!(Some(tuple.checkpoint.id), stored.checkpoint_id);
    let item = store
        .get(["users", "alice"], "prefs")
        .await?
        .ok_or("no item")?;
    assert_eq!(item.value["theme"], "dark");
    // Both sets of tables in the one file; the store's config is the saver's.
    let names = tables(&path)?;
    for table in [
        "checkpoints",
        "waypoint_migrations",
        "store",
        "waypoint_store_migrations",
    ] {
        assert!(
            names.iter().any(|n| n == table),
            "{table} missing from {names:?}"
        );
    }
    assert_eq!(store.config().target, saver.config().target);
    // A store opened on its own connections sees the same file.
    let other = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    assert!(other.get(["users", "alice"], "prefs").await?.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_of_an_in_memory_saver_see_its_database() -> TestResult {
    let saver = SqliteSaver::open(SqliteConfig::memory()).await?;
    let indexed = || StoreConfig::new().index(IndexConfig::hashing(32));
    let first = saver.store(indexed()).await?;
    let second = saver.store(indexed()).await?;
    put_one(&saver, "t").await?;
    first
        .put(["docs"], "ramen", json!({"text": "spicy ramen"}))
        .await?;
    assert!(second.get(["docs"], "ramen").await?.is_some());
    // The second store's index follows the first's writes, as stores sharing a file do.
    let hits = second
        .search(SearchOp::new(["docs"]).query("ramen").limit(5))
        .await?;
    assert_eq!(hits.first().map(|h| h.key.as_str()), Some("ramen"));
    first.delete(["docs"], "ramen").await?;
    let hits = second
        .search(SearchOp::new(["docs"]).query("ramen").limit(5))
        .await?;
    assert!(hits.is_empty(), "{hits:?}");
    assert!(
        saver
            .get_tuple(&CheckpointConfig::new("t"))
            .await?
            .is_some()
    );
    // A store opened on its own in-memory database sees nothing of the saver's.
    let private = SqliteStore::open(SqliteConfig::memory(), StoreConfig::new()).await?;
    first.put(["docs"], "kept", json!({})).await?;
    assert!(private.get(["docs"], "kept").await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_auto_setup_a_store_creates_no_tables() -> TestResult {
    let (_dir, path) = temp_db()?;
    let config = || SqliteConfig::file(&path).auto_setup(false);
    let indexed = || StoreConfig::new().index(IndexConfig::hashing(32));
    let store = SqliteStore::open(config(), indexed()).await?;
    let saver = SqliteSaver::open(config()).await?;
    let from_saver = saver.store(indexed()).await?;
    assert!(tables(&path)?.is_empty(), "{:?}", tables(&path)?);
    // Operations say what is missing, as the saver's do.
    for store in [&store, &from_saver] {
        let err = store.get(["a"], "k").await.map(drop);
        assert!(
            matches!(&err, Err(Error::InvalidConfig(m)) if m.contains("setup()")),
            "{err:?}"
        );
    }
    // Another store (with the default rule) creates the tables and writes an item; after
    // an explicit setup() the first store finds it, through its index too.
    let writer = SqliteStore::from_path(&path, indexed()).await?;
    writer
        .put(["docs"], "ramen", json!({"text": "spicy ramen"}))
        .await?;
    store.setup().await?;
    from_saver.setup().await?;
    for store in [&store, &from_saver] {
        assert!(store.get(["docs"], "ramen").await?.is_some());
        let hits = store
            .search(SearchOp::new(["docs"]).query("ramen").limit(5))
            .await?;
        assert_eq!(hits.first().map(|h| h.key.as_str()), Some("ramen"));
    }
    // The saver's tables are still the saver's business.
    assert!(!tables(&path)?.iter().any(|n| n == "checkpoints"));
    saver.setup().await?;
    put_one(&saver, "t").await?;
    Ok(())
}

/// Holds the file's write lock from another connection for `hold`, on a thread.
fn hold_write_lock(path: &Path, hold: Duration) -> rusqlite::Result<std::thread::JoinHandle<()>> {
    let conn = rusqlite::Connection::open(path)?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    Ok(std::thread::spawn(move || {
        std::thread::sleep(hold);
        let _ = conn.execute_batch("COMMIT");
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_waits_for_a_lock_up_to_the_busy_timeout() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    // Within the timeout: the put waits for the lock, then succeeds.
    let release = hold_write_lock(&path, Duration::from_millis(300))?;
    let started = Instant::now();
    store.put(["busy"], "k", json!({"v": 1})).await?;
    assert!(started.elapsed() >= Duration::from_millis(250));
    release.join().map_err(|_| "lock holder panicked")?;
    // Past the config's busy timeout: the put fails, after about that long.
    let short = SqliteStore::open(
        SqliteConfig::file(&path).busy_timeout(Duration::from_millis(200)),
        StoreConfig::new(),
    )
    .await?;
    let release = hold_write_lock(&path, Duration::from_secs(2))?;
    let started = Instant::now();
    let err = short.put(["busy"], "k", json!({"v": 2})).await.map(drop);
    let waited = started.elapsed();
    release.join().map_err(|_| "lock holder panicked")?;
    assert!(
        matches!(
            err,
            Err(Error::Backend {
                backend: "sqlite",
                ..
            })
        ),
        "{err:?}"
    );
    assert!(waited >= Duration::from_millis(190), "{waited:?}");
    assert!(waited < Duration::from_millis(1500), "{waited:?}");
    assert_eq!(
        store.get(["busy"], "k").await?.ok_or("missing")?.value["v"],
        1
    );
    Ok(())
}

/// The store takes a lock the moment another connection frees it: SQLite's own busy handler
/// sleeps 1, 2, 5, ... then 100 ms between attempts, so a writer that commits back to back
/// (freeing the lock for microseconds) could starve it; the crate's handler looks every
/// 100-500 µs. Here the lock is freed 280 ms into the wait, between SQLite's attempts at 228
/// and 328 ms: with its handler the put would end about 50 ms after the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_takes_a_freed_lock_at_once() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    let mut fastest = Duration::MAX;
    // The quickest of three rounds, so that one slow wake-up on a loaded machine is no failure.
    for round in 0..3 {
        let conn = rusqlite::Connection::open(&path)?;
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let holder = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(280));
            conn.execute_batch("COMMIT").map(|()| Instant::now())
        });
        store.put(["lock"], &format!("k{round}"), json!({})).await?;
        let done = Instant::now();
        let released = holder.join().map_err(|_| "lock holder panicked")??;
        fastest = fastest.min(done.saturating_duration_since(released));
    }
    assert!(
        fastest < Duration::from_millis(20),
        "{fastest:?} after the release"
    );
    Ok(())
}
