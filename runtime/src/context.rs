//! What a running node can reach: its run's config, the store, the custom and messages
//! streams.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use waypoint_checkpoint::{BoxError, CheckpointSaver};
use waypoint_store::Store;

use crate::config::RunConfig;
use crate::interrupt::{Interrupt, SharedScratch};
use crate::messages::AiMessageChunk;
use crate::state::State;
use crate::stream::{CustomSink, MessageMetadata, MessageSink, Streamed, SubgraphStream};

/// The context passed to every node call.
#[derive(Clone)]
pub struct Context {
    pub(crate) config: Arc<RunConfig>,
    pub(crate) store: Option<Arc<dyn Store>>,
    pub(crate) custom: Option<CustomSink>,
    pub(crate) messages: Option<MessageSink>,
    pub(crate) node: Arc<str>,
    pub(crate) step: i64,
    /// The last step the run may take (its start step plus the recursion limit).
    pub(crate) stop: i64,
    pub(crate) scratch: Option<SharedScratch>,
    pub(crate) call: Option<Arc<CallSite>>,
}

/// Where a node runs, for the subgraphs it calls: their namespace, parents and saver.
pub(crate) struct CallSite {
    pub(crate) saver: Option<Arc<dyn CheckpointSaver>>,
    /// The calling task's checkpoint namespace, `{graph ns}|{node}:{task id}`.
    pub(crate) task_ns: String,
    /// Subgraph calls the task made so far: the k-th after the first runs in
    /// `{task ns}|{k}`, as in LangGraph.
    pub(crate) calls: std::sync::atomic::AtomicUsize,
    /// Namespace to checkpoint id of the calling graph and its ancestors.
    pub(crate) parents: BTreeMap<String, String>,
    pub(crate) checkpoint_map: Arc<BTreeMap<String, String>>,
    /// Whether the calling step replays a past checkpoint (its subgraphs then start over).
    pub(crate) replaying: bool,
    /// Where the subgraphs stream, when the run streams with subgraphs.
    pub(crate) stream: Option<SubgraphStream>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("node", &self.node)
            .field("step", &self.step)
            .field("config", &self.config)
            .finish()
    }
}

impl Context {
    /// The run's config (thread id, user keys such as `user_id`).
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The thread this run belongs to, if any.
    pub fn thread_id(&self) -> Option<&str> {
        self.config.thread_id.as_deref()
    }

    /// The long-term store given at compile time.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The store, or an error saying the graph was compiled without one.
    pub fn require_store(&self) -> crate::error::Result<&Arc<dyn Store>> {
        self.store.as_ref().ok_or_else(|| {
            crate::error::Error::InvalidConfig(format!(
                "node `{}` needs a store: compile the graph with CompileOptions::store",
                self.node
            ))
        })
    }

    /// The name of the running node.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The super-step being run.
    pub fn step(&self) -> i64 {
        self.step
    }

    /// How many more steps the run may take after this one before its recursion limit
    /// stops it (LangGraph's `RemainingSteps` managed value): 0 in the last allowed step.
    pub fn remaining_steps(&self) -> i64 {
        self.stop.saturating_sub(self.step)
    }

    /// Whether the step after this one would pass the recursion limit (LangGraph's
    /// `IsLastStep`: one step left).
    pub fn is_last_step(&self) -> bool {
        self.remaining_steps() == 1
    }

    /// Pauses the run for a human: the first time, returns `Err(Interrupt)` (propagate it
    /// with `?`) and the run ends with the interrupt pending; once resumed, the node runs
    /// again from its start and this call returns the resume value. The k-th call of a
    /// node returns the k-th resume value.
    pub fn interrupt(&self, value: impl Serialize) -> Result<Value, Interrupt> {
        let value = serde_json::to_value(value).unwrap_or_else(|e| Value::String(e.to_string()));
        match &self.scratch {
            Some(scratch) => scratch
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .next(value),
            None => Err(Interrupt::new(value, "")),
        }
    }

