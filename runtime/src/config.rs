//! The options of a graph and of each call: the checkpointer, store and codec a graph is
//! compiled with; which thread and checkpoint a call reads, its limits, durability and user
//! keys.

use std::sync::Arc;

use serde_json::{Map, Value};
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, Serde};
use waypoint_store::Store;

/// Default cap on super-steps per run (LangGraph's `recursion_limit`).
pub const DEFAULT_RECURSION_LIMIT: usize = 25;

/// When checkpoints reach the checkpointer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// A checkpoint after every super-step, and each task's writes as it finishes; each
    /// save completes before the run goes on (default).
    #[default]
    Sync,
    /// The same saves, made in the background while the next step runs (LangGraph's default):
    /// checkpoints stay in order, and the run waits for all of them before it returns.
    Async,
    /// Only when the run ends (finished, failed or interrupted): one checkpoint and its writes.
    Exit,
}

/// The config of one call: LangGraph's `{"configurable": {...}}` plus run options.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// The thread; required when the graph has a checkpointer.
    pub thread_id: Option<String>,
    /// The checkpoint namespace (`""` for the root graph).
    pub checkpoint_ns: String,
    /// A past checkpoint to read, replay or fork from; the latest when `None`.
    pub checkpoint_id: Option<String>,
    /// Maximum super-steps in one run.
    pub recursion_limit: usize,
    /// When checkpoints are written.
    pub durability: Durability,
    /// Stored in each checkpoint's metadata as `run_id`.
    pub run_id: Option<String>,
    /// User keys nodes can read (`user_id`, model names, ...).
    pub configurable: Map<String, Value>,
    /// Static breakpoints before these nodes for this run (instead of the compiled ones).
    pub interrupt_before: Option<Vec<String>>,
    /// Static breakpoints after these nodes for this run (instead of the compiled ones).
    pub interrupt_after: Option<Vec<String>>,
    /// How long to wait for another run on the thread to finish; `None` fails at once with
    /// `Error::Conflict`.
    pub wait_for_thread: Option<std::time::Duration>,
    /// How long the run's claim on its thread lasts without renewal (default
    /// [`LEASE_TTL`](crate::lease::LEASE_TTL)); a run paused longer than this may lose the thread,
    /// and then fails with `Error::Conflict` at its next write instead of writing.
    pub lease_ttl: std::time::Duration,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            thread_id: None,
            checkpoint_ns: String::new(),
            checkpoint_id: None,
            recursion_limit: DEFAULT_RECURSION_LIMIT,
            durability: Durability::default(),
            run_id: None,
            configurable: Map::new(),
            interrupt_before: None,
            interrupt_after: None,
            wait_for_thread: None,
            lease_ttl: crate::lease::LEASE_TTL,
        }
    }
}

impl RunConfig {
    /// A config for `thread_id`, at its latest checkpoint.
    pub fn thread(thread_id: impl Into<String>) -> Self {
        RunConfig {
            thread_id: Some(thread_id.into()),
            ..RunConfig::default()
        }
    }

    /// The same config pointing at checkpoint `checkpoint_id`.
    pub fn at(mut self, checkpoint_id: impl Into<String>) -> Self {
        self.checkpoint_id = Some(checkpoint_id.into());
        self
    }

    /// The same config with a user key.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.configurable.insert(key.into(), value.into());
        self
    }

    /// The same config with another recursion limit.
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = limit;
        self
    }

    /// The same config with another durability.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The same config with a run id.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// The same config pausing before `nodes` in this run.
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// The same config pausing after `nodes` in this run.
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// The same config waiting up to `wait` for another run on the thread to finish.
    pub fn wait_for_thread(mut self, wait: std::time::Duration) -> Self {
        self.wait_for_thread = Some(wait);
        self
    }

    /// The same config claiming its thread for `ttl` at a time (renewed while the run goes).
    pub fn lease_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// A user key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.configurable.get(key)
    }

    /// The checkpointer's view: thread, namespace, id.
    pub(crate) fn checkpoint_config(&self, thread_id: &str) -> CheckpointConfig {
        CheckpointConfig {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: Some(self.checkpoint_ns.clone()),
            checkpoint_id: self.checkpoint_id.clone(),
        }
    }
}

impl From<&CheckpointConfig> for RunConfig {
    fn from(config: &CheckpointConfig) -> Self {
        RunConfig {
            thread_id: Some(config.thread_id.clone()),
            checkpoint_ns: config.checkpoint_ns.clone().unwrap_or_default(),
            checkpoint_id: config.checkpoint_id.clone(),
            ..RunConfig::default()
        }
    }
}

impl From<CheckpointConfig> for RunConfig {
    fn from(config: CheckpointConfig) -> Self {
        RunConfig::from(&config)
    }
}

/// Options of [`StateGraph::compile`](crate::StateGraph::compile).
#[derive(Clone, Default)]
pub struct CompileOptions {
    /// Where checkpoints go; without one, runs keep no history and threads are not resumable.
    pub checkpointer: Option<Arc<dyn CheckpointSaver>>,
    /// The long-term store nodes reach through [`Context::store`](crate::Context::store).
    pub store: Option<Arc<dyn Store>>,
    /// How channel values are encoded (MessagePack by default; sealed when keyed). Left at
    /// its default format on a checkpointer shared with Python LangGraph
    /// ([`CheckpointSaver::langgraph_values`], PostgreSQL's default), LangGraph's encoding
    /// (`Format::LangGraph`) is used instead.
    pub serde: Serde,
    /// Nodes to pause before (static breakpoints; see the human-in-the-loop issue).
    pub interrupt_before: Vec<String>,
    /// Nodes to pause after.
    pub interrupt_after: Vec<String>,
    /// How appending channels (`append`, `add_messages`) are stored. Left at its default on
    /// a checkpointer shared with Python LangGraph, they are stored whole
    /// ([`DeltaPolicy::off`](crate::DeltaPolicy::off)): Python reads no Waypoint deltas.
    pub delta: crate::delta::DeltaPolicy,
}

impl std::fmt::Debug for CompileOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileOptions")
            .field("checkpointer", &self.checkpointer)
            .field("store", &self.store.is_some())
            .field("serde", &self.serde)
            .finish()
    }
}

impl CompileOptions {
    /// Options with `checkpointer`.
    pub fn with_checkpointer(checkpointer: impl CheckpointSaver + 'static) -> Self {
        CompileOptions {
            checkpointer: Some(Arc::new(checkpointer)),
            ..CompileOptions::default()
        }
    }

    /// The same options with `checkpointer`.
    pub fn checkpointer(mut self, checkpointer: Arc<dyn CheckpointSaver>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// The same options with `store`.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The same options with `serde`.
    pub fn serde(mut self, serde: Serde) -> Self {
        self.serde = serde;
        self
    }

    /// The options with the defaults a checkpointer shared with Python LangGraph asks for:
    /// LangGraph's encoding instead of the default format, appending channels stored whole
    /// instead of the default delta policy. Settings changed from their defaults are kept.
    pub(crate) fn for_checkpointer(mut self) -> Self {
        if self
            .checkpointer
            .as_ref()
            .is_some_and(|c| c.langgraph_values())
        {
            if self.serde.format() == waypoint_checkpoint::Format::default() {
                self.serde = self
                    .serde
                    .with_format(waypoint_checkpoint::Format::LangGraph);
            }
            if self.delta == crate::delta::DeltaPolicy::default() {
                self.delta = crate::delta::DeltaPolicy::off();
            }
        }
        self
    }
}
