//! SQLite checkpointer for Waypoint: [`SqliteSaver`] implements
//! [`waypoint_checkpoint::CheckpointSaver`] on rusqlite with a bundled SQLite.
//!
//! Tables are shaped like LangGraph's PostgreSQL ones: `checkpoints` (one row per checkpoint,
//! the checkpoint as JSON without its values), `checkpoint_blobs` (channel values, one row per
//! channel version, so unchanged channels are not stored again) and `checkpoint_writes`
//! (pending writes); migrations are recorded in `waypoint_migrations`. File databases run in
//! WAL mode with `synchronous=NORMAL`. One writer connection and a few reader connections
//! serve operations on the caller's own thread through `block_in_place` (tokio's blocking pool
//! on a current-thread runtime), so no tokio worker is blocked and no thread hand-off is paid.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver};
//! use waypoint_checkpoint_sqlite::SqliteSaver;
//!
//! let saver = SqliteSaver::from_url("sqlite::memory:").await?;
//! assert!(saver.get_tuple(&CheckpointConfig::new("thread-1")).await?.is_none());
//! # Ok::<_, waypoint_checkpoint::Error>(()) }).unwrap();
//! ```

mod busy;
mod cache;
mod config;
mod convert;
mod history;
mod lease;
mod pool;
mod queries;
mod saver;
mod schema;

pub use config::{SqliteConfig, Target};
pub use saver::SqliteSaver;

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: i64 = schema::LATEST;
