//! PostgreSQL checkpointer for Waypoint: [`PostgresSaver`] implements
//! [`waypoint_checkpoint::CheckpointSaver`] on sqlx, in the tables of
//! langgraph-checkpoint-postgres.
//!
//! The tables, columns and `checkpoint_migrations` numbering (v0 to v9) are LangGraph's, so
//! a Python LangGraph service and a Waypoint service can share one database: each reads the
//! other's threads. Waypoint's own additions (indexes, the `waypoint_thread_leases` table of
//! per-thread leases) are numbered in `waypoint_migrations`. Differences from LangGraph's writer, all readable by it: every
//! channel value goes to `checkpoint_blobs` (LangGraph inlines strings, numbers and booleans
//! in the `checkpoint` JSON, in plaintext even when values are encrypted; this saver reads
//! such values), a `put` is one statement (atomic, one round trip), and NUL characters,
//! which `jsonb` cannot hold, are removed from metadata rather than failing the write.
//!
//! Under a keyring an empty channel's row keeps LangGraph's `empty` type, its blob a seal
//! bound to its slot, and reads fail closed: a version whose row is missing, nulled or
//! unsealed is [`waypoint_checkpoint::Error::Decrypt`], never an absent channel. With
//! `Serde::authenticate_history`, a put stores its sealed child record on the parent in the
//! same statement, and every tuple read is verified.
//!
//! ```no_run
//! # async fn demo() -> waypoint_checkpoint::Result<()> {
//! use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver};
//! use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
//!
//! let saver = PostgresSaver::connect(
//!     PostgresConfig::new("postgres://app@localhost/agents").schema("tenant_a"),
//! )
//! .await?;
//! saver.setup().await?;
//! assert!(saver.get_tuple(&CheckpointConfig::new("thread-1")).await?.is_none());
//! # Ok(()) }
//! ```

mod config;
mod convert;
mod input;
mod lease;
mod queries;
mod saver;
mod schema;

pub use config::PostgresConfig;
pub use saver::PostgresSaver;
/// The longest id a write may carry (the core's rule for every backend).
pub use waypoint_checkpoint::raw::MAX_ID_BYTES;

/// The newest `checkpoint_migrations` version this build creates and understands.
pub const LANGGRAPH_SCHEMA_VERSION: i32 = schema::LANGGRAPH_LATEST;

/// The newest `waypoint_migrations` version this build creates.
pub const WAYPOINT_SCHEMA_VERSION: i32 = schema::WAYPOINT_LATEST;