    /// Runs `graph` as a subgraph of this node, on this run's thread and checkpointer, in
    /// its own namespace (LangGraph's: `node:task_id` below the graph's namespace, then
    /// `|1`, `|2`... for the node's second, third... call); returns its final state.
    ///
    /// When the subgraph pauses on an interrupt, this returns that interrupt as the error
    /// (propagate it with `?`): the node pauses too, with every interrupt of the subgraph.
    /// On resume the node runs again from its start and this call resumes the subgraph
    /// where it stopped (its finished nodes do not run again), passing the resume value
    /// down.
    pub async fn call<S2: State>(
        &self,
        graph: &impl Subgraph<S2>,
        input: Option<S2::Update>,
    ) -> Result<Arc<S2>, BoxError> {
        graph.run_from(self, input).await
    }

    /// Sends a piece of the message this node is producing to the `messages` stream (dropped
    /// when nobody streams that mode). Give every chunk of one message the same id, and put
    /// the whole message, with that id, in the node's update.
    pub fn stream_message(&self, chunk: AiMessageChunk) {
        let id = chunk.id.clone();
        self.to_message_sink(Streamed::Chunk(chunk), id);
    }

    /// Sends `streamed` to the messages sink (when the run has one), from this node's task.
    pub(crate) fn to_message_sink(&self, streamed: Streamed, id: Option<String>) {
        if let Some(sink) = &self.messages {
            let metadata = MessageMetadata {
                node: self.node.to_string(),
                step: self.step,
                namespace: self.config.checkpoint_ns.clone(),
                checkpoint_ns: self
                    .call
                    .as_ref()
                    .map(|site| site.task_ns.clone())
                    .unwrap_or_default(),
                id,
            };
            sink(streamed, metadata);
        }
    }

    /// Sends `value` to the `custom` stream (dropped when nobody streams that mode).
    pub fn write_custom(&self, value: impl Serialize) {
        if let Some(sink) = &self.custom {
            let value =
                serde_json::to_value(value).unwrap_or_else(|e| Value::String(e.to_string()));
            sink(&self.node, value);
        }
    }
}

tokio::task_local! {
    /// The context of the node running on this task, set by the runtime around each node
    /// call: a graph run from inside a node (`invoke`, `stream`) runs as its subgraph.
    static CURRENT: Context;
}

/// Runs `node` (a node call) with `ctx` as the context of the node running on this task.
pub(crate) async fn scope<F: std::future::Future>(ctx: Context, node: F) -> F::Output {
    CURRENT.scope(ctx, node).await
}

/// The context of the node whose task is running, when a graph run with `config` is a
/// subgraph run of it: inside a node of a run, on the node's thread (or naming none).
/// A run on another thread stays a root run of its own.
pub(crate) fn calling_node(config: &RunConfig) -> Option<Context> {
    let ctx = CURRENT.try_with(Context::clone).ok()?;
    let same_thread = config.thread_id.is_none() || config.thread_id == ctx.config.thread_id;
    (same_thread && ctx.call.is_some()).then_some(ctx)
}

/// A node's (or tool's) error as its task sees it: a graph it ran with `invoke` or `stream`
/// (its subgraph) reports its pause, or its command for the caller's graph, inside a run
/// error; this takes that pause or command out, to handle as if raised directly.
pub(crate) fn bubbled(source: BoxError) -> BoxError {
    match source.downcast::<crate::error::Error>() {
        Ok(err) => match *err {
            crate::error::Error::Node { source, .. }
                if source.is::<Interrupt>() || source.is::<crate::command::ParentCommand>() =>
            {
                source
            }
            err => Box::new(err),
        },
        Err(source) => source,
    }
}

/// A graph a node can run as its subgraph with [`Context::call`]: a
/// [`CompiledGraph`](crate::CompiledGraph).
// A trait, so that the context (which the loop creates) runs graphs without importing the
// loop; sealed, so that only the runtime's graphs implement it.
pub trait Subgraph<S: State>: sealed::RunFrom<S> {}

pub(crate) mod sealed {
    use super::*;

    /// How a [`Subgraph`] runs.
    pub trait RunFrom<S: State>: Send + Sync {
        /// Runs the graph from the node whose context is `ctx`, with `input`, and returns its
        /// final state, or its interrupt as the error.
        fn run_from<'a>(
            &'a self,
            ctx: &'a Context,
            input: Option<S::Update>,
        ) -> BoxFuture<'a, Result<Arc<S>, BoxError>>;
    }
}
