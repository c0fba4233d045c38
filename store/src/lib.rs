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
//! namespaces are validated on every operation, filters compare numbers as numbers, a search
//! without a query returns the newest update first (as LangGraph's SQLite and PostgreSQL
//! stores do; its `InMemoryStore` returns insertion order, so a guide's `memories[-1]` is
//! `memories[0]` here), expired items are never returned, and semantic search is served by an in-process index (exact for
//! small collections, HNSW above) fed from vectors the backend persists.
//!
//! | backend | crate | storage |
//! |---|---|---|
//! | [`InMemoryStore`] | this one | process memory |
//! | `SqliteStore` | `waypoint-checkpoint-sqlite` | LangGraph's `store` table in a SQLite file, vectors as BLOBs |
//! | `PostgresStore` | `waypoint-checkpoint-postgres` | LangGraph's `store` table (shared with Python), vectors as BYTEA, a change log for other processes |
//! | `RedisStore` | `waypoint-checkpoint-redis` | plain Redis 7: a hash per item, sorted sets per namespace, vectors in hashes |
//!
//! Each database's store lives in its checkpointer's crate (feature `store`, on by default),
//! sharing the saver's pool, config, migrations and errors; `waypoint_runtime::connect(url)`
//! opens both from one URL. A new backend implements [`raw::Backend`] and runs
//! the `conformance` suite (feature `conformance`).
//!
//! | feature | enables |
//! |---|---|
//! | `hnsw` (default) | the HNSW graph (hnsw_rs); without it every semantic search is exact |
//! | `openai` | `OpenAiEmbedder`: embeddings from an OpenAI-compatible endpoint (pulls in reqwest and rustls) |
//! | `conformance` | the `conformance` module: the suite every backend runs |

mod config;
pub mod embed;
mod engine;
mod error;
mod filter;
pub mod index;
pub mod lexical;
mod memory;
mod path;
pub mod raw;
mod store;
mod types;

#[cfg(feature = "conformance")]
pub mod conformance;
/// The retrieval check: recall of an embedder on LangGraph's guides (feature `conformance`).
#[cfg(feature = "conformance")]
pub mod eval;

pub use config::{AnnConfig, Distance, IndexConfig, StoreConfig, TtlConfig};
pub use embed::{Embedder, HashingEmbedder};
#[cfg(feature = "openai")]
pub use embed::{OpenAiConfig, OpenAiEmbedder};
pub use error::{BoxError, Error, Result};
pub use memory::InMemoryStore;
pub use path::get_text_at_path;
pub use store::{Store, StoreExt, SweeperHandle};
pub use types::{
    GetOp, Index, Item, ItemKey, ListNamespacesOp, Namespace, Object, Op, OpResult, PutOp,
    SearchItem, SearchMode, SearchOp, Ttl, WILDCARD,
};
