//! The Pregel loop: tasks of a super-step run concurrently, their writes meet at a barrier,
//! reducers fold them in a fixed order, and each step ends in one checkpoint.
//!
//! Channels, as LangGraph names them in checkpoints: one per state field; `__start__`, which
//! holds a run's input until the start task consumes it; `branch:to:{node}`, set when an
//! edge or a router picks `node` for the next step; and `__pregel_tasks`, the pending
//! `Send`s. The next step's tasks are exactly the set triggers and pending sends, so a
//! checkpoint alone says what runs next. All channels a step changes get one new version
//! (the saver's `next_version` of the greatest), and only those are written.
//!
//! This module holds [`CompiledGraph`], everything a caller does with a graph; its parts,
//! from the top down:
//!
//! - `run`: one run of the loop on a thread (loading, steps, interrupts, breakpoints);
//! - `durability`: when the run's writes and checkpoints reach the checkpointer;
//! - `snapshot`: a checkpoint as the caller sees it ([`StateSnapshot`]);
//! - `step`: one super-step's algorithm (which tasks run, routing, folding writes);
//! - `frame`: a thread's channels at one checkpoint, decoded, and the checkpoint it becomes;
//! - `graph`: the compiled nodes, channels, codec and saver every part reads;
//! - `codec`: how channel values, writes and pending `Send`s are stored.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::Stream;
use futures::future::BoxFuture;
use tracing::Instrument;
use waypoint_checkpoint::{
    BoxError, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, ListOptions, channels,
};
use waypoint_store::Store;

use crate::command::ParentCommand;
use crate::config::RunConfig;
use crate::context::{self, Context, Subgraph, sealed::RunFrom};
use crate::draw::Drawing;
use crate::error::{Error, Result};
use crate::interrupt::{Input, Outcome};
use crate::lease::LeaseGuard;
use crate::state::State;
use crate::stream::{Emitter, PartChannel, StreamMode, StreamPart};

use frame::Frame;
use graph::{END, Graph, INPUT, START};
use run::{Nested, run};
use snapshot::{Head, StateSnapshot};
pub(crate) use step::NS_SEP;

mod codec;
mod durability;
mod frame;
pub(crate) mod graph;
mod run;
pub(crate) mod snapshot;
mod step;

#[cfg(test)]
mod tests;

/// A runnable graph; cheap to clone and share across tasks.
pub struct CompiledGraph<S: State> {
    pub(crate) inner: Arc<Graph<S>>,
}

impl<S: State> Clone for CompiledGraph<S> {
    fn clone(&self) -> Self {
        CompiledGraph {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S: State> std::fmt::Debug for CompiledGraph<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledGraph")
            .field(
                "nodes",
                &self.inner.nodes.iter().map(|n| &n.name).collect::<Vec<_>>(),
            )
            .field("checkpointer", &self.inner.checkpointer)
            .finish()
    }
}

impl<S: State> CompiledGraph<S> {
    /// The runnable graph of `graph`.
    pub(crate) fn new(graph: Graph<S>) -> Self {
        CompiledGraph {
            inner: Arc::new(graph),
        }
    }

    /// The checkpointer the graph was compiled with.
    pub fn checkpointer(&self) -> Option<&Arc<dyn CheckpointSaver>> {
        self.inner.checkpointer.as_ref()
    }

    /// The store the graph was compiled with.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.inner.store.as_ref()
    }

    /// Runs the graph until it finishes or pauses, and returns the state and how it ended.
    ///
    /// `Some(update)` starts a new run on the thread (unfinished tasks of the last checkpoint
    /// are dropped); `None` continues the thread from its latest checkpoint (after a failure
    /// or a static breakpoint), or replays from `config.checkpoint_id`, re-running only what
    /// comes after that checkpoint; a [`Command`](crate::Command) resumes pending interrupts.
    ///
    /// Called inside a node of a run (on the node's own task), with the node's thread or
    /// none, the run is that node's subgraph, exactly as with [`Context::call`]: it runs in
    /// the node's namespace under the run's checkpointer, its pause is the error
    /// ([`Error::Node`] with the [`Interrupt`](crate::Interrupt) as source; pass it on with
    /// `?` and the node pauses with the subgraph's interrupts), and resuming the root graph
    /// resumes it. With another thread it is a root run of that thread.
    pub async fn invoke(
        &self,
        input: impl Into<Input<S>>,
        config: &RunConfig,
    ) -> Result<Outcome<S>> {
        let input = input.into();
        let span = run_span(config, false);
        if let Some(ctx) = context::calling_node(config) {
            return self.invoke_in_node(&ctx, input).instrument(span).await;
        }
        run(
            &self.inner,
            input,
            config,
            &Emitter::none(),
            Nested::default(),
        )
        .instrument(span)
        .await
    }

