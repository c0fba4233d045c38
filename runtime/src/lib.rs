//! A Pregel-style graph runtime on Waypoint's checkpointers and store.
//!
//! A graph is a set of nodes over a typed state. Each super-step runs the scheduled nodes
//! concurrently, folds their updates into the state through each channel's reducer in a
//! fixed order, and saves one checkpoint through any
//! [`CheckpointSaver`]. Threads can be read
//! ([`CompiledGraph::get_state`], [`CompiledGraph::get_state_history`]), edited and forked
//! ([`CompiledGraph::update_state`]), replayed from any checkpoint, and resumed after a
//! failure without re-running the nodes that finished.
//!
//! A service can hand what the runtime returns straight to its clients: [`StateSnapshot`],
//! [`StreamPart`], [`Interrupt`] and [`RunConfig`] serialize to the JSON of LangGraph's
//! HTTP API (a thread state, `{event, data}` stream events, a `RunnableConfig`), and
//! [`RunConfig`], [`StreamMode`], [`Durability`] and [`Resume`] read from it.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use waypoint_checkpoint::InMemorySaver;
//! use waypoint_runtime::{CompileOptions, Context, NodeResult, RunConfig, START, END, State, StateGraph};
//!
//! #[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
//! struct Demo {
//!     foo: String,
//!     #[reducer(append)]
//!     bar: Vec<String>,
//! }
//!
//! async fn node_a(_: Demo, _: Context) -> NodeResult<DemoUpdate> {
//!     Ok(DemoUpdate::default().foo("a").bar(vec!["a".into()]))
//! }
//! async fn node_b(_: Demo, _: Context) -> NodeResult<DemoUpdate> {
//!     Ok(DemoUpdate::default().foo("b").bar(vec!["b".into()]))
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let mut graph = StateGraph::<Demo>::new();
//! graph.add_node("node_a", node_a).add_node("node_b", node_b);
//! graph.add_edge(START, "node_a").add_edge("node_a", "node_b").add_edge("node_b", END);
//! let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;
//!
//! let config = RunConfig::thread("1");
//! let state = graph.invoke(Some(DemoUpdate::default().foo("")), &config).await?.into_values();
//! assert_eq!((state.foo.as_str(), state.bar), ("b", vec!["a".to_string(), "b".to_string()]));
//! assert_eq!(graph.get_state_history(&config, &Default::default()).await?.len(), 4);
//! # Ok::<(), waypoint_runtime::Error>(())
//! # }).unwrap();
//! ```
//!
//! **Where the state lives.** [`connect()`] opens a checkpointer and a store from one URL
//! (`memory:`, `sqlite:PATH`, `postgres://...`, `redis://...`), on one pool per database; the
//! backends are features of this crate, so it is the only dependency an application needs:
//!
//! | feature | re-exports | URLs |
//! |---|---|---|
//! | (always) | [`checkpoint`] (`waypoint-checkpoint`), [`store`] (`waypoint-store`), `InMemorySaver`, `InMemoryStore` | `memory:` |
//! | `sqlite` | `sqlite` (`waypoint-checkpoint-sqlite`): `SqliteSaver`, `SqliteStore`, `SqliteConfig` | `sqlite:` |
//! | `postgres` | `postgres` (`waypoint-checkpoint-postgres`): `PostgresSaver`, `PostgresStore`, `PostgresConfig` | `postgres://` |
//! | `redis` | `redis` (`waypoint-checkpoint-redis`): `RedisSaver`, `RedisStore`, `RedisConfig` | `redis://` |
//! | `openai` | the store's `OpenAiEmbedder` | |
//!
//! **Tracing.** Runs report through [`tracing`](https://docs.rs/tracing) spans: `invoke` and
//! `stream` (info; `thread_id`, `checkpoint_ns`, `checkpoint_id`, `durability`), then at debug
//! `superstep` (`step`, `tasks`), `node` (`node`, `step`, `task_id`), `lease` (`thread_id`,
//! `conflicts`: tries another run held the thread), `save_checkpoint` and `async_saves`. The
//! savers' and the store's spans nest inside (`get_tuple`, `put`, `save_fenced`,
//! `store.search`, ... with `backend`, `rows`, `bytes`). Fields are names, ids and counts,
//! never a state value, metadata value or credential. A lost or unreleasable lease is a
//! `warn` event. Nothing is recorded until the application installs a subscriber, e.g.
//! `tracing_subscriber::fmt().with_span_events(FmtSpan::CLOSE).init()` for each span's
//! duration on close.
//!
//! **Layout.** `builder` (`StateGraph`) compiles into `pregel` (`CompiledGraph` and all its
//! methods), whose run loop (`pregel/run.rs`) drives the step algorithm (`step.rs`) over a
//! frame (`frame.rs`) and saves through one durability policy (`durability.rs`); `context`,
//! `stream` and `messages` sit below it and never import the loop. `draw` reads the shape
//! `compile` keeps to draw a graph (Mermaid, ASCII); `events` turns a run's stream into
//! LangGraph's v2 events; `prebuilt` holds tools, `ToolNode` and the ReAct agent, graphs
//! built with `StateGraph` like an application's.

