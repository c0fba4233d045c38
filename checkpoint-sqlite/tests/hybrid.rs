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
