//! SQLite for Waypoint, on rusqlite with a bundled SQLite: [`SqliteSaver`] implements
//! [`waypoint_checkpoint::CheckpointSaver`], and `SqliteStore` (feature `store`) implements
//! `waypoint_store::Store`, both on one pool of connections and one [`SqliteConfig`].
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver};
//! use waypoint_checkpoint_sqlite::SqliteSaver;
//! use waypoint_store::{StoreConfig, StoreExt};
//!
//! let saver = SqliteSaver::from_url("sqlite::memory:").await?;
//! assert!(saver.get_tuple(&CheckpointConfig::new("thread-1")).await?.is_none());
//! // The store shares the saver's connections (here, its in-memory database).
//! let store = saver.store(StoreConfig::default()).await?;
//! store.put(["users", "alice"], "prefs", serde_json::json!({"theme": "dark"})).await?;
//! assert!(store.get(["users", "alice"], "prefs").await?.is_some());
//! # Ok::<_, Box<dyn std::error::Error>>(()) }).unwrap();
//! ```
//!
//! **One pool.** A database is one writer connection, a few reader connections and, for a
//! file, a background connection that checkpoints the WAL once a second. Every connection is
//! set up the same way for the saver and the store: WAL mode, `synchronous=NORMAL` (`FULL`
//! with [`SqliteConfig::fsync_commits`]), a busy handler that looks for a free lock every
//! 100-500 µs up to [`SqliteConfig::busy_timeout`] (so processes writing one file back to back
//! never starve each other), and a page cache and memory map. Operations run on the caller's
//! own thread through `block_in_place` (tokio's blocking pool on a current-thread runtime),
//! so no tokio worker is blocked and no thread hand-off is paid. `SqliteSaver::store` opens
//! a store on the saver's connections; `SqliteStore::open(SqliteConfig, StoreConfig)` opens
//! its own, and works beside a saver in another process on the same file.
//!
//! **Tables.** The saver's are shaped like LangGraph's PostgreSQL ones: `checkpoints` (one
//! row per checkpoint, the checkpoint as JSON without its values), `checkpoint_blobs` (channel
//! values, one row per channel version, so unchanged channels are not stored again) and
//! `checkpoint_writes` (pending writes), each `WITHOUT ROWID` (rows live in their primary
//! key's b-tree), migrations recorded in `waypoint_migrations`. The
//! store's are LangGraph's `SqliteStore` table `store` (migrations in `store_migrations`),
//! plus Waypoint's vectors and change log (migrations in `waypoint_store_migrations`). One
//! file holds both.
//!
//! **Setup.** Opening a saver or a store runs its `setup()` (create or migrate its tables;
//! idempotent, safe from several processes at once) unless [`SqliteConfig::auto_setup`] is
//! off; `setup()` is public on both. A file whose tables another program made is refused and
//! left untouched, as is a schema newer than this build.
//!
//! | feature | enables |
//! |---|---|
//! | `store` (default) | `SqliteStore` and `SqliteSaver::store` (depends on `waypoint-store`) |

mod busy;
mod cache;
mod config;
mod convert;
mod error;
mod history;
mod lease;
mod migrate;
mod pool;
mod queries;
mod saver;
mod schema;
#[cfg(feature = "store")]
mod store;

pub use config::{SqliteConfig, Target};
pub use saver::SqliteSaver;
#[cfg(feature = "store")]
pub use store::SqliteStore;

/// The schema version of the saver's tables this build creates and understands.
pub const SCHEMA_VERSION: i64 = schema::LATEST;