    /// [`Self::invoke`] from inside a node of a run: a subgraph run of the node, as with
    /// [`Context::call`]. A pause of the subgraph is the error, for the node to pass on with
    /// `?` (the node then pauses with every interrupt of the subgraph).
    async fn invoke_in_node(&self, ctx: &Context, input: Input<S>) -> Result<Outcome<S>> {
        let outcome = self.run_in_node(ctx, input, None).await?;
        match outcome.interrupts.first() {
            Some(first) => Err(Error::node(ctx.node(), first.clone())),
            None => Ok(outcome),
        }
    }

    /// Runs the graph like [`CompiledGraph::invoke`], yielding items of the requested modes
    /// as they happen; a failed run ends the stream with its error.
    ///
    /// The run is spawned on the current tokio runtime and goes on if the stream is dropped.
    /// Inside a node it is the node's subgraph as with `invoke`; its pause ends the stream
    /// with the error for the node to pass on, and its parts come to this stream and, when
    /// the root run streams with subgraphs, to the root's under the subgraph's namespace.
    pub fn stream(
        &self,
        input: impl Into<Input<S>>,
        config: &RunConfig,
        modes: &[StreamMode],
    ) -> impl Stream<Item = Result<StreamPart<S>>> + std::marker::Send + 'static {
        self.spawn_stream(input.into(), config, Emitter::channel(modes, false))
    }

    /// Streams like [`CompiledGraph::stream`], with the parts of every subgraph the run
    /// calls too (LangGraph's `subgraphs=True`): those come as [`StreamPart::Subgraph`],
    /// carrying the subgraph's namespace ([`StreamPart::namespace`]; empty for the graph's
    /// own parts).
    pub fn stream_subgraphs(
        &self,
        input: impl Into<Input<S>>,
        config: &RunConfig,
        modes: &[StreamMode],
    ) -> impl Stream<Item = Result<StreamPart<S>>> + std::marker::Send + 'static {
        self.spawn_stream(input.into(), config, Emitter::channel(modes, true))
    }

    /// Spawns a run streaming to `channel` (an emitter and the stream receiving its parts).
    pub(crate) fn spawn_stream(
        &self,
        input: Input<S>,
        config: &RunConfig,
        (emitter, rx): PartChannel<S>,
    ) -> impl Stream<Item = Result<StreamPart<S>>> + std::marker::Send + 'static {
        let graph = self.clone();
        let config = config.clone();
        let span = run_span(&config, true);
        // Streamed from inside a node: a subgraph run of the node, on the task spawned here.
        let caller = context::calling_node(&config);
        tokio::spawn(
            async move {
                let result = match &caller {
                    Some(ctx) => {
                        let run = graph.run_in_node(ctx, input, Some(&emitter));
                        match run.await {
                            Ok(outcome) => match outcome.interrupts.first() {
                                Some(first) => Err(Error::node(ctx.node(), first.clone())),
                                None => Ok(()),
                            },
                            Err(err) => Err(err),
                        }
                    }
                    None => run(&graph.inner, input, &config, &emitter, Nested::default())
                        .await
                        .map(drop),
                };
                if let Err(err) = result {
                    emitter.fail(err);
                }
            }
            .instrument(span),
        );
        rx
    }

    /// The thread's latest state, or the checkpoint `config.checkpoint_id` names.
    ///
    /// A thread without checkpoints gives the initial state with nothing next.
    pub async fn get_state(&self, config: &RunConfig) -> Result<StateSnapshot<S>> {
        let saver = self.require_saver()?;
        let thread = self.inner.thread_of(config)?.unwrap_or_default();
        match saver.get_tuple(&config.checkpoint_config(thread)).await? {
            Some(tuple) => {
                let head = Head::read(saver.as_ref(), &tuple).await?;
                let frame = Frame::load(&self.inner, saver, tuple, false).await?;
                Ok(snapshot::snapshot(&self.inner, head, frame))
            }
            None => Ok(snapshot::empty(&self.inner, config)),
        }
    }

    /// [`Self::get_state`], with each task that ran a subgraph pointing at the subgraph's
    /// latest checkpoint ([`TaskInfo::state`](snapshot::TaskInfo::state); LangGraph's
    /// `get_state(config, subgraphs=True)`) and carrying its snapshot, values as JSON
    /// ([`TaskInfo::subgraph`](snapshot::TaskInfo::subgraph)), and so on down; the
    /// subgraph's own `get_state` on that config gives its typed snapshot.
    pub async fn get_state_subgraphs(&self, config: &RunConfig) -> Result<StateSnapshot<S>> {
        let mut snapshot = self.get_state(config).await?;
        let (Some(saver), Some(thread)) = (self.checkpointer(), &snapshot.config.thread_id) else {
            return Ok(snapshot);
        };
        for task in &mut snapshot.tasks {
            let ns = step::task_ns(&snapshot.config.checkpoint_ns, &task.name, &task.id);
            if let Some((at, child)) =
                snapshot::subgraph(saver, thread, ns, &config.configurable).await?
            {
                task.state = Some(at);
                task.subgraph = Some(Box::new(child));
            }
        }
        Ok(snapshot)
    }

    /// The thread's checkpoints as snapshots, newest first, filtered by metadata, before a
    /// checkpoint id, and limited as `options` says. A filter on `writes` matches the
    /// `writes` the snapshots show ([`crate::stored::list`]).
    pub async fn get_state_history(
        &self,
        config: &RunConfig,
        options: &ListOptions,
    ) -> Result<Vec<StateSnapshot<S>>> {
        let saver = self.require_saver()?;
        let thread = self.inner.thread_of(config)?.unwrap_or_default();
        let list_config = CheckpointConfig {
            thread_id: thread.to_owned(),
            checkpoint_ns: Some(config.checkpoint_ns.clone()),
            checkpoint_id: None,
        };
        let mut options = options.clone();
        if options.before.is_none() {
            options.before = config.checkpoint_id.clone();
        }
        let tuples = crate::stored::list(saver.as_ref(), Some(&list_config), &options).await?;
        snapshot::history(&self.inner, saver, tuples).await
    }

    /// Applies `values` to the thread as if node `as_node` had returned them, and saves the
    /// result as a new checkpoint (`source: update`) whose parent is the latest checkpoint,
    /// or `config.checkpoint_id`'s, which forks the thread there. Returns the new config.
    ///
    /// Reducers apply as for any node. What runs next is what follows `as_node`; without
    /// `as_node`, the node that last updated the state (an error if several did at once).
    pub async fn update_state(
        &self,
        config: &RunConfig,
        values: Option<S::Update>,
        as_node: Option<&str>,
    ) -> Result<RunConfig> {
        let saver = self.require_saver()?;
        let thread = self.inner.thread_of(config)?.unwrap_or_default().to_owned();
        let (wait, ttl) = (config.wait_for_thread, config.lease_ttl);
        // A named checkpoint never changes: the update is built from it without a lease and
        // stored in one step that refuses while a run holds the thread (`put_unleased`, no
        // claim and release of its own); only then does it wait for the lease, as below.
        if config.checkpoint_id.is_some() {
            let frame = self.update_base(saver, &thread, config).await?;
            let update = self.build_update(saver, thread, config, frame, values, as_node)?;
            let Update(parent, checkpoint, metadata, new_versions) = &update;
            let stored = saver
                .put_unleased(
                    parent,
                    checkpoint.clone(),
                    metadata.clone(),
                    new_versions.clone(),
                )
                .await?;
            if let Some(stored) = stored {
                return Ok(stored_config(config, &stored));
            }
            let lease = LeaseGuard::acquire(saver, &parent.thread_id, wait, ttl).await?;
            let writer = lease
                .as_ref()
                .map_or_else(|| Arc::clone(saver), LeaseGuard::fenced);
            let put = update.put(&writer, config);
            let result = LeaseGuard::hold(lease.as_ref(), put).await;
            if let Some(lease) = lease {
                lease.release().await;
            }
            return result;
        }
        // Like a run, an update of the latest checkpoint holds the thread's lease while it
        // reads and writes, or another writer could move the latest between the read and the
        // put.
        let lease = LeaseGuard::acquire(saver, &thread, wait, ttl).await?;
        let writer = lease
            .as_ref()
            .map_or_else(|| Arc::clone(saver), LeaseGuard::fenced);
        let work = async {
            let frame = self.update_base(&writer, &thread, config).await?;
            let update = self.build_update(&writer, thread, config, frame, values, as_node)?;
            update.put(&writer, config).await
        };
        let result = LeaseGuard::hold(lease.as_ref(), work).await;
        if let Some(lease) = lease {
            lease.release().await;
        }
        result
    }

    /// The frame an update of `config` starts from: its checkpoint, or the thread's latest.
    async fn update_base(
        &self,
        saver: &Arc<dyn CheckpointSaver>,
        thread: &str,
        config: &RunConfig,
    ) -> Result<Frame<S>> {
        let graph = &*self.inner;
        let at = config.checkpoint_config(thread);
        // A named checkpoint (a fork) that is not the cached state is read with its
        // history at once; a cached one (or the latest) reads its history only if needed.
        let cached = |id: &str| {
            let ns = at.checkpoint_ns.as_deref().unwrap_or_default();
            graph.cache.lookup(thread, ns, id, false).is_some()
        };
        if at.checkpoint_id.as_deref().is_some_and(|id| !cached(id)) {
            let appending = Frame::appending(graph);
            if let Some(read) = saver.get_tuple_with_history(&at, &appending).await? {
                return Frame::with_history(graph, read);
            }
        }
        match saver.get_tuple(&at).await? {
            Some(tuple) => Frame::load(graph, saver, tuple, false).await,
            None if config.checkpoint_id.is_some() => Err(Error::InvalidConfig(format!(
                "checkpoint `{}` of thread `{thread}` does not exist",
                config.checkpoint_id.as_deref().unwrap_or("")
            ))),
            None => Ok(Frame::fresh(graph)),
        }
    }

    /// The checkpoint [`Self::update_state`] stores, built from `frame`.
    fn build_update(
        &self,
        saver: &Arc<dyn CheckpointSaver>,
        thread: String,
        config: &RunConfig,
        mut frame: Frame<S>,
        values: Option<S::Update>,
        as_node: Option<&str>,
    ) -> Result<Update> {
        let graph = &*self.inner;
        let as_node = match as_node {
            Some(name) => name.to_owned(),
            None => frame.last_writer(graph)?,
        };
        let node = if as_node == START {
            &graph.start
        } else if as_node == END {
            return Err(Error::InvalidUpdate(
                "update_state as END is not supported; name the node the update comes from".into(),
            ));
        } else {
            let index = *graph.index.get(&as_node).ok_or_else(|| {
                Error::InvalidUpdate(format!("as_node `{as_node}` is not a node of this graph"))
            })?;
            &graph.nodes[index]
        };

        // The update is a task of `as_node`: what was pending is replaced by its routing.
        let version = frame.next_version(graph)?;
        let output = step::route(graph, node, &frame.state, values.as_ref(), Vec::new())?;
        let mut changed = BTreeSet::new();
        if frame.input.take().is_some() {
            changed.insert(INPUT.to_owned());
        }
        for i in std::mem::take(&mut frame.triggered) {
            changed.insert(graph.nodes[i].trigger.clone());
        }
        if !frame.sends.is_empty() {
            frame.sends.clear();
            changed.insert(channels::TASKS.to_owned());
        }
        // The frame was loaded clean: what is dirty now is what the update changed.
        step::apply(graph, &mut frame, &[], vec![output], &version)?;
        changed.append(&mut frame.dirty);
        frame
            .seen
            .entry(as_node.clone())
            .or_default()
            .insert(node.trigger.clone(), version.clone());
        for name in &changed {
            frame.versions.insert(name.clone(), version.clone());
        }

        let step = frame.step + 1;
        let parent_id = frame.checkpoint_id.take();
        frame.step = step;
        frame.checkpoint_id = Some(waypoint_checkpoint::checkpoint_id(step));
        // The parent's saved writes do not lead here, so appending channels store values.
        let (checkpoint, new_versions) =
            frame.build_checkpoint(graph, changed, true, &thread, &config.checkpoint_ns)?;
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Update, step);
        crate::delta::write_counters(&frame.delta, &mut metadata.extra);
        let update = durability::update_json(values.as_ref())?;
        let writes = serde_json::Value::Object([(as_node.clone(), update)].into_iter().collect());
        durability::record_writes(graph, &**saver, &mut metadata, writes);
        if let Some(run_id) = &config.run_id {
            metadata = metadata.with_run_id(run_id.clone());
        }
        let parent = CheckpointConfig {
            thread_id: thread,
            checkpoint_ns: Some(config.checkpoint_ns.clone()),
            checkpoint_id: parent_id,
        };
        Ok(Update(parent, checkpoint, metadata, new_versions))
    }

    /// The checkpointer, or an error saying the graph was compiled without one.
    fn require_saver(&self) -> Result<&Arc<dyn CheckpointSaver>> {
        self.inner.checkpointer.as_ref().ok_or_else(|| {
            Error::InvalidConfig("this graph has no checkpointer: compile it with one".into())
        })
    }
}

