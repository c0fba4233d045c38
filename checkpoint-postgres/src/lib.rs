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
//! As LangGraph's saver does, LangGraph mode
//! ([`langgraph_values`](PostgresConfig::langgraph_values), the default) drops the legacy
//! `writes` metadata key when storing.
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
//! # TLS
//!
//! TLS is rustls on ring (no OpenSSL), set by libpq's URL parameters or by the
//! [`PostgresConfig`] methods of the same names, which win over the URL's:
//!
//! | URL parameter | method | meaning |
//! |---|---|---|
//! | `sslmode=disable` | [`SslMode::Disable`] | plaintext only |
//! | `sslmode=allow` | [`SslMode::Allow`] | plaintext, TLS if the server insists; nothing verified |
//! | `sslmode=prefer` (default) | [`SslMode::Prefer`] | TLS if the server offers it; nothing verified |
//! | `sslmode=require` | [`SslMode::Require`] | TLS or fail; the server not verified (encrypted, but to whom is not proven) |
//! | `sslmode=verify-ca` | [`SslMode::VerifyCa`] | TLS; the certificate chains to a trusted CA |
//! | `sslmode=verify-full` | [`SslMode::VerifyFull`] | TLS; the certificate chains to a trusted CA and names the URL's host |
//! | `sslrootcert=/path/ca.pem` | [`ssl_root_cert`](PostgresConfig::ssl_root_cert) | a CA to trust, besides the public (webpki) roots |
//! | `sslcert=/path/client.pem&sslkey=/path/client.key` | [`ssl_client_cert`](PostgresConfig::ssl_client_cert) | a client certificate, for `cert` authentication (its CN is the user) |
//!
//! Only `verify-full` protects against a server impersonated on the network: use it, with
//! the host name the certificate holds (not an IP address unless the certificate lists it).
//! `verify-ca` with sqlx 0.8.6 still refuses a certificate naming another host
//! (launchbadge/sqlx#3793). sqlx also reads libpq's `PGSSLMODE`, `PGSSLROOTCERT`,
//! `PGSSLCERT` and `PGSSLKEY`. The saver, the store, `waypoint_runtime::connect` and the
//! CLI all take these URLs:
//!
//! ```text
//! postgres://app@db.example.com:5432/agents?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem
//! postgres://app_cert@db.example.com/agents?sslmode=verify-full&sslrootcert=ca.pem&sslcert=app.pem&sslkey=app.key
//! ```
//!
//! A refused connection fails within the timeout with an error naming the server, the
//! operation and the cause: `postgres backend error: setup on db.example.com:5432: cannot
//! connect: invalid peer certificate: certificate not valid for name "10.0.0.5"; ...`, or
//! `... UnknownIssuer (the server's certificate is not signed by a trusted CA: name its CA
//! with sslrootcert)`, or the server's own refusal (`no pg_hba.conf entry for host ...,
//! no encryption`; `connection requires a valid client certificate`).
//!
//! # Lost connections
//!
//! Sessions the server ends (`pg_terminate_backend`, a restart, a failover, a network cut, a
//! pooler recycling its connections) need no restart of the process:
//!
//! - An operation that meets a broken connection closes it and every connection parked
//!   beside it. The saver's and the store's reads, and their writes, which are upserts of
//!   rows keyed by their ids (running one twice stores the same rows), then run once more on
//!   a connection that first answers a ping, so the first call after the sessions were
//!   killed succeeds. An operation that is not idempotent (`copy_thread`) fails instead, and
//!   the next call gets a fresh connection.
//! - No call outlasts [`PostgresConfig::timeout`]: a refused connection is retried while
//!   the server restarts, and when the timeout runs out the error says why, naming the
//!   server and the operation (`put on 10.0.0.5:5432: cannot connect: Connection refused
//!   (os error 111)`). Once the server is back the next call succeeds on the same saver.
//! - A write is acknowledged only after its transaction committed, so nothing acknowledged
//!   is lost. A write whose connection broke runs again with the same rows, whether it had
//!   committed or not; one cut off by the timeout fails, committed or not, and the caller
//!   may put the same checkpoint again.
//!
//! | feature | enables |
//! |---|---|
//! | `store` (default) | `PostgresStore`, on `waypoint-store`; without it the crate is the saver alone |

mod array;
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
