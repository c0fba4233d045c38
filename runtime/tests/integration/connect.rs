//! `connect(url)` on every backend: one call gives a working checkpointer and store, on one
//! pool, and follows the one setup rule.

use serde_json::json;
use waypoint_checkpoint::{CheckpointConfig, CheckpointMetadata, CheckpointSource};
use waypoint_runtime::checkpoint::{Checkpoint, CheckpointSaver};
use waypoint_runtime::connect::Backend;
use waypoint_runtime::{Connect, Connection, Error, StoreExt, connect};

/// Puts a checkpoint and an item through `connection` and reads both back.
async fn round_trip(connection: &Connection) {
    let saver = &connection.checkpointer;
    let config = CheckpointConfig::new(waypoint_test_kit::fresh_name("thread"));
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let saved = saver
        .put(&config, Checkpoint::new(-1), meta, Default::default())
        .await
        .unwrap();
    let tuple = saver.get_tuple(&saved).await.unwrap().expect("stored");
    assert_eq!(tuple.config.checkpoint_id, saved.checkpoint_id);

    let namespace = ["users", &waypoint_test_kit::fresh_name("u")];
    let store = &connection.store;
    store.put(namespace, "k", json!({"a": 1})).await.unwrap();
    let item = store.get(namespace, "k").await.unwrap().expect("stored");
    assert_eq!(item.value["a"], 1);
}

#[tokio::test]
async fn sqlite_urls_open_a_saver_and_a_store_on_one_file() {
    let dir = waypoint_test_kit::kept_temp_dir().unwrap();
    let url = format!("sqlite:{}", dir.join("w.db").display());
    // A missing file is refused when creating is off, and nothing is created.
    let err = Connect::new(&url).create(false).open().await.unwrap_err();
    assert!(err.to_string().contains("no SQLite database"), "{err}");
    assert!(!dir.join("w.db").exists());

    let connection = connect(&url).await.unwrap();
    assert_eq!(connection.backend, Backend::Sqlite);
    round_trip(&connection).await;
    drop(connection);
    // Now it exists; opening it without setup reads what was written.
    let again = Connect::new(&url)
        .create(false)
        .auto_setup(false)
        .open()
        .await
        .unwrap();
    round_trip(&again).await;
    round_trip(&connect("sqlite::memory:").await.unwrap()).await;
}

#[tokio::test]
async fn postgres_urls_open_a_saver_and_a_store_on_one_pool() {
    let Some(server) = waypoint_test_kit::postgres_url() else {
        return;
    };
    let name = waypoint_test_kit::fresh_name("wp_connect");
    create_database(&server, &name).await;
    let url = waypoint_test_kit::database_url(&server, &name);

    // Without setup nothing is created, so the saver finds no tables.
    let bare = Connect::new(&url).auto_setup(false).open().await.unwrap();
    let config = CheckpointConfig::new("t");
    assert!(bare.checkpointer.get_tuple(&config).await.is_err());
    drop(bare);

    let connection = connect(&url).await.unwrap();
    assert_eq!(connection.backend, Backend::Postgres);
    round_trip(&connection).await;
}

#[tokio::test]
async fn redis_urls_open_a_saver_and_a_store() {
    let Some(url) = waypoint_test_kit::redis_url() else {
        return;
    };
    let connection = connect(&url).await.unwrap();
    assert_eq!(connection.backend, Backend::Redis);
    round_trip(&connection).await;
}

#[tokio::test]
async fn unreachable_servers_name_their_address_within_the_timeout() {
    for url in [
        "postgres://me:secret@127.0.0.1:1/db",
        "redis://127.0.0.1:1/",
    ] {
        let start = std::time::Instant::now();
        let err = connect(url).await.unwrap_err();
        assert!(matches!(err, Error::Connect { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("127.0.0.1:1"), "{text}");
        assert!(!text.contains("secret"), "{text}");
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
    }
}

/// Creates the database `name` on `server`.
async fn create_database(server: &str, name: &str) {
    let pool = sqlx::PgPool::connect(server).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}
