//! `SqliteStore`: the conformance suite on a file database and an in-memory one, then what is
//! particular to SQLite (the schema on disk, reopening, corrupt rows, atomic writes).
#![cfg(feature = "store")]

use std::path::PathBuf;
use std::time::Instant;

use async_trait::async_trait;
use rusqlite::Connection;
use serde_json::json;
use tempfile::TempDir;
use waypoint_checkpoint_sqlite::{SqliteConfig, SqliteStore};
use waypoint_store::{
    BoxError, Error, Index, IndexConfig, ListNamespacesOp, Namespace, Op, OpResult, PutOp, Result,
    SearchOp, Store, StoreConfig, StoreExt, SweeperHandle, Ttl,
};

type TestResult = std::result::Result<(), BoxError>;

/// A store on a file in its own temporary directory, removed when the store is dropped.
struct FileStore {
    store: SqliteStore,
    dir: TempDir,
}

impl FileStore {
    async fn open(config: StoreConfig) -> Result<Self> {
        let dir = tempfile::tempdir().map_err(|e| Error::backend("test", e))?;
        let store = SqliteStore::from_path(dir.path().join("store.db"), config).await?;
        Ok(FileStore { store, dir })
    }

    /// The database file.
    fn path(&self) -> PathBuf {
        self.dir.path().join("store.db")
    }
}

#[async_trait]
impl Store for FileStore {
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        self.store.batch(ops).await
    }

    async fn sweep_expired(&self) -> Result<usize> {
        self.store.sweep_expired().await
    }

    fn start_sweeper(&self) -> SweeperHandle {
        self.store.start_sweeper()
    }
}

mod file {
    use super::*;
    waypoint_store::store_conformance!(
        |config: StoreConfig| async move { Result::Ok(Some(FileStore::open(config).await?)) },
        second =
            |first: &FileStore, config: StoreConfig| SqliteStore::from_path(first.path(), config)
    );
}

mod memory {
    use super::*;
    waypoint_store::store_conformance!(|config: StoreConfig| async move {
        Result::Ok(Some(in_memory(config).await?))
    });
}

/// A store on a private in-memory database.
async fn in_memory(config: StoreConfig) -> Result<SqliteStore> {
    SqliteStore::open(SqliteConfig::memory(), config).await
}

/// A fresh directory and a database path inside it.
fn temp_db() -> std::io::Result<(TempDir, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store.db");
    Ok((dir, path))
}

fn ns(labels: &[&str]) -> Namespace {
    Namespace::new(labels.iter().copied())
}

fn keys(items: &[waypoint_store::SearchItem]) -> Vec<String> {
    items.iter().map(|i| i.key.clone()).collect()
}