// The derive's generated code names `::waypoint_runtime`, also inside this crate's tests.
extern crate self as waypoint_runtime;

mod builder;
mod cache;
mod command;
mod config;
pub mod connect;
mod context;
mod delta;
mod draw;
mod error;
mod events;
mod interrupt;
mod lease;
pub mod messages;
mod names;
pub mod prebuilt;
mod pregel;
pub mod state;
pub mod stored;
mod stream;

pub use builder::{PathMap, Route, StateGraph};
pub use command::{Command, CommandGraph, Goto, ParentCommand, Send};
pub use config::{CompileOptions, DEFAULT_RECURSION_LIMIT, Durability, RunConfig};
pub use connect::{Connect, Connection, connect};
pub use context::{Context, Subgraph};
pub use delta::DeltaPolicy;
pub use draw::{Drawing, DrawnEdge, DrawnNode};
pub use error::{Error, Result};
pub use events::{CHAT_MODEL_NAME, Event, EventKind, GRAPH_NAME};
pub use interrupt::{Input, Interrupt, Outcome, Resume};
pub use lease::LEASE_TTL;
pub use messages::{
    Message, MessagesFormat, MessagesState, MessagesStateUpdate, add_messages, add_messages_as,
};
pub use pregel::CompiledGraph;
pub use pregel::graph::{END, NodeResult, START};
pub use pregel::snapshot::{StateSnapshot, TaskInfo};
pub use state::{ChannelSpec, JsonSchema, JsonState, State, reducers};
pub use stream::{MessageMetadata, StreamMode, StreamPart};
pub use waypoint_checkpoint::{BoxError, ListOptions, Serde, SerializedValue};
pub use waypoint_checkpoint::{CheckpointSaver, InMemorySaver};
pub use waypoint_store::{InMemoryStore, Store, StoreConfig, StoreExt};

/// The checkpoint core (`waypoint-checkpoint`): data model, `CheckpointSaver`, serializers.
pub use waypoint_checkpoint as checkpoint;
/// The PostgreSQL saver and store (`waypoint-checkpoint-postgres`, feature `postgres`).
#[cfg(feature = "postgres")]
pub use waypoint_checkpoint_postgres as postgres;
#[cfg(feature = "postgres")]
pub use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver, PostgresStore};
/// The Redis saver and store (`waypoint-checkpoint-redis`, feature `redis`).
#[cfg(feature = "redis")]
pub use waypoint_checkpoint_redis as redis;
#[cfg(feature = "redis")]
pub use waypoint_checkpoint_redis::{RedisConfig, RedisSaver, RedisStore};
/// The SQLite saver and store (`waypoint-checkpoint-sqlite`, feature `sqlite`).
#[cfg(feature = "sqlite")]
pub use waypoint_checkpoint_sqlite as sqlite;
#[cfg(feature = "sqlite")]
pub use waypoint_checkpoint_sqlite::{SqliteConfig, SqliteSaver, SqliteStore};
/// The long-term memory store (`waypoint-store`): items, search, index, embedders.
pub use waypoint_store as store;

/// What `#[derive(State)]` expands to refers to, so users need no extra dependencies.
#[doc(hidden)]
pub mod __private {
    pub use serde;
    pub use waypoint_checkpoint::{Serde, SerializedValue};
}
/// Derives [`State`] for a struct: one channel per field, `#[reducer(...)]` per field.
pub use waypoint_runtime_derive::State;
