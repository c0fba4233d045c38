//! Hybrid search on a reopened SQLite file: the lexical index is rebuilt at open from the
//! stored items, so what was found before a restart is found after it.
#![cfg(feature = "store")]

use std::sync::Arc;

use serde_json::json;
use waypoint_checkpoint_sqlite::SqliteStore;
use waypoint_store::conformance::ConceptEmbedder;
use waypoint_store::{
    BoxError, Index, IndexConfig, SearchMode, SearchOp, StoreConfig, StoreExt, Ttl,
};

fn config() -> StoreConfig {
    let index = IndexConfig::new(Arc::new(ConceptEmbedder))
        .fields(["text", "tags[*]"])
        .lexical(true);
    StoreConfig::new().index(index)
}

#[tokio::test]
async fn lexical_index_survives_reopen() -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store.db");
    {
        let store = SqliteStore::from_path(&path, config()).await?;
        store
            .put(
                ["ns"],
                "incident",
                json!({"text": "deploy failed", "tags": ["ERR-4471-ZQ", "pager"]}),
            )
            .await?;
        store
            .put(
                ["ns"],
                "hiking",
                json!({"text": "I love trekking in the Alps"}),
            )
            .await?;
        store
            .put_with(
                ["ns"],
                "off",
                json!({"text": "ERR-4471-ZQ"}),
                Index::Off,
                Ttl::Default,
            )
            .await?;
        store
            .put_with(
                ["ns"],
                "fields",
                json!({"text": "nothing", "other": "ERR-4471-ZQ"}),
                Index::Fields(vec![String::from("other")]),
                Ttl::Default,
            )
            .await?;
    }
    let store = SqliteStore::from_path(&path, config()).await?;
    let search = |mode, query: &str| SearchOp::new(["ns"]).query(query).mode(mode).limit(10);
    let lexical = store
        .search(search(SearchMode::Lexical, "err-4471-zq"))
        .await?;
    let mut keys: Vec<&str> = lexical.iter().map(|i| i.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["fields", "incident"]);
    let hybrid = store
        .search(search(SearchMode::Hybrid, "mountain hikes"))
        .await?;
    assert_eq!(hybrid[0].key, "hiking");
    Ok(())
}

/// The lexical rows (key rows) in the file at `path`.
fn lexical_rows(path: &std::path::Path) -> Result<i64, BoxError> {
    let conn = rusqlite::Connection::open(path)?;
    Ok(conn.query_row(
        "SELECT count(*) FROM waypoint_store_lexical_keys",
        [],
        |r| r.get(0),
    )?)
}

#[tokio::test]
async fn without_lexical_no_rows_are_written_and_reopening_with_it_backfills()
-> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store.db");
    let plain = || {
        let index = IndexConfig::new(Arc::new(ConceptEmbedder)).fields(["text", "tags[*]"]);
        StoreConfig::new().index(index)
    };
    {
        let store = SqliteStore::from_path(&path, plain()).await?;
        store
            .put(
                ["ns"],
                "incident",
                json!({"text": "deploy failed", "tags": ["ERR-4471-ZQ"]}),
            )
            .await?;
        store
            .put(
                ["ns"],
                "hiking",
                json!({"text": "I love trekking in the Alps"}),
            )
            .await?;
    }
    assert_eq!(lexical_rows(&path)?, 0);
    {
        let store = SqliteStore::from_path(&path, config()).await?;
        assert_eq!(lexical_rows(&path)?, 2);
        let found = store
            .search(
                SearchOp::new(["ns"])
                    .query("err-4471-zq")
                    .mode(SearchMode::Lexical),
            )
            .await?;
        let keys: Vec<&str> = found.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["incident"]);
    }
    // A rewrite while lexical is off drops the item's now stale texts; the next open with
    // lexical writes them from the new value.
    {
        let store = SqliteStore::from_path(&path, plain()).await?;
        store
            .put(
                ["ns"],
                "incident",
                json!({"text": "resolved", "tags": ["OK-1"]}),
            )
            .await?;
    }
    assert_eq!(lexical_rows(&path)?, 1);
    let store = SqliteStore::from_path(&path, config()).await?;
    assert_eq!(lexical_rows(&path)?, 2);
    let search = |q: &str| SearchOp::new(["ns"]).query(q).mode(SearchMode::Lexical);
    assert!(store.search(search("err-4471-zq")).await?.is_empty());
    let found = store.search(search("ok-1")).await?;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key, "incident");
    Ok(())
}