/// A checkpoint `update_state` stores: its parent's config, the checkpoint, its metadata and
/// the channels it changed.
struct Update(
    CheckpointConfig,
    Checkpoint,
    CheckpointMetadata,
    ChannelVersions,
);

impl Update {
    /// Stores the update with `saver`.
    async fn put(self, saver: &Arc<dyn CheckpointSaver>, config: &RunConfig) -> Result<RunConfig> {
        let Update(parent, checkpoint, metadata, new_versions) = self;
        let stored = saver
            .put(&parent, checkpoint, metadata, new_versions)
            .await?;
        Ok(stored_config(config, &stored))
    }
}

/// The config of a stored update: `stored`, with `config`'s configurable entries.
fn stored_config(config: &RunConfig, stored: &CheckpointConfig) -> RunConfig {
    RunConfig {
        configurable: config.configurable.clone(),
        ..RunConfig::from(stored)
    }
}

impl<S: State> Subgraph<S> for CompiledGraph<S> {}

impl<S: State> RunFrom<S> for CompiledGraph<S> {
    fn run_from<'a>(
        &'a self,
        ctx: &'a Context,
        input: Option<S::Update>,
    ) -> BoxFuture<'a, Result<Arc<S>, BoxError>> {
        Box::pin(async move {
            if ctx.call.is_none() {
                return Ok(self.invoke(input, &ctx.config).await?.values);
            }
            let outcome = match self.run_in_node(ctx, Input::from(input), None).await {
                Ok(outcome) => outcome,
                // A command for this node's graph goes up as it is, for the node to pass on.
                Err(Error::Node { source, .. }) if source.is::<ParentCommand>() => {
                    return Err(source);
                }
                Err(err) => return Err(err.into()),
            };
            match outcome.interrupts.into_iter().next() {
                Some(first) => Err(Box::new(first) as BoxError),
                None => Ok(outcome.values),
            }
        })
    }
}

