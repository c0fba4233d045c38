//! Waypoint on Redis: [`RedisSaver`] implements [`waypoint_checkpoint::CheckpointSaver`] and
//! `RedisStore` (feature `store`, on by default) implements `waypoint_store::Store`, both on
//! plain Redis 7 without modules (no RedisJSON, no RediSearch), in key layouts of their own,
//! over one connection layer, one [`RedisConfig`] and one error mapping.
//!
//! Every write to a thread is one Lua script or transaction (atomic: a `put` stores its
//! values, checkpoint and thread index entries at once, a `save_batch` all of its saves to a
//! thread), then the checkpoints' entries of the global index; a store batch is one script
//! per bucket (see [Key layout](#key-layout)). Reads that take one round trip (`get_tuple`) are scripts too, so they can renew
//! the thread's ttl in the same call. Metadata filters are JSON containment, checked on the
//! client over candidates read in pages from the sorted sets. Every optional operation of
//! the saver is implemented except a backend-specific delta history (the generic walk over
//! `get_tuple` serves it).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver};
//! use waypoint_checkpoint_redis::{RedisConfig, RedisSaver};
//!
//! let saver = RedisSaver::connect(
//!     RedisConfig::from_url("redis://127.0.0.1:6379/")?
//!         .prefix("tenant-a")
//!         .ttl(Duration::from_secs(7 * 24 * 3600)),
//! )
//! .await?;
//! saver.pin_thread("keep-forever").await?;
//! assert!(saver.get_tuple(&CheckpointConfig::new("thread-1")).await?.is_none());
//! # #[cfg(feature = "store")] {
//!
//! // The store (feature `store`) on the saver's connection, under the same prefix.
//! use serde_json::json;
//! use waypoint_store::{IndexConfig, StoreConfig, StoreExt};
//!
//! let store = saver.store(StoreConfig::new().index(IndexConfig::hashing(64))).await?;
//! store.put(["users", "alice"], "prefs", json!({"theme": "dark"})).await?;
//! # }
//! # Ok(()) }
//! ```
//!
//! # Opening, sharing, setting up
//!
//! | | saver | store |
//! |---|---|---|
//! | from a config | [`RedisSaver::connect`]`(RedisConfig)` | `RedisStore::connect(RedisConfig, StoreConfig)` |
//! | from a URL | [`RedisSaver::from_url`]`(url)` | `RedisStore::from_url(url, StoreConfig)` |
//! | on the saver's connection | | `RedisSaver::store(StoreConfig)` |
//! | setup | [`RedisSaver::setup`] | `RedisStore::setup` |
//!
//! [`RedisConfig`] holds every setting of the connection (URL, prefix, timeouts, persistence
//! check) and of the saver (thread ttl, serde, value limit); the store's own behaviour (index,
//! TTL policy) is its `waypoint_store::StoreConfig`. `RedisSaver::store` opens a store on
//! the saver's connection: one connection, one persistence check, one prefix.
//!
//! URLs: [`RedisConfig::from_url`] takes the schemes of [`URL_SCHEMES`]: `redis://` and
//! `valkey://` (TCP), `rediss://` and `valkeys://` (TCP with TLS, see [TLS](#tls)),
//! `redis+unix://`, `valkey+unix://` and `unix://` (a Unix socket, on Unix platforms). A
//! URL naming one node of a Redis Cluster opens the cluster (see
//! [Redis Cluster](#redis-cluster)).
//!
//! Setup follows the rule of every Waypoint backend: with [`RedisConfig::auto_setup`] (the
//! default), opening a saver or a store runs its idempotent `setup()`. The saver needs
//! nothing set up (its keys are made as they are written); the store records the version of
//! its key layout (upgrading an older one), so that older code refuses a layout it cannot
//! write. With `auto_setup(false)` nothing is written on opening, and a store opens only
//! where its `setup()` has run.
//!
//! # Key layout
//!
//! `P` is the prefix ([`RedisConfig::prefix`], default `waypoint`; 1 to 256 bytes, no `{` or
//! `}`). The saver's keys start with `P:`, the store's with `{`: a saver key's first byte
//! is the prefix's, never `{`, so under one prefix (or any two) no saver key is ever a store
//! key. One layout serves a standalone server and a Redis Cluster: every script and
//! transaction stays in one slot, and what spans slots (the global index, a store) is
//! spread over sixteen hash tags `S0` .. `S15`, `Si` being the first of `si-0`, `si-1`, ...
//! whose slot lies in the `i`-th sixteenth of the slot range (so they spread over every node
//! of a cluster of up to sixteen primaries).
//!
//! The saver: `{T}` is the thread id with `%`, `{` and `}` percent-escaped, so it is always
//! the whole hash tag and every key of a thread lives in one cluster slot. `<ns>` is written
//! `<byte length>:<namespace>` so no namespace or id can make two names collide.
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
//! | `P:lease:{T}` | hash | the thread's lease: `token`, `expires` (server ms); kept a day past `expires` |
//! | `P:index:{Si}` | sorted set | shard `i` of the global index: `enc(id) enc(thread) ns` of every checkpoint of the threads whose slot lies in the `i`-th sixteenth (the shard's own), for `list` without a thread |
//!
//! `enc` escapes NUL as `00 FF` and ends with `00`, which keeps members in the order of
//! their ids. The global index is the only part outside a thread's slot. A write stores the
//! thread's keys first (one script or transaction), then adds the entries to the thread's
//! shard: an acknowledged checkpoint is always listed. (On one server a `put` without a ttl
//! adds its entry inside its own transaction: one round trip, still atomic.) `list` across threads reads a page
//! below `before` from each shard and merges them newest first; an entry whose checkpoint is
//! missing (its thread expired or was deleted) is removed, then put back if the checkpoint
//! exists after all (its put was between its two steps), so no stored checkpoint is ever
//! unlisted. A `save_batch` over several threads is one script per thread (atomic per
//! thread). Versions before the shards kept one sorted set, `P:index`: [`RedisSaver::setup`]
//! (run by `connect` unless `auto_setup(false)`) moves its entries into the shards.
//!
//! The store (key layout 3): a namespace's first two labels (all of them when it has fewer),
//! dot-joined, hash to one of sixteen buckets, bucket `b` having the tag `{Sb}`: every item
//! of a namespace, and of every namespace sharing those two labels, is in one slot, and the
//! namespaces of a store spread over the cluster (`("memories", user)` spreads by user;
//! `(user, "memories")` too). A batch is one atomic script per bucket it touches (all of a
//! batch within one bucket, such as one user's, is atomic; across buckets, each bucket's part
//! is). A search under a prefix of two labels or more visits one bucket; under one label or
//! none, all sixteen at once. An item's id is its dot-joined namespace and key, each with NUL
//! written as `00 01`, joined by `00 00`, so ids sort as (namespace, key) pairs. Times are
//! integer microseconds since the epoch.
//!
//! | Key | Type | Holds |
//! |---|---|---|
//! | `{Sb}/P:i:<id>` | hash | `ns`, `key`, `value` (JSON text), `created`, `updated`, and `ttl` (minutes), `expires` when the item has a TTL |
//! | `{Sb}/P:v:<id>` | hash | the item's vectors: field path to little-endian `f32`s |
//! | `{Sb}/P:n:<namespace>` | sorted set | the ids of one namespace, scored `-updated`: newest first, ties by id |
//! | `{Sb}/P:order` | sorted set | every id of the bucket, scored the same way: the scan order, merged over the buckets |
//! | `{Sb}/P:namespaces` | sorted set | the bucket's namespaces holding items, all scored 0 (ordered bytewise, for prefix ranges) |
//! | `{Sb}/P:expiry` | sorted set | the ids of the bucket's items with a TTL, scored by `expires` |
//! | `{Sb}/P:vectored` | set | the ids of the bucket's items with vectors, read when the index loads |
//! | `{Sb}/P:changes` | stream | the bucket's change feed: per batch or sweep, the ids whose vectors changed (`i` fields), entry ids `0-1`, `0-2`, ...; capped near 10,000 entries; a store reads all sixteen at once |
//! | `{P}:meta` | hash | `layout`: the version of this layout (3), written by the store's `setup()` |
//!
//! Layouts 1 and 2 kept a whole store under `{P}:` (one slot, one node): the store's
//! `setup()` (run on opening unless `auto_setup(false)`) moves their items into the buckets,
//! keeping times, TTLs and vectors. Stop processes of older versions first: they refuse
//! layout 3, but one writing during the move would write to the old keys.
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
//! to connect, or does not look ([`check_persistence`]); a store opened on its own connection
//! runs the same check, one opened by `RedisSaver::store` shares the saver's.
//! A server that disallows `CONFIG` (as managed services often do) has unknown settings:
//! a warning, or a refusal under [`PersistenceCheck::Require`].
//!
//! # TLS
//!
//! `rediss://host:port/db` (or `valkeys://`) connects over TLS with rustls on ring (no
//! OpenSSL; ring becomes the process' rustls provider unless the application installed
//! one). The server's certificate must chain to a trusted CA (the system's, or those of
//! [`RedisConfig::tls_ca`]) and name the URL's host; [`RedisConfig::tls_client_cert`]
//! presents a client certificate to a server with `tls-auth-clients yes`. The same settings
//! can come from the URL, with redis-py's names, so a LangGraph URL works unchanged (the
//! builder methods win over the URL):
//!
//! | URL parameter | Means | Builder |
//! |---|---|---|
//! | `ssl_ca_certs=/path/ca.pem` | trust these CAs instead of the system's | [`RedisConfig::tls_ca`] |
//! | `ssl_certfile=/path/client.pem&ssl_keyfile=/path/client.key` | the client certificate and its key | [`RedisConfig::tls_client_cert`] |
//! | `ssl_cert_reqs=required` (default) or `optional` | check the certificate fully | [`TlsVerify::Full`] |
//! | `ssl_check_hostname=false` | check the CA, not the host name | [`TlsVerify::SkipHostname`] |
//! | `ssl_cert_reqs=none` | no check at all (encrypted, not authenticated) | [`TlsVerify::Off`] |
//!
//! Files are read when connecting; a missing one is an `InvalidConfig` naming it. Other
//! `ssl_*` parameters of redis-py are not supported; TLS settings on a `redis://` URL are
//! refused. A refused handshake says why: a certificate for another host name, one signed by
//! an unknown CA, a client certificate the server requires, or (plaintext to a TLS port) a
//! connection the server closed at once, suggesting `rediss://`.
//!
//! # Redis Cluster
//!
//! Connecting asks the server whether it is a cluster node (`INFO cluster`); if so the saver
//! or store connects as a cluster client, seeded with the URL's node and
//! [`RedisConfig::cluster_nodes`] (more `host:port` seeds, for when that node is down), and
//! sends every command to the primary of its keys' slot, following the cluster as slots
//! move. [`RedisConfig::cluster`] says which it is without asking (`false` for a proxy that
//! hides a cluster). Credentials and TLS settings apply to every node; a cluster has only
//! database 0. [`RedisSaver::connection`] returns a [`RedisConnection`] either way
//! ([`RedisConnection::is_cluster`]). The persistence check reads `appendonly` and
//! `appendfsync` on every primary and names the node that fails it.
//!
//! # Lost connections
//!
//! The connection reconnects by itself. An operation that finds it broken (the server
//! restarted, a `CLIENT KILL`, a network cut) reconnects and, if the operation is idempotent
//! (every read, and every write whose second application changes nothing), runs once more
//! on the new connection, so a single lost connection costs no failed call; an operation
//! that is not idempotent fails with a `Backend` error instead and is never sent twice. A
//! server still loading its data after a restart refuses commands without running them: they
//! are tried again every 50 ms. Every operation is bounded by [`RedisConfig::timeout`]
//! (reconnecting included) and each connection attempt by
//! [`RedisConfig::connect_timeout`]: while the server is down calls fail within the timeout
//! with an error naming the operation and saying the server is unreachable, none hangs, and
//! the first call after it is back succeeds on the same saver, without reopening it.
//!
//! # Limits, errors and secrets
//!
//! A saver's value over [`RedisConfig::max_value_bytes`] (default 512 MB, the server's own
//! `proto-max-bulk-len`) is refused before anything is sent, with an error naming its size
//! and the limit; the server would drop the connection otherwise. Errors follow one rule for
//! the saver and the store: settings that cannot work (a URL, a prefix, a refused server)
//! are `InvalidConfig`; a failed server or connection is `Backend { backend: "redis", .. }`
//! naming the operation and the cause (and, when connecting, the server:
//! `redis://:***@host:port/db`). `Debug` of the config and every error show the URL with
//! its password replaced by `***`.
//!
//! # Features
//!
//! | Feature | Enables |
//! |---|---|
//! | `store` (default) | `RedisStore` and `RedisSaver::store` (depends on `waypoint-store`); without it the crate is the saver alone |

mod config;
mod connection;
mod convert;
mod error;
mod keys;
mod persistence;
mod saver;
mod scripts;
mod slots;
#[cfg(feature = "store")]
mod store;
mod tls;

pub use config::{REDIS_MAX_VALUE_BYTES, RedisConfig, URL_SCHEMES};
pub use connection::RedisConnection;
pub use persistence::{PersistenceCheck, PersistenceError, check_persistence};
pub use saver::RedisSaver;
#[cfg(feature = "store")]
pub use store::RedisStore;
pub use tls::TlsVerify;

/// The Redis client this crate is built on, for commands next to the saver's
/// ([`RedisSaver::connection`]).
pub use redis;
