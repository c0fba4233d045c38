//! The long-term memory store of Waypoint: JSON documents in hierarchical namespaces, with
//! filters, TTL and semantic search over an in-process vector index.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use serde_json::json;
//! use waypoint_store::{IndexConfig, InMemoryStore, SearchOp, StoreConfig, StoreExt};
//!
//! let store = InMemoryStore::with_config(StoreConfig::new().index(IndexConfig::hashing(64)))?;
//! store.put(["users", "alice"], "food", json!({"text": "likes spicy ramen"})).await?;
//! store.put(["users", "alice"], "pets", json!({"text": "has a cat named Miso"})).await?;
//! let hits = store.search(SearchOp::new(["users", "alice"]).query("cat").limit(1)).await?;
//! assert_eq!(hits[0].key, "pets");
//! # Ok::<_, waypoint_store::Error>(()) }).unwrap();
//! ```
//!
//! Every backend runs the same engine: batches read before they write and apply atomically,
//! namespaces are validated on every operation, filters compare numbers as numbers, expired
//! items are never returned, and semantic search is served by an in-process index (exact for
//! small collections, HNSW above) fed from vectors the backend persists.
//!
//! | backend | feature | storage |
//! |---|---|---|
//! | [`InMemoryStore`] | always | process memory |
//! | `SqliteStore` | `sqlite` | LangGraph's `store` table in a SQLite file, vectors as BLOBs |
//! | `PostgresStore` | `postgres` | LangGraph's `store` table (shared with Python), vectors as BYTEA, a change log for other processes |
//! | `RedisStore` | `redis` | plain Redis 7: a hash per item, sorted sets per namespace, vectors in hashes |
//!
//! | feature | enables |
//! |---|---|
//! | `hnsw` (default) | the HNSW graph (hnsw_rs); without it every semantic search is exact |
//! | `sqlite`, `postgres`, `redis` | the backends above |
//! | `openai` | `OpenAiEmbedder`: embeddings from an OpenAI-compatible endpoint (pulls in reqwest and rustls) |
//! | `conformance` | the `conformance` module: the suite every backend runs |

mod config;
mod connect;
pub mod embed;
mod engine;
mod error;
mod filter;
pub mod index;
mod memory;
mod path;
pub mod raw;
mod store;
mod types;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(feature = "redis")]
pub use crate::redis::{PersistenceCheck, RedisStore, RedisStoreConfig};
pub use config::{AnnConfig, Distance, IndexConfig, StoreConfig, TtlConfig};
pub use connect::connect;
pub use embed::{Embedder, HashingEmbedder};
#[cfg(feature = "openai")]
pub use embed::{OpenAiConfig, OpenAiEmbedder};
pub use error::{BoxError, Error, Result};
pub use memory::InMemoryStore;
pub use path::get_text_at_path;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, PostgresStoreConfig};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{Store, StoreExt, SweeperHandle};
pub use types::{
    GetOp, Index, Item, ItemKey, ListNamespacesOp, Namespace, Object, Op, OpResult, PutOp,
    SearchItem, SearchOp, Ttl, WILDCARD,
};