impl<S: State> CompiledGraph<S> {
    /// Runs the graph as a subgraph of the node whose context is `ctx` (which has a call
    /// site): in the node's next subgraph namespace, on its run's checkpointer, resuming
    /// what the node's resume brought. Its parts go to `emitter`, or, without one, to the
    /// run's subgraph stream. When it pauses, the node's task records every interrupt.
    async fn run_in_node(
        &self,
        ctx: &Context,
        input: Input<S>,
        emitter: Option<&Emitter<S>>,
    ) -> Result<Outcome<S>> {
        let Some(site) = &ctx.call else {
            return Err(Error::InvalidConfig(format!(
                "node `{}` has no call site to run a subgraph from",
                ctx.node
            )));
        };
        let input = match input {
            Input::Command(_) => {
                return Err(Error::InvalidUpdate(format!(
                    "node `{}` ran a graph with a Command: a graph run inside a node is its \
                     subgraph and resumes with it; resume the root graph instead",
                    ctx.node
                )));
            }
            Input::Update(update) => Some(update),
            Input::Continue => None,
        };
        let ns = match site.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => site.task_ns.clone(),
            k => format!("{}{NS_SEP}{k}", site.task_ns),
        };
        let mut config = RunConfig {
            checkpoint_ns: ns.clone(),
            checkpoint_id: None,
            ..(*ctx.config).clone()
        };
        let fresh = ctx.scratch.as_ref().and_then(|s| {
            s.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .fresh_for_subgraph()
        });
        let input = match site.checkpoint_map.get(&ns) {
            Some(id) => {
                config.checkpoint_id = Some(id.clone());
                Input::Continue
            }
            None => Input::from(input),
        };
        let nested = Nested {
            saver: site.saver.clone(),
            parents: site.parents.clone(),
            checkpoint_map: Arc::clone(&site.checkpoint_map),
            continue_unfinished: !site.replaying,
            start_over: site.replaying && !site.checkpoint_map.contains_key(&ns),
            resume: fresh,
        };
        // Streamed by the node: to its stream, and to the root's when that has subgraphs.
        let stream = match emitter {
            Some(emitter) => emitter.also(site.stream.as_ref(), &ns),
            None => Emitter::nested(site.stream.as_ref(), &ns),
        };
        let outcome = run(&self.inner, input, &config, &stream, nested).await?;
        if !outcome.interrupts.is_empty()
            && let Some(scratch) = &ctx.scratch
        {
            let mut scratch = scratch.lock().unwrap_or_else(|p| p.into_inner());
            scratch.bubbled = outcome.interrupts.clone();
        }
        Ok(outcome)
    }
}

