//! A compiled graph's parts, shared by its clones: the nodes with their edges and routers,
//! the state's channels, the codec, the checkpointer and the store.

use std::sync::Arc;

use futures::future::BoxFuture;
use waypoint_checkpoint::{BoxError, CheckpointSaver, Serde};
use waypoint_store::Store;

use crate::cache::StateCache;
use crate::command::{Command, Goto};
use crate::config::{CompileOptions, RunConfig};
use crate::context::Context;
use crate::delta::DeltaPolicy;
use crate::error::{Error, Result};
use crate::state::State;

pub use crate::names::{END, START};
/// The channel holding a run's input.
pub(crate) const INPUT: &str = START;
/// The prefix of trigger channels.
pub(crate) const BRANCH_PREFIX: &str = "branch:to:";

/// What a node returns: its command (or update) or any error.
pub type NodeResult<O> = std::result::Result<O, BoxError>;

/// A node's function as the loop calls it.
pub(crate) type NodeFn<S> =
    Arc<dyn Fn(Arc<S>, Context) -> BoxFuture<'static, NodeResult<Command<S>>> + Send + Sync>;

/// A router of a conditional edge: where to go from a state.
pub(crate) type RouterFn<S> = Arc<dyn Fn(&S) -> Vec<Goto<S>> + Send + Sync>;

/// A conditional edge.
pub(crate) struct Branch<S: State> {
    pub(crate) router: RouterFn<S>,
    /// Router keys to node names; `None` when the router returns node names.
    pub(crate) map: Option<std::collections::HashMap<String, String>>,
}

/// A node as the loop runs it.
pub(crate) struct Node<S: State> {
    pub(crate) name: String,
    pub(crate) func: Option<NodeFn<S>>,
    /// Static successors (node indices).
    pub(crate) edges: Vec<usize>,
    pub(crate) branches: Vec<Branch<S>>,
    /// The channel that triggers it: `branch:to:{name}` (or `__start__` for START).
    pub(crate) trigger: String,
}

impl<S: State> Node<S> {
    /// A node without edges; `func` is `None` for START.
    pub(crate) fn new(name: String, func: Option<NodeFn<S>>) -> Self {
        let trigger = if func.is_none() {
            INPUT.to_owned()
        } else {
            format!("{BRANCH_PREFIX}{name}")
        };
        Node {
            name,
            func,
            edges: Vec::new(),
            branches: Vec::new(),
            trigger,
        }
    }
}

/// What the loop reads of a compiled graph.
pub(crate) struct Graph<S: State> {
    pub(crate) template: S,
    pub(crate) start: Node<S>,
    pub(crate) nodes: Vec<Node<S>>,
    pub(crate) index: foldhash::HashMap<String, usize>,
    pub(crate) checkpointer: Option<Arc<dyn CheckpointSaver>>,
    pub(crate) store: Option<Arc<dyn Store>>,
    pub(crate) serde: Serde,
    /// State channel names, by channel index.
    pub(crate) channel_names: Vec<String>,
    /// How appending channels are stored (off when values are sealed: a sealed write can
    /// only be opened with its checkpoint id, which a delta history does not carry).
    pub(crate) delta: DeltaPolicy,
    /// The state each thread's last run ended at, by checkpoint.
    pub(crate) cache: StateCache<S>,
    /// Static breakpoints given at compile time.
    pub(crate) interrupt_before: Vec<String>,
    pub(crate) interrupt_after: Vec<String>,
    /// The nodes, edges and routes as built, for drawing (set by `compile`).
    pub(crate) shape: Arc<crate::draw::Shape>,
}

impl<S: State> Graph<S> {
    /// The graph of validated nodes (START's edges in `start`) with `options`.
    pub(crate) fn new(
        template: S,
        start: Node<S>,
        nodes: Vec<Node<S>>,
        index: foldhash::HashMap<String, usize>,
        options: CompileOptions,
    ) -> Self {
        let channel_names = template
            .channels()
            .iter()
            .map(|c| c.name.to_string())
            .collect();
        Graph {
            template,
            start,
            nodes,
            index,
            checkpointer: options.checkpointer,
            store: options.store,
            delta: if options.serde.is_encrypted() {
                DeltaPolicy::off()
            } else {
                options.delta
            },
            serde: options.serde,
            cache: StateCache::default(),
            channel_names,
            interrupt_before: options.interrupt_before,
            interrupt_after: options.interrupt_after,
            shape: Arc::default(),
        }
    }

    /// The thread id a config must carry when the graph has a checkpointer.
    pub(crate) fn thread_of<'c>(&self, config: &'c RunConfig) -> Result<Option<&'c str>> {
        match (&self.checkpointer, &config.thread_id) {
            (Some(_), Some(thread)) => Ok(Some(thread)),
            (Some(_), None) => Err(Error::InvalidConfig(
                "this graph has a checkpointer: the config needs a thread_id".into(),
            )),
            (None, _) => Ok(None),
        }
    }

    /// Whether `channel` is stored as deltas.
    pub(crate) fn is_delta(&self, channel: &str) -> bool {
        self.delta.enabled
            && self
                .template
                .channels()
                .iter()
                .any(|c| c.appending && c.name == channel)
    }
}
