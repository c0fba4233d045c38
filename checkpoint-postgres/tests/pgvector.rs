//! `PostgresStore` in pgvector mode on a live PostgreSQL with the extension
//! (`WAYPOINT_TEST_PGVECTOR_URL`): the whole store conformance suite, every store on its own
//! schema, vectors in LangGraph's `store_vectors` and searched by pgvector; and a server
//! without the extension refusing the mode clearly.
//!
//! Without the server the tests pass without running, unless `WAYPOINT_REQUIRE_BACKENDS=1`.

#![cfg(feature = "store")]

use waypoint_checkpoint_postgres::{PostgresConfig, PostgresStore};
use waypoint_store::{Error, IndexConfig, Result, SearchOp, StoreConfig};

/// Settings for a fresh schema of the pgvector server, in pgvector mode.
fn settings(url: &str) -> PostgresConfig {
    PostgresConfig::new(url)
        .schema(waypoint_test_kit::fresh_name("wp_pgvector"))
        .max_connections(4)
        .pgvector(true)
}

/// A store in pgvector mode on a fresh schema, set up on opening; `None` without a server.
async fn open(store: StoreConfig) -> Result<Option<PostgresStore>> {
    let Some(url) = waypoint_test_kit::pgvector_url() else {
        return Ok(None);
    };
    Ok(Some(PostgresStore::connect(settings(&url), store).await?))
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

/// The mode is spelled in the URL too, and an unknown spelling is refused.
#[test]
fn the_url_names_the_mode() {
    let on = PostgresConfig::from_url("postgres://u@localhost/db?store_vectors=pgvector");
    assert!(on.expect("valid").pgvector);
    let off = PostgresConfig::from_url("postgres://u@localhost/db?store_vectors=memory");
    assert!(!off.expect("valid").pgvector);
    let bad = PostgresConfig::from_url("postgres://u@localhost/db?store_vectors=faiss")
        .expect_err("an unknown mode");
    assert!(bad.to_string().contains("store_vectors"), "{bad}");
}

/// Vectors live in `store_vectors` with LangGraph's schema, dimensions and HNSW index, and
/// LangGraph's `vector_migrations` numbering; the process holds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_are_in_langgraphs_table() -> Result<()> {
    use waypoint_store::StoreExt;
    let Some(url) = waypoint_test_kit::pgvector_url() else {
        return Ok(());
    };
    let config = settings(&url);
    let schema = config.schema.clone().expect("schema");
    let store = PostgresStore::connect(
        config,
        StoreConfig::new().index(IndexConfig::hashing(16).fields(["text"])),
    )
    .await?;
    store
        .put(
            ["docs"],
            "a",
            serde_json::json!({"text": "apples and pears"}),
        )
        .await?;
    let pool = store.pool();
    let dims: i32 = sqlx::query_scalar(
        "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relname = 'store_vectors' AND a.attname = 'embedding'",
    )
    .bind(&schema)
    .fetch_one(pool)
    .await
    .expect("the column");
    assert_eq!(dims, 16);
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT v FROM \"{schema}\".vector_migrations ORDER BY v"
    ))
    .fetch_all(pool)
    .await
    .expect("versions");
    assert_eq!(versions, [0, 1, 2]);
    let index: String = sqlx::query_scalar(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'store_vectors_embedding_idx'",
    )
    .bind(&schema)
    .fetch_one(pool)
    .await
    .expect("the index");
    assert!(
        index.contains("hnsw") && index.contains("vector_cosine_ops"),
        "{index}"
    );
    let fields: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT field_name FROM \"{schema}\".store_vectors WHERE prefix = 'docs' AND key = 'a'"
    ))
    .fetch_all(pool)
    .await
    .expect("rows");
    assert_eq!(fields, ["text"]);
    let hits = store
        .search(SearchOp::new(["docs"]).query("apples").limit(1))
        .await?;
    assert_eq!(hits.len(), 1);
    Ok(())
}

/// Asking for pgvector on a server without the extension fails at opening, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_pgvector_is_a_clear_error() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    let available: bool = {
        let pool = sqlx::PgPool::connect(&url).await.expect("connect");
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
        )
        .fetch_one(&pool)
        .await
        .expect("query")
    };
    if available {
        return Ok(());
    }
    let config = PostgresConfig::new(url)
        .schema(waypoint_test_kit::fresh_name("wp_pgvector"))
        .pgvector(true);
    let err = PostgresStore::connect(config, StoreConfig::new().index(IndexConfig::hashing(8)))
        .await
        .expect_err("no extension");
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("pgvector")),
        "{err:?}"
    );
    Ok(())
}

/// A filter only one item in 50 passes still gets full pages: the HNSW scan goes on past the
/// rows the filter rejects (iterative scan), even with `hnsw.ef_search` far below what the
/// filter discards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selective_filters_still_fill_pages() -> Result<()> {
    use waypoint_store::{Op, PutOp, Store, StoreExt};
    let Some(url) = waypoint_test_kit::pgvector_url() else {
        return Ok(());
    };
    let store = PostgresStore::connect(
        settings(&url).pgvector_ef_search(10),
        StoreConfig::new().index(IndexConfig::hashing(16).fields(["text"])),
    )
    .await?;
    let ops: Vec<Op> = (0..2000)
        .map(|i| {
            let value =
                serde_json::json!({"text": format!("note {i} about apples"), "group": i % 50});
            Op::Put(PutOp::new(
                ["docs"],
                format!("k{i}"),
                value.as_object().cloned().unwrap_or_default(),
            ))
        })
        .collect();
    store.batch(ops).await?;
    for limit in [10, 40] {
        let hits = store
            .search(
                SearchOp::new(["docs"])
                    .query("apples")
                    .filter(serde_json::json!({"group": 7}))
                    .limit(limit),
            )
            .await?;
        assert_eq!(hits.len(), limit.min(40), "a full page of the 40 matches");
        assert!(
            hits.iter().all(|h| h.item.value["group"] == 7),
            "only matches"
        );
    }
    Ok(())
}