/// The span of one run: `invoke`, or `stream` for a streamed one.
fn run_span(config: &RunConfig, streamed: bool) -> tracing::Span {
    macro_rules! run_span {
        ($name:literal) => {
            tracing::info_span!(
                $name,
                thread_id = config.thread_id.as_deref(),
                checkpoint_ns = %config.checkpoint_ns,
                checkpoint_id = config.checkpoint_id.as_deref(),
                durability = %config.durability,
            )
        };
    }
    if streamed {
        run_span!("stream")
    } else {
        run_span!("invoke")
    }
}

impl<S: State> CompiledGraph<S> {
    /// The graph's nodes and edges as LangGraph's `get_graph(xray=...)` finds them, to print
    /// with [`Drawing::draw_mermaid`] or [`Drawing::draw_ascii`].
    ///
    /// `xray` is how many levels of subgraphs (compiled graphs added with
    /// [`add_subgraph`](crate::StateGraph::add_subgraph)) to draw inside, `0` drawing each as
    /// one node and `usize::MAX` every level (LangGraph's `xray=True`).
    ///
    /// ```
    /// use waypoint_runtime::{CompileOptions, Context, JsonSchema, NodeResult, StateGraph, END, START};
    ///
    /// async fn step(_: waypoint_runtime::JsonState, _: Context) -> NodeResult<serde_json::Map<String, serde_json::Value>> {
    ///     Ok(serde_json::Map::new())
    /// }
    /// let mut inner = StateGraph::json(JsonSchema::new().last_value("x"));
    /// inner.add_node("think", step).add_edge(START, "think").add_edge("think", END);
    /// let mut outer = StateGraph::json(JsonSchema::new().last_value("x"));
    /// outer.add_subgraph("agent", inner.compile(CompileOptions::default())?);
    /// outer.add_edge(START, "agent").add_edge("agent", END);
    /// let graph = outer.compile(CompileOptions::default())?;
    ///
    /// assert!(graph.drawing(0).nodes.iter().any(|n| n.id == "agent"));
    /// assert!(graph.drawing(1).nodes.iter().any(|n| n.id == "agent:think"));
    /// # Ok::<(), waypoint_runtime::Error>(())
    /// ```
    pub fn drawing(&self, xray: usize) -> Drawing {
        self.inner.shape.drawing(xray)
    }

