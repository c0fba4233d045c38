//! SQLite checkpointer for Waypoint: [`SqliteSaver`] implements
//! [`waypoint_checkpoint::CheckpointSaver`] on rusqlite with a bundled SQLite.
//!
//! Tables are shaped like LangGraph's PostgreSQL ones: `checkpoints` (one row per checkpoint,
//! the checkpoint as JSON without its values), `checkpoint_blobs` (channel values, one row per
//! channel version, so unchanged channels are not stored again) and `checkpoint_writes`
//! (pending writes); migrations are recorded in `waypoint_migrations`. File databases run in
//! WAL mode with `synchronous=NORMAL`; one writer thread and a few reader threads own the
//! connections, so async callers never block a tokio worker.
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

mod cache;
mod config;
mod convert;
mod queries;
mod saver;
mod schema;
mod worker;

pub use config::{SqliteConfig, Target};
pub use saver::SqliteSaver;

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: i64 = schema::LATEST;
