//! The workloads Waypoint's benchmarks and `waypoint bench` measure: seeded, sized as
//! constants, defined once and run against every format or backend.
//!
//! | Module | Workload | Measured by |
//! |---|---|---|
//! | [`payload`] | chat conversations of three sizes | `serde_throughput`, `waypoint bench` serde |
//! | [`checkpoints`] | a thread of checkpoints over five channels | `checkpoint_ops`, `waypoint bench` checkpoint |
//! | [`store`] | small user memories, written, read and searched | `store_ops`, `waypoint bench` store |
//! | [`ann`] | clustered vectors for the HNSW index, with recall | `hnsw_ann`, `waypoint bench` hnsw |
//! | [`runtime`] | a 10-node linear graph appending messages | `runtime_steps`, `runtime_history`, `waypoint bench` runtime |
//!
//! [`servers`] opens fresh, isolated savers and stores on the PostgreSQL and Redis servers
//! a run measures.

pub mod ann;
pub mod checkpoints;
pub mod payload;
pub mod runtime;
pub mod servers;
pub mod store;

/// Seed of every generated workload.
pub const SEED: u64 = 42;
