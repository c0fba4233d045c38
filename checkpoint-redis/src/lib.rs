//! Redis checkpointer for Waypoint: [`RedisSaver`] implements
//! [`waypoint_checkpoint::CheckpointSaver`] on plain Redis 7, without modules (no RedisJSON,
//! no RediSearch), in a key layout of its own.
//!
//! Every write is one Lua script (atomic: a `put` stores its values, checkpoint and index
//! entries at once, a `save_batch` all of its saves). Reads that take one round trip
//! (`get_tuple`) are scripts too, so they can renew the thread's ttl in the same call.
//! Metadata filters are JSON containment, checked on the client over candidates read in
//! pages from the sorted sets. Every optional operation is implemented except a
//! backend-specific delta history (the generic walk over `get_tuple` serves it).
//!
//! ```no_run
//! # async fn demo() -> waypoint_checkpoint::Result<()> {
//! use std::time::Duration;
//! use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver};
//! use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};
//!
//! let saver = RedisSaver::connect(
//!     RedisConfig::new("redis://127.0.0.1:6379/")
//!         .prefix("tenant-a")
//!         .ttl(Duration::from_secs(7 * 24 * 3600)),
//! )
//! .await?;
//! saver.pin_thread("keep-forever").await?;
//! assert!(saver.get_tuple(&CheckpointConfig::new("thread-1")).await?.is_none());
//! # Ok(()) }
//! ```
//!
//! # Key layout
//!
//! `P` is the prefix ([`RedisConfig::prefix`], default `waypoint`); `{T}` is the thread id
//! with `%`, `{` and `}` percent-escaped, so it is always the whole hash tag and every key of a
//! thread lives in one cluster slot. `<ns>` is written `<byte length>:<namespace>` so no
//! namespace or id can make two names collide.
//!
//! | Key | Type | Holds |
//! |---|---|---|
//! | `P:{T}:checkpoint:<ns>:<id>` | hash | `c` checkpoint JSON (no values), `m` metadata JSON, `p` parent id, `b` the blob fields of its channel versions (JSON) |
//! | `P:{T}:ns:<ns>` | sorted set | checkpoint ids of the namespace, score 0: ids are time-ordered uuid6 strings, so `ZREVRANGEBYLEX` gives newest first and `before`/`limit` are range bounds |
//! | `P:{T}:index` | sorted set | `enc(id) ns` for every namespace of the thread (`list` without a namespace) |
//! | `P:{T}:blobs:<ns>` | hash | field `<len>:<channel><version>`, value `<len>:<tag><bytes>` (empty: versioned, no value; under a keyring an `empty`-tagged seal, so a stripped ciphertext is an error on read); stored once per version, shared by the checkpoints naming it, never rewritten (`HSETNX`) |
//! | `P:{T}:writes:<ns>:<id>` | hash | field `<len>:<task_id><idx>`, value channel, task path and value; a call of only reserved channels overwrites (`HSET`), any other call inserts if absent (`HSETNX`) |
//! | `P:{T}:registry` | set | the names of every key above, for `delete_thread`, pins and ttl |
//! | `P:{T}:meta` | hash | `gen` (bumped by every write), `pinned`, `refreshed` (last full ttl renewal) |
//! | `P:index` | sorted set | `enc(id) enc(thread) ns` of every checkpoint: `list` without a thread, newest first across threads |
//! | `P:lease:{T}` | hash | the thread's lease: `token`, `expires` (server ms); kept a day past `expires` |
//!
//! `enc` escapes NUL as `00 FF` and ends with `00`, which keeps members in the order of
//! their ids. The global index is the only key outside a thread's slot: the scripts update
//! it with the thread's keys, so this saver needs a standalone server (or a primary), not a
//! Redis Cluster.
//!
//! # Expiry
//!
//! With [`RedisConfig::ttl`], every key of a thread gets the ttl (the lease and the global
//! index excepted), and every read or write of the thread renews it: the keys it touched and
//! the thread's bookkeeping keys each time, all its keys whenever the last full renewal is
//! older than a tenth of the ttl. A thread left alone thus vanishes whole, between 0.9 and 1
//! times the ttl after its last use. Global-index entries of expired threads are dropped by
//! the next `list` that meets them. [`RedisSaver::pin_thread`] keeps a thread forever (until
//! unpinned or deleted). Leases are not thread data: `delete_thread` leaves them alone, and
//! a lapsed lease stays renewable by its holder for a day unless someone takes it over.
//!
//! # Fencing
//!
//! `save_fenced` sends the lease's key and token with the batch, and the save script checks
//! the token before it writes anything: the check and the writes are one atomic step, so a
//! run paused past its lease while another run took the thread gets `Conflict` and writes
//! nothing. The lease hash outlives the lease by a day (the grace above) with its expiry
//! inside it, so a lease that lapsed but that nobody took over still proves itself, as
//! `renew_lease` allows. A lease key that is gone (released, or lapsed more than a day ago)
//! counts as lost: nothing then shows that no other run wrote the thread meanwhile.
//!
//! # Durability
//!
//! Redis acknowledges a write once it is in memory. Waypoint needs the append-only file:
//! `appendonly yes` with `appendfsync everysec` (a killed or crashed server loses nothing
//! acknowledged; a power failure or OS crash, up to about two seconds) or `always`. With RDB
//! snapshots only, a restart loses everything since the last snapshot; with no persistence,
//! everything. [`RedisSaver::connect`] reads `appendonly` and `appendfsync` (`CONFIG GET`)
//! and, per [`RedisConfig::persistence`], warns through `tracing` (the default), refuses
//! to connect, or does not look ([`check_persistence`]; the Redis store runs the same check).
//! A server that disallows `CONFIG` (as managed services often do) has unknown settings:
//! a warning, or a refusal under [`PersistenceCheck::Require`].
//!
//! # Limits and secrets
//!
//! A value over [`RedisConfig::max_value_bytes`] (default 512 MB, the server's own
//! `proto-max-bulk-len`) is refused before anything is sent, with an error naming its size
//! and the limit; the server would drop the connection otherwise. `Debug` of the config and
//! every error show the URL with its password replaced by `***`.

mod config;
mod convert;
mod keys;
mod persistence;
mod saver;
mod scripts;

pub use config::{REDIS_MAX_VALUE_BYTES, RedisConfig};
pub use persistence::{PersistenceCheck, PersistenceError, check_persistence};
pub use saver::RedisSaver;

/// The Redis client this crate is built on, for commands next to the saver's
/// ([`RedisSaver::connection`]).
pub use redis;
