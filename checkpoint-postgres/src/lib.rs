//! PostgreSQL for Waypoint (sqlx), in the tables of langgraph-checkpoint-postgres:
//! [`PostgresSaver`] implements [`waypoint_checkpoint::CheckpointSaver`], and
//! `PostgresStore` (feature `store`, on by default) implements `waypoint_store::Store`, as
//! LangGraph's package ships its `PostgresSaver` and `PostgresStore` together.
//!
//! Both run on one connection layer: one sqlx pool ([`PostgresSaver::pool`]), one
//! [`PostgresConfig`] (URL, schema, pool size, timeouts, prepared statements), one migration
//! runner and one mapping of driver errors. `PostgresSaver::store` opens a store on the
//! saver's pool, so a service holding both holds one pool.
//!
//! **Setup**, the same rule for both: opening (`PostgresSaver::connect` or `from_url`,
//! `PostgresStore::connect` or `from_url`, `saver.store(...)`) runs its idempotent `setup()`,
//! creating or migrating its tables, unless [`PostgresConfig::auto_setup`] is off; `setup()`
//! is public on both, and safe when several processes run it at once.
//!
//! The tables, columns and version numbering (`checkpoint_migrations` v0 to v9,
//! `store_migrations` v0 to v3) are LangGraph's, so a Python LangGraph service and a
//! Waypoint service can share one database: each reads the other's threads and items.
//! Waypoint's own additions are numbered in `waypoint_migrations` (indexes, the
//! `waypoint_thread_leases` table of per-thread leases) and `waypoint_store_migrations`
//! (vectors and the change log other processes replay into their index). Differences from
//! LangGraph's checkpoint writer, all readable by it: every channel value goes to
//! `checkpoint_blobs` (LangGraph inlines strings, numbers and booleans in the `checkpoint`
//! JSON, in plaintext even when values are encrypted; this saver reads such values), a `put`
//! is one statement (atomic, one round trip), and NUL characters, which `jsonb` cannot hold,
//! are removed from metadata rather than failing the write.
//!
//! Under a keyring an empty channel's row keeps LangGraph's `empty` type, its blob a seal
//! bound to its slot, and reads fail closed: a version whose row is missing, nulled or
//! unsealed is [`waypoint_checkpoint::Error::Decrypt`], never an absent channel. With
//! `Serde::authenticate_history`, a put stores its sealed child record on the parent in the
//! same statement, and every tuple read is verified.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver};
//! use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
//!
//! let saver = PostgresSaver::connect(
//!     PostgresConfig::new("postgres://app@localhost/agents").schema("tenant_a"),
//! )
//! .await?;
//! assert!(saver.get_tuple(&CheckpointConfig::new("thread-1")).await?.is_none());
//!
//! // The long-term store, on the same pool and schema.
//! # #[cfg(feature = "store")] {
//! use waypoint_store::{StoreConfig, StoreExt};
//! let store = saver.store(StoreConfig::new()).await?;
//! store.put(["users", "alice"], "prefs", serde_json::json!({"theme": "dark"})).await?;
//! # }
//! # Ok(()) }
//! ```
//!
//! | feature | enables |
//! |---|---|
//! | `store` (default) | `PostgresStore`, on `waypoint-store`; without it the crate is the saver alone |

mod config;
mod convert;
mod error;
mod input;
mod lease;
mod pool;
mod queries;
mod saver;
mod schema;
#[cfg(feature = "store")]
mod store;

pub use config::{PostgresConfig, SslMode};
pub use saver::PostgresSaver;
#[cfg(feature = "store")]
pub use store::PostgresStore;
/// The longest id a write may carry (the core's rule for every backend).
pub use waypoint_checkpoint::raw::MAX_ID_BYTES;

/// The newest `checkpoint_migrations` version this build creates and understands.
pub const LANGGRAPH_SCHEMA_VERSION: i32 = schema::LANGGRAPH_LATEST;

/// The newest `waypoint_migrations` version this build creates.
pub const WAYPOINT_SCHEMA_VERSION: i32 = schema::WAYPOINT_LATEST;