fn query_column<T: rusqlite::types::FromSql>(
    conn: &Connection,
    sql: &str,
) -> rusqlite::Result<Vec<T>> {
    let mut stmt = conn.prepare(sql)?;
    stmt.query_map([], |r| r.get(0))?.collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopened_file_store_rebuilds_its_index() -> TestResult {
    let (_dir, path) = temp_db()?;
    let config = || StoreConfig::new().index(IndexConfig::hashing(64));
    {
        let store = SqliteStore::from_path(&path, config()).await?;
        let docs = ns(&["docs"]);
        store
            .put(
                &docs,
                "cats",
                json!({"text": "cats purr and nap in the sun"}),
            )
            .await?;
        store
            .put(
                &docs,
                "rust",
                json!({"text": "rust borrow checker lifetimes"}),
            )
            .await?;
        store
            .put(
                &docs,
                "soup",
                json!({"text": "tomato soup recipe with basil"}),
            )
            .await?;
        store
            .put_with(
                &docs,
                "hidden",
                json!({"text": "rust"}),
                Index::Off,
                Ttl::Default,
            )
            .await?;
    }
    let store = SqliteStore::from_path(&path, config()).await?;
    let found = store
        .search(
            SearchOp::new(ns(&["docs"]))
                .query("rust lifetimes")
                .limit(10),
        )
        .await?;
    assert_eq!(found.first().map(|i| i.key.as_str()), Some("rust"));
    assert!(found.iter().all(|i| i.score.is_some()));
    assert!(!keys(&found).contains(&String::from("hidden")));
    assert_eq!(found.len(), 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_has_langgraph_tables_and_versions() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    store
        .put(ns(&["a", "b"]), "k", json!({"x": [1, 2.5, "y"]}))
        .await?;
    // Reopening runs the migrations again: nothing changes.
    drop(store);
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    drop(store);

    let conn = Connection::open(&path)?;
    let versions: Vec<i64> = query_column(&conn, "SELECT v FROM store_migrations ORDER BY v")?;
    assert_eq!(versions, [0, 1, 2, 3, 4]);
    let ours: Vec<i64> = query_column(&conn, "SELECT v FROM waypoint_store_migrations ORDER BY v")?;
    assert_eq!(ours, [1, 2, 3, 4]);
    let columns: Vec<String> = query_column(
        &conn,
        "SELECT name FROM pragma_table_info('store') ORDER BY cid",
    )?;
    assert_eq!(
        columns,
        [
            "prefix",
            "key",
            "value",
            "created_at",
            "updated_at",
            "expires_at",
            "ttl_minutes"
        ]
    );
    let indexes: Vec<String> = query_column(
        &conn,
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'store' AND sql IS NOT NULL ORDER BY name",
    )?;
    assert_eq!(
        indexes,
        [
            "idx_store_expires_at",
            "store_prefix_idx",
            "waypoint_store_prefix_updated_idx",
            "waypoint_store_updated_at_idx",
        ]
    );
    let vector_columns: Vec<String> = query_column(
        &conn,
        "SELECT name FROM pragma_table_info('waypoint_store_vectors') ORDER BY cid",
    )?;
    assert_eq!(vector_columns, ["prefix", "key", "field_name", "embedding"]);
    let log_columns: Vec<String> = query_column(
        &conn,
        "SELECT name FROM pragma_table_info('waypoint_store_changes') ORDER BY cid",
    )?;
    assert_eq!(log_columns, ["seq", "prefix", "key", "changed_at"]);
    assert!(
        query_column::<String>(
            &conn,
            "SELECT name FROM sqlite_master WHERE name = 'waypoint_migrations'"
        )?
        .is_empty(),
        "the checkpointer's migration table is not ours to create"
    );

    // The row as LangGraph lays it out: dot-joined prefix, compact JSON, UTC text timestamps.
    let (prefix, value, created, updated, expires): (
        String,
        String,
        String,
        String,
        Option<String>,
    ) = conn.query_row(
        "SELECT prefix, value, created_at, updated_at, expires_at FROM store",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )?;
    assert_eq!(prefix, "a.b");
    assert_eq!(value, r#"{"x":[1,2.5,"y"]}"#);
    assert_eq!(created, updated);
    assert_eq!(created.len(), "2024-01-01 00:00:00.000000+00:00".len());
    assert!(created.ends_with("+00:00") && created.as_bytes()[19] == b'.');
    assert_eq!(expires, None);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_is_stored_as_minutes_and_expiry_text() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    store
        .put_with(
            ns(&["t"]),
            "k",
            json!({}),
            Index::Default,
            Ttl::Minutes(1.5),
        )
        .await?;
    let item = store.get(ns(&["t"]), "k").await?.ok_or("missing")?;
    let conn = Connection::open(&path)?;
    let (ttl, expires): (f64, String) =
        conn.query_row("SELECT ttl_minutes, expires_at FROM store", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    assert_eq!(ttl, 1.5);
    // The get refreshed the TTL: expiry is 90 s after a read at or after the update.
    let expires = chrono::DateTime::parse_from_str(&expires, "%Y-%m-%d %H:%M:%S%.f%:z")?;
    let lifetime = expires.to_utc() - item.updated_at;
    assert!(lifetime >= chrono::Duration::seconds(90), "{lifetime}");
    assert!(lifetime < chrono::Duration::seconds(100), "{lifetime}");
    Ok(())
}

/// A search under a namespace with namespaces below it lists newest update first, then by
/// namespace and key, whether the scan merges the namespaces' own ordered rows (a few of
/// them) or sorts them all (many); the rows of one batch share their update time, so the
/// namespace and key orders are exercised too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_under_nested_namespaces_keeps_the_scan_order() -> TestResult {
    for namespaces in [3usize, 70] {
        let store = in_memory(StoreConfig::new()).await?;
        let below = |n: usize| ns(&["root", &format!("n{n:02}")]);
        let value = |n: usize| json!({"n": n}).as_object().cloned().unwrap_or_default();
        let mut ops = vec![Op::Put(PutOp::new(ns(&["root"]), "top", value(0)))];
        for n in (0..namespaces).rev() {
            for key in ["b", "a"] {
                ops.push(Op::Put(PutOp::new(below(n), key, value(n))));
            }
        }
        store.batch(ops).await?;
        for n in (0..namespaces).step_by(2) {
            store.put(below(n), "late", json!({"n": n})).await?;
        }
        // Outside the prefix on both sides of its range.
        store.put(ns(&["roos"]), "x", json!({})).await?;
        store.put(ns(&["root0"]), "x", json!({})).await?;
        let found = store.search(SearchOp::new(["root"]).limit(1000)).await?;
        assert_eq!(found.len(), 1 + 2 * namespaces + namespaces.div_ceil(2));
        let mut expected = found.clone();
        expected.sort_by(|a, b| {
            (b.updated_at.cmp(&a.updated_at))
                .then_with(|| a.namespace.joined().cmp(&b.namespace.joined()))
                .then_with(|| a.key.cmp(&b.key))
        });
        let order = |items: &[waypoint_store::SearchItem]| -> Vec<(String, String)> {
            items
                .iter()
                .map(|i| (i.namespace.joined(), i.key.clone()))
                .collect()
        };
        assert_eq!(order(&found), order(&expected), "{namespaces} namespaces");
        // A page further on starts where the first left off.
        let page = store
            .search(SearchOp::new(["root"]).limit(5).offset(3))
            .await?;
        assert_eq!(order(&page), order(&found[3..8]), "{namespaces} namespaces");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_values_are_reported_not_panicked() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    store.put(ns(&["c"]), "array", json!({"v": 1})).await?;
    store.put(ns(&["c"]), "garbage", json!({"v": 1})).await?;
    store.put(ns(&["c"]), "stamp", json!({"v": 1})).await?;
    let conn = Connection::open(&path)?;
    conn.execute("UPDATE store SET value = '[1, 2]' WHERE key = 'array'", [])?;
    conn.execute(
        "UPDATE store SET value = 'not json' WHERE key = 'garbage'",
        [],
    )?;
    conn.execute(
        "UPDATE store SET created_at = 'yesterday' WHERE key = 'stamp'",
        [],
    )?;
    for key in ["array", "garbage", "stamp"] {
        let err = store.get(ns(&["c"]), key).await.unwrap_err();
        assert!(matches!(err, Error::Corrupt(_)), "{key}: {err:?}");
    }
    let err = store.search(SearchOp::new(ns(&["c"]))).await.unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_vector_blob_is_reported_at_open() -> TestResult {
    let (_dir, path) = temp_db()?;
    let config = || StoreConfig::new().index(IndexConfig::hashing(64));
    let store = SqliteStore::from_path(&path, config()).await?;
    store.put(ns(&["v"]), "k", json!({"text": "hello"})).await?;
    drop(store);
    let conn = Connection::open(&path)?;
    let changed = conn.execute(
        "UPDATE waypoint_store_vectors SET embedding = x'0000803f00'",
        [],
    )?;
    assert_eq!(changed, 1);
    drop(conn);
    let err = SqliteStore::from_path(&path, config()).await.unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_write_leaves_nothing_behind() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    store.put(ns(&["w"]), "old", json!({"v": 1})).await?;
    let conn = Connection::open(&path)?;
    conn.execute_batch(
        "CREATE TRIGGER refuse_boom BEFORE INSERT ON store WHEN NEW.key = 'boom'
         BEGIN SELECT RAISE(ABORT, 'boom refused'); END;",
    )?;
    let obj = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    let err = store
        .batch(vec![
            Op::Put(PutOp::new(ns(&["w"]), "first", obj(json!({"v": 2})))),
            Op::Put(PutOp::new(ns(&["w"]), "old", obj(json!({"v": 3})))),
            Op::Put(PutOp::delete(ns(&["w"]), "old")),
            Op::Put(PutOp::new(ns(&["w"]), "boom", obj(json!({"v": 4})))),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Backend {
                backend: "sqlite",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(store.get(ns(&["w"]), "first").await?.is_none());
    let old = store
        .get(ns(&["w"]), "old")
        .await?
        .ok_or("old was deleted")?;
    assert_eq!(old.value["v"], 1);
    let count: i64 = conn.query_row("SELECT COUNT(*) FROM store", [], |r| r.get(0))?;
    assert_eq!(count, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_vector_write_rolls_back_the_item() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store =
        SqliteStore::from_path(&path, StoreConfig::new().index(IndexConfig::hashing(64))).await?;
    store
        .put(ns(&["w"]), "kept", json!({"text": "before"}))
        .await?;
    let conn = Connection::open(&path)?;
    conn.execute_batch(
        "CREATE TRIGGER refuse_vectors BEFORE INSERT ON waypoint_store_vectors
         WHEN NEW.key = 'boom' BEGIN SELECT RAISE(ABORT, 'no vectors'); END;",
    )?;
    let err = store
        .put(ns(&["w"]), "boom", json!({"text": "never stored"}))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    assert!(store.get(ns(&["w"]), "boom").await?.is_none());
    let vectors: i64 = conn.query_row(
        "SELECT COUNT(*) FROM waypoint_store_vectors WHERE key = 'boom'",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(vectors, 0);
    // The index did not take the failed put either.
    let found = store
        .search(SearchOp::new(ns(&["w"])).query("never stored"))
        .await?;
    assert_eq!(keys(&found), ["kept"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_metacharacters_and_newlines_are_literal() -> TestResult {
    let store = in_memory(StoreConfig::new()).await?;
    let labels = ["a_b", "a%b", "a*", "a?", "[a]", "a\n", "a"];
    for label in labels {
        store
            .put(ns(&["root", label]), "literal", json!({}))
            .await?;
        store
            .put(ns(&["root", label, "child"]), "child", json!({}))
            .await?;
    }
    for decoy in ["axb", "aXXb", "ab", "a!", "b", "a\nb", "a-b"] {
        store.put(ns(&["root", decoy]), "decoy", json!({})).await?;
    }
    for label in labels {
        let found = store
            .search(SearchOp::new(ns(&["root", label])).limit(100))
            .await?;
        let mut got: Vec<(Vec<String>, String)> = found
            .iter()
            .map(|i| (i.namespace.labels().to_vec(), i.key.clone()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                (
                    vec!["root".to_owned(), label.to_string()],
                    "literal".to_owned()
                ),
                (
                    vec!["root".to_owned(), label.to_string(), "child".to_owned()],
                    "child".to_owned()
                ),
            ],
            "prefix {label:?}"
        );
    }
    let all = store
        .search(SearchOp::new(Namespace::root()).limit(1000))
        .await?;
    assert_eq!(all.len(), labels.len() * 2 + 7);
    let listed = store
        .list_namespaces(ListNamespacesOp::new().prefix(["root", "a\n"]))
        .await?;
    assert_eq!(
        listed,
        [ns(&["root", "a\n"]), ns(&["root", "a\n", "child"])]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urls_open_files_and_memory() -> TestResult {
    let (dir, _) = temp_db()?;
    let plain = dir.path().join("plain.db");
    let slashed = dir.path().join("slashed.db");
    let urls = [
        String::from("sqlite::memory:"),
        format!("sqlite:{}", plain.display()),
        format!("sqlite://{}", slashed.display()),
    ];
    for url in &urls {
        let store = SqliteStore::from_url(url, StoreConfig::new()).await?;
        store.put(ns(&["u"]), "k", json!({"url": url})).await?;
        assert!(store.get(ns(&["u"]), "k").await?.is_some(), "{url}");
    }
    assert!(plain.exists() && slashed.exists());
    let err = SqliteStore::from_url("postgres://x", StoreConfig::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)));
    Ok(())
}

/// Opening `path` fails with one clear line about a `store` table that is not Waypoint's or
/// LangGraph's, and leaves the file byte for byte as it was, with no WAL beside it.
async fn refused_untouched(path: &std::path::Path) -> TestResult {
    let before = std::fs::read(path)?;
    for attempt in [
        SqliteStore::from_path(path, StoreConfig::new()).await,
        SqliteStore::from_url(&format!("sqlite:{}", path.display()), StoreConfig::new()).await,
    ] {
        let Err(Error::InvalidConfig(message)) = attempt else {
            return Err(format!("expected a refusal, got {attempt:?}").into());
        };
        assert!(!message.contains('\n'), "{message}");
        assert!(message.contains("`store` table"), "{message}");
        assert!(
            message.contains("neither Waypoint nor LangGraph"),
            "{message}"
        );
    }
    assert_eq!(std::fs::read(path)?, before, "the file changed");
    let wal = path.with_extension("db-wal");
    assert!(!wal.exists(), "a WAL appeared beside the file");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_table_another_program_made_is_refused_untouched() -> TestResult {
    // Another program's `store` table, nothing like LangGraph's.
    let (_dir, path) = temp_db()?;
    let conn = Connection::open(&path)?;
    conn.execute_batch(
        "CREATE TABLE store (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL);
         INSERT INTO store (name, price) VALUES ('lamp', 19.5), ('desk', 120);",
    )?;
    drop(conn);
    refused_untouched(&path).await?;
    let conn = Connection::open(&path)?;
    let tables: Vec<String> =
        query_column(&conn, "SELECT name FROM sqlite_master WHERE type = 'table'")?;
    assert_eq!(tables, ["store"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookalike_store_table_is_refused_untouched() -> TestResult {
    // LangGraph's columns but no `store_migrations`; then with its migrations table but an
    // extra column and another key: made by neither library.
    for sql in [
        "CREATE TABLE store (prefix text NOT NULL, key text NOT NULL, value text NOT NULL,
            created_at TIMESTAMP, updated_at TIMESTAMP, PRIMARY KEY (prefix, key));",
        "CREATE TABLE store_migrations (v INTEGER PRIMARY KEY);
         INSERT INTO store_migrations (v) VALUES (0);
         CREATE TABLE store (prefix text NOT NULL, key text NOT NULL, value text NOT NULL,
            created_at TIMESTAMP, updated_at TIMESTAMP, owner TEXT, PRIMARY KEY (key));",
    ] {
        let (_dir, path) = temp_db()?;
        let conn = Connection::open(&path)?;
        conn.execute_batch(sql)?;
        conn.execute(
            "INSERT INTO store (prefix, key, value) VALUES ('a', 'k', '{}')",
            [],
        )?;
        drop(conn);
        refused_untouched(&path).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_a_database_is_a_backend_error() -> TestResult {
    let (_dir, path) = temp_db()?;
    std::fs::write(&path, vec![7u8; 8192])?;
    let err = SqliteStore::from_path(&path, StoreConfig::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Backend {
                backend: "sqlite",
                ..
            }
        ),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_a_database_written_by_langgraph() -> TestResult {
    let (_dir, path) = temp_db()?;
    // What LangGraph's SqliteStore leaves behind: its migrations only, second-resolution
    // naive timestamps from CURRENT_TIMESTAMP, a space-separated JSON dump.
    let conn = Connection::open(&path)?;
    conn.execute_batch(
        "CREATE TABLE store_migrations (v INTEGER PRIMARY KEY);
         CREATE TABLE store (prefix text NOT NULL, key text NOT NULL, value text NOT NULL,
             created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
             updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (prefix, key));
         CREATE INDEX store_prefix_idx ON store (prefix);
         ALTER TABLE store ADD COLUMN expires_at TIMESTAMP;
         ALTER TABLE store ADD COLUMN ttl_minutes REAL;
         CREATE INDEX idx_store_expires_at ON store (expires_at) WHERE expires_at IS NOT NULL;
         INSERT INTO store_migrations (v) VALUES (0), (1), (2), (3), (4);
         INSERT INTO store (prefix, key, value, created_at, updated_at)
             VALUES ('users.alice', 'prefs', '{\"theme\": \"dark\"}',
                     '2024-05-01 10:20:30', '2024-05-02 11:00:00');",
    )?;
    drop(conn);
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    let item = store
        .get(ns(&["users", "alice"]), "prefs")
        .await?
        .ok_or("missing")?;
    assert_eq!(item.value["theme"], "dark");
    assert_eq!(item.created_at.to_rfc3339(), "2024-05-01T10:20:30+00:00");
    assert_eq!(item.updated_at.to_rfc3339(), "2024-05-02T11:00:00+00:00");
    // An update keeps LangGraph's created_at and orders after it.
    store
        .put(ns(&["users", "alice"]), "prefs", json!({"theme": "light"}))
        .await?;
    let item = store
        .get(ns(&["users", "alice"]), "prefs")
        .await?
        .ok_or("missing")?;
    assert_eq!(item.created_at.to_rfc3339(), "2024-05-01T10:20:30+00:00");
    assert!(item.updated_at > item.created_at);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reput_after_expiry_starts_a_new_item() -> TestResult {
    let store = in_memory(StoreConfig::new()).await?;
    let n = ns(&["e"]);
    store
        .put_with(
            &n,
            "k",
            json!({"v": 1}),
            Index::Default,
            Ttl::Minutes(0.2 / 60.0),
        )
        .await?;
    let first = store.get(&n, "k").await?.ok_or("missing")?;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    store.put(&n, "k", json!({"v": 2})).await?;
    let second = store.get(&n, "k").await?.ok_or("missing")?;
    assert!(second.created_at > first.created_at);
    assert_eq!(second.created_at, second.updated_at);
    Ok(())
}

/// Current-thread runtimes run SQLite on the blocking pool; scans stream through a channel.
#[tokio::test(flavor = "current_thread")]
async fn current_thread_runtime_streams_scans() -> TestResult {
    let (_dir, path) = temp_db()?;
    for store in [
        SqliteStore::from_path(&path, StoreConfig::new()).await?,
        in_memory(StoreConfig::new()).await?,
    ] {
        let n = ns(&["ct"]);
        let ops = (0..300)
            .map(|i| {
                let value = json!({"i": i}).as_object().cloned().unwrap_or_default();
                Op::Put(PutOp::new(&n, format!("k{i:03}"), value))
            })
            .collect();
        store.batch(ops).await?;
        // One batch shares one timestamp: ties come back by key.
        let page = store.search(SearchOp::new(&n).limit(5).offset(10)).await?;
        assert_eq!(keys(&page), ["k010", "k011", "k012", "k013", "k014"]);
        let filtered = store
            .search(
                SearchOp::new(&n)
                    .filter(json!({"i": {"$gte": 295}}))
                    .limit(100),
            )
            .await?;
        assert_eq!(filtered.len(), 5);
        // The store is usable right after a scan stopped early.
        store.put(&n, "after", json!({})).await?;
        let newest = store.search(SearchOp::new(&n).limit(1)).await?;
        assert_eq!(keys(&newest), ["after"]);
        store.put(ns(&["other"]), "x", json!({})).await?;
    }
    Ok(())
}

/// Outside any runtime (a plain executor), operations run directly on the caller's thread.
#[test]
fn works_outside_a_tokio_runtime() -> TestResult {
    futures::executor::block_on(async {
        let store = in_memory(StoreConfig::new()).await?;
        store.put(ns(&["plain"]), "k", json!({"v": 1})).await?;
        let found = store.search(SearchOp::new(ns(&["plain"]))).await?;
        assert_eq!(keys(&found), ["k"]);
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_and_readers_share_a_file() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    // A second store on the same file, as another process would open it.
    let other = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    let mut tasks = Vec::new();
    for t in 0..8 {
        let store = if t % 2 == 0 {
            store.clone()
        } else {
            other.clone()
        };
        tasks.push(tokio::spawn(async move {
            let n = ns(&["conc", &format!("t{t}")]);
            for i in 0..50 {
                store.put(&n, &format!("k{i}"), json!({"i": i})).await?;
                let seen = store.search(SearchOp::new(&n).limit(1000)).await?;
                assert_eq!(seen.len(), i + 1);
            }
            Ok::<(), Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let all = store
        .search(SearchOp::new(ns(&["conc"])).limit(1000))
        .await?;
    assert_eq!(all.len(), 400);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_behind_a_trimmed_change_log_reloads_its_index() -> TestResult {
    let (_dir, path) = temp_db()?;
    let indexed = || StoreConfig::new().index(IndexConfig::hashing(32));
    let a = SqliteStore::from_path(&path, indexed()).await?;
    let b = SqliteStore::from_path(&path, indexed()).await?;
    let n = ns(&["docs"]);
    let search = |store: SqliteStore| {
        let n = n.clone();
        async move {
            let hits = store
                .search(SearchOp::new(&n).query("ramen").limit(10))
                .await?;
            Ok::<_, Error>(keys(&hits))
        }
    };
    assert!(search(b.clone()).await?.is_empty());
    a.put(&n, "late", json!({"text": "spicy ramen"})).await?;
    // The entry ages past what the log keeps; A's sweep trims it before B reads it.
    let conn = Connection::open(&path)?;
    let seq: i64 = conn.query_row("SELECT max(seq) FROM waypoint_store_changes", [], |r| {
        r.get(0)
    })?;
    conn.execute(
        "UPDATE waypoint_store_changes SET changed_at = '2000-01-01 00:00:00.000000+00:00'",
        [],
    )?;
    a.sweep_expired().await?;
    let left: i64 = conn.query_row("SELECT count(*) FROM waypoint_store_changes", [], |r| {
        r.get(0)
    })?;
    let through: i64 = conn.query_row(
        "SELECT through_seq FROM waypoint_store_changes_trimmed",
        [],
        |r| r.get(0),
    )?;
    assert_eq!((left, through), (0, seq));
    // B cannot replay what was trimmed: it reloads every vector and finds the item.
    assert_eq!(search(b.clone()).await?, ["late"]);
    // And follows the log again from there.
    a.delete(&n, "late").await?;
    a.put(&n, "next", json!({"text": "ramen again"})).await?;
    assert_eq!(search(b).await?, ["next"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_removes_rows_and_vectors() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store =
        SqliteStore::from_path(&path, StoreConfig::new().index(IndexConfig::hashing(64))).await?;
    let n = ns(&["s"]);
    store
        .put_with(
            &n,
            "gone",
            json!({"text": "a"}),
            Index::Default,
            Ttl::Minutes(0.1 / 60.0),
        )
        .await?;
    store.put(&n, "kept", json!({"text": "b"})).await?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(store.sweep_expired().await?, 1);
    let conn = Connection::open(&path)?;
    let rows: Vec<String> = query_column(&conn, "SELECT key FROM store")?;
    let vectors: Vec<String> = query_column(&conn, "SELECT key FROM waypoint_store_vectors")?;
    assert_eq!(rows, ["kept"]);
    assert_eq!(vectors, ["kept"]);
    store.delete(&n, "kept").await?;
    let vectors: Vec<String> = query_column(&conn, "SELECT key FROM waypoint_store_vectors")?;
    assert!(vectors.is_empty());
    Ok(())
}

/// Throughput on a file database, best of three rounds (shared machines are noisy); run with
/// `cargo test --release -p waypoint-checkpoint-sqlite --test store -- --ignored put_throughput --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, run in release mode"]
async fn put_throughput() -> TestResult {
    let (_dir, path) = temp_db()?;
    let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
    let value = json!({"text": "a memory of moderate length", "n": 1, "tags": ["a", "b"]});
    let value = value.as_object().cloned().unwrap_or_default();
    let (singles, batches, gets, searches) = (5_000u32, 500u32, 5_000u32, 2_000u32);
    let mut best = [0f64; 4];
    for round in 0..3 {
        let start = Instant::now();
        for i in 0..singles {
            let key = format!("r{round}-k{i}");
            let op = Op::Put(PutOp::new(ns(&["bench", "single"]), key, value.clone()));
            store.batch(vec![op]).await?;
        }
        best[0] = best[0].max(f64::from(singles) / start.elapsed().as_secs_f64());

        let start = Instant::now();
        for b in 0..batches {
            let ops = (0..100)
                .map(|i| {
                    let key = format!("r{round}-b{b}-{i}");
                    Op::Put(PutOp::new(ns(&["bench", "batch"]), key, value.clone()))
                })
                .collect();
            store.batch(ops).await?;
        }
        best[1] = best[1].max(f64::from(batches * 100) / start.elapsed().as_secs_f64());

        let start = Instant::now();
        for i in 0..gets {
            store
                .get(ns(&["bench", "single"]), &format!("r{round}-k{i}"))
                .await?;
        }
        best[2] = best[2].max(f64::from(gets) / start.elapsed().as_secs_f64());

        let start = Instant::now();
        for _ in 0..searches {
            store
                .search(SearchOp::new(ns(&["bench", "batch"])).limit(10))
                .await?;
        }
        best[3] = best[3].max(f64::from(searches) / start.elapsed().as_secs_f64());
    }
    println!("single put (1 put per batch): {:.0} puts/s", best[0]);
    println!("batch put (100 puts per batch): {:.0} items/s", best[1]);
    println!("single get: {:.0} gets/s", best[2]);
    println!(
        "search (one namespace of 50-150k items, limit 10): {:.0} searches/s",
        best[3]
    );
    Ok(())
}

/// Entry point of the child processes of `two_processes_open_and_write_one_new_file`; a no-op
/// unless `WAYPOINT_STORE_CHILD_DB` is set.
#[test]
#[ignore = "run as a child process by the test below"]
fn child() -> TestResult {
    let (Ok(path), Ok(me)) = (
        std::env::var("WAYPOINT_STORE_CHILD_DB"),
        std::env::var("WAYPOINT_STORE_CHILD_NAME"),
    ) else {
        return Ok(());
    };
    // Both children open the file at the same instant, the parent's `start`.
    let start: u128 = std::env::var("WAYPOINT_STORE_CHILD_START")?.parse()?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    if let Some(wait) = start.checked_sub(now.as_micros()) {
        std::thread::sleep(std::time::Duration::from_micros(wait.try_into()?));
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
        for i in 0..CHILD_PUTS {
            store
                .put(ns(&["p", &me]), &format!("k{i}"), json!({ "i": i }))
                .await?;
        }
        Ok(())
    })
}

/// Items each child process puts.
const CHILD_PUTS: usize = 200;

#[tokio::test]
async fn two_processes_open_and_write_one_new_file() -> TestResult {
    // Opening races on the switch to WAL. In a release build this failed every round before
    // the switch was retried; debug builds overlap the two opens less often.
    for round in 0..8 {
        let (_dir, path) = temp_db()?;
        let start = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?
            + std::time::Duration::from_millis(300);
        // Both are spawned before either is waited on, so they open the file together.
        let spawned = ["a", "b"]
            .iter()
            .map(|me| {
                std::process::Command::new(std::env::current_exe()?)
                    .args(["child", "--exact", "--ignored", "--nocapture"])
                    .env("WAYPOINT_STORE_CHILD_DB", &path)
                    .env("WAYPOINT_STORE_CHILD_NAME", me)
                    .env("WAYPOINT_STORE_CHILD_START", start.as_micros().to_string())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        for child in spawned {
            let out = child.wait_with_output()?;
            assert!(
                out.status.success(),
                "round {round}: a child failed:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        let store = SqliteStore::from_path(&path, StoreConfig::new()).await?;
        for me in ["a", "b"] {
            let items = store
                .search(SearchOp::new(ns(&["p", me])).limit(CHILD_PUTS + 1))
                .await?;
            assert_eq!(items.len(), CHILD_PUTS, "round {round}, child {me}");
        }
    }
    Ok(())
}
