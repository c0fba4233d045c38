//! Waypoint's checkpoint core: the data model, the [`CheckpointSaver`] trait every backend
//! implements, the serializers (JSON, MessagePack, Python LangGraph's MessagePack, postcard,
//! bincode, AES-256-GCM sealing), the in-memory saver and the shared conformance suite.
//!
//! A checkpoint is the state of a graph's channels at the end of one super-step, stored per
//! thread and namespace; pending writes are what tasks produced against a checkpoint before
//! the next one exists. Values are opaque [`SerializedValue`]s: the runtime serializes them
//! with a [`Serde`], savers only store them (and seal them at rest when a key is set).
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use waypoint_checkpoint::*;
//!
//! let saver = InMemorySaver::new();
//! let serde = Serde::default();
//! let thread = CheckpointConfig::new("thread-1");
//!
//! let mut checkpoint = Checkpoint::new(-1);
//! let version = saver.next_version(None)?;
//! checkpoint.channel_values.insert("messages".into(), serde.dumps(&vec!["hi"])?);
//! checkpoint.channel_versions.insert("messages".into(), version.clone());
//! let new_versions = [("messages".to_string(), version)].into();
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! saver.put(&thread, checkpoint, meta, new_versions).await?;
//!
//! let latest = saver.get_tuple(&thread).await?.expect("stored");
//! let messages: Vec<String> = serde.loads(&latest.checkpoint.channel_values["messages"])?;
//! assert_eq!(messages, ["hi"]);
//! # Ok::<_, Error>(()) }).unwrap();
//! ```
//!
//! | Backend | Crate | Feature of `waypoint-runtime` |
//! |---|---|---|
//! | In-memory | this crate ([`InMemorySaver`]) | always |
//! | SQLite | `waypoint-checkpoint-sqlite` | `sqlite` |
//! | PostgreSQL | `waypoint-checkpoint-postgres` | `postgres` |
//! | Redis | `waypoint-checkpoint-redis` | `redis` |
//!
//! | Feature | Enables |
//! |---|---|
//! | `msgpack` (default) | [`Format::MsgPack`] via rmp-serde, and [`Format::LangGraph`]: what Python LangGraph's `JsonPlusSerializer` reads and writes (msgpack extension types 0-7, see [`serde::Node`]); every reader of the `msgpack` tag reads both |
//! | `postcard` (default) | [`Format::Postcard`] |
//! | `bincode` | [`Format::Bincode`] (bincode 2, pinned; the crate is unmaintained) |
//! | `conformance` | [`conformance`], the suite every backend runs |

mod error;
mod fence;
mod filter;
mod id;
mod memory;
pub mod metadata;
mod prepare;
pub mod raw;
mod redact;
mod saver;
pub mod serde;
mod trace;
mod types;
mod version;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use error::{BoxError, Error, Result};
pub use fence::Fenced;
pub use id::{checkpoint_id, uuid6};
pub use memory::InMemorySaver;
pub use saver::{
    Capabilities, CheckpointSaver, CheckpointSaverExt, DeltaChannelHistory, Lease, ListOptions,
    PruneStrategy, Save, TupleWithHistory,
};
pub use serde::{Format, Keyring, Serde, Slot};
pub use types::{
    CHECKPOINT_VERSION, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSource, CheckpointTuple, PendingWrite, SerializedValue, now_rfc3339,
};
pub use version::{ChannelVersion, channels};