    /// The graph as Mermaid flowchart text, as LangGraph's `get_graph().draw_mermaid()`
    /// prints it (subgraphs as one node; see [`drawing`](Self::drawing) to draw them inside).
    ///
    /// ```
    /// use waypoint_runtime::{CompileOptions, Context, JsonSchema, JsonState, NodeResult, StateGraph, END, START};
    ///
    /// async fn step(_: JsonState, _: Context) -> NodeResult<serde_json::Map<String, serde_json::Value>> {
    ///     Ok(serde_json::Map::new())
    /// }
    /// let mut graph = StateGraph::json(JsonSchema::new().last_value("x"));
    /// graph.add_node("a", step).add_edge(START, "a").add_edge("a", END);
    /// let graph = graph.compile(CompileOptions::default())?;
    ///
    /// assert_eq!(graph.drawing(0).draw_mermaid(false), "graph TD;\n\t__start__ --> a;\n\ta --> __end__;\n");
    /// assert!(graph.draw_mermaid().contains("\t__start__([<p>__start__</p>]):::first\n"));
    /// # Ok::<(), waypoint_runtime::Error>(())
    /// ```
    pub fn draw_mermaid(&self) -> String {
        self.drawing(0).draw_mermaid(true)
    }

    /// The graph as a layered text drawing (see [`Drawing::draw_ascii`]).
    pub fn draw_ascii(&self) -> String {
        self.drawing(0).draw_ascii()
    }
}
