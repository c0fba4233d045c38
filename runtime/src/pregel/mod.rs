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
//! Task ids are derived as LangGraph derives them (see [`task_id`]): from the checkpoint they
//! start from, the graph's namespace, the step, the node and the trigger (or the index of the
//! pending `Send`), so a resumed run finds the writes its finished tasks saved with
//! `put_writes` and does not run them again, whichever of Waypoint and Python LangGraph wrote
//! them. A task runs its subgraphs in the namespace `{graph ns}|{node}:{task id}`, LangGraph's.
//!
//! A step folds its tasks' writes in LangGraph's order, by task path: triggered nodes by name,
//! then pending sends by index.
//!
//! This module holds the compiled graph and a step's parts (loading a checkpoint, preparing
//! tasks, routing, folding writes, building the next checkpoint); `run` drives them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use waypoint_checkpoint::metadata;

use serde_json::Value;
use waypoint_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointSaver, CheckpointSource,
    CheckpointTuple, PendingWrite, Serde, SerializedValue, Slot, channels, serde::TAG_NULL,
};
use waypoint_store::Store;

use crate::cache::StateCache;
use crate::command::Goto;
use crate::config::RunConfig;
use crate::delta::{DeltaCounter, DeltaPolicy};
use crate::graph::{Branch, CompileOptions, END, NodeFn, START};
use crate::interrupt::{Input, Interrupt, Outcome};
use crate::lease::LeaseGuard;
use run::{Nested, Run};
use crate::state::State;
use crate::stream::Emitter;
use crate::{Error, Result};

/// The channel holding a run's input.
pub(crate) const INPUT: &str = START;
/// The prefix of trigger channels.
pub(crate) const BRANCH_PREFIX: &str = "branch:to:";
/// The write of a task that finished without writing anything.
const NO_WRITES: &str = "__no_writes__";
/// A control write of LangGraph (the node of a failed task with an error handler): it does
/// not make the task finished.
const ERROR_SOURCE_NODE: &str = "__error_source_node__";
/// The first part of a triggered task's path, and of the hash its id is.
const PULL: &str = "__pregel_pull";
/// The first part of a pending send's task path, and of the hash its id is.
const PUSH: &str = "__pregel_push";
/// LangGraph's separator of namespace levels.
pub(crate) const NS_SEP: &str = "|";
/// LangGraph's separator of a node and its task id in a namespace level.
pub(crate) const NS_END: &str = ":";
/// The `versions_seen` entry recording the channel versions at the last resume, so a
/// static breakpoint does not fire again for a step it already paused.
pub(crate) const INTERRUPT_SEEN: &str = channels::INTERRUPT;

/// What a step's saved writes say about one of its tasks.
pub(crate) enum SavedTask<S: State> {
    /// It finished: its output.
    Done(TaskOutput<S>),
    /// It failed or paused: run it again, with the resume values it already consumed.
    Unfinished { answered: Vec<Value> },
}

/// How a step ended.
pub(crate) enum StepEnd<S: State> {
    /// Every task finished: their outputs, in task order, and the bytes they wrote to each
    /// appending channel.
    Done(Vec<TaskOutput<S>>, BTreeMap<String, u64>),
    /// Some tasks paused; the step does not end in a checkpoint.
    Interrupted(Vec<Interrupt>),
}

/// How one task of a step ended.
pub(crate) enum TaskEnd<S: State> {
    Done(TaskOutput<S>),
    /// Paused: its own interrupt, or every interrupt of a subgraph it called.
    Interrupted(Vec<Interrupt>),
    Failed(Error),
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

pub(crate) struct Inner<S: State> {
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
}

/// A runnable graph; cheap to clone and share across tasks.
pub struct CompiledGraph<S: State> {
    pub(crate) inner: Arc<Inner<S>>,
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

/// Which kind of task, and its position (part of the task id).
#[derive(Clone, Debug)]
pub(crate) enum TaskKind {
    /// Triggered by a channel (an edge, a router, or the input).
    Pull,
    /// The `i`-th pending `Send`.
    Push(usize),
}

/// One task of a step.
pub(crate) struct Task<S: State> {
    pub(crate) id: String,
    /// Node index, or `None` for the start task.
    pub(crate) node: Option<usize>,
    pub(crate) name: String,
    pub(crate) kind: TaskKind,
    /// The state a pushed task receives; `None` for the others, which read the frame's.
    pub(crate) input: Option<Arc<S>>,
    /// LangGraph's task path as `put_writes` stores it; a step's writes fold in its order.
    pub(crate) path: String,
    /// The task's own checkpoint namespace, `{graph ns}|{name}:{id}`: its subgraphs run in
    /// it and its interrupt ids hash it.
    pub(crate) ns: String,
}

/// What a task produced, ready for the barrier.
pub(crate) struct TaskOutput<S: State> {
    pub(crate) update: Option<S::Update>,
    /// Node indices to trigger.
    pub(crate) triggers: Vec<usize>,
    pub(crate) sends: Vec<(String, S)>,
}

impl<S: State> Default for TaskOutput<S> {
    fn default() -> Self {
        TaskOutput {
            update: None,
            triggers: Vec::new(),
            sends: Vec::new(),
        }
    }
}

/// The channels of a thread at one checkpoint, decoded.
pub(crate) struct Frame<S: State> {
    /// Shared with the step's tasks, so a node's input costs no copy; changed only at the
    /// barrier, when the tasks have let go of it.
    pub(crate) state: Arc<S>,
    pub(crate) versions: BTreeMap<String, ChannelVersion>,
    pub(crate) seen: BTreeMap<String, BTreeMap<String, ChannelVersion>>,
    pub(crate) input: Option<S::Update>,
    /// Node indices whose trigger channel is set.
    pub(crate) triggered: BTreeSet<usize>,
    pub(crate) sends: Vec<(String, S)>,
    pub(crate) step: i64,
    /// The checkpoint this frame is (`None` before the first).
    pub(crate) checkpoint_id: Option<String>,
    /// Writes saved against that checkpoint.
    pub(crate) pending: Vec<PendingWrite>,
    /// Channels changed since the last checkpoint that reached the saver.
    pub(crate) dirty: BTreeSet<String>,
    /// The last checkpoint that reached the saver (the parent of the next put).
    pub(crate) persisted_id: Option<String>,
    /// The thread and namespace of that checkpoint (to open sealed writes).
    pub(crate) thread: Option<String>,
    pub(crate) ns: String,
    /// For a fork made to replay a checkpoint: that checkpoint's id. Task ids derive from
    /// it, so the replayed tasks keep their ids (and their subgraphs their namespaces).
    pub(crate) task_base: Option<String>,
    /// The loaded checkpoint has format version 1, whose task ids LangGraph derived with
    /// sha1 instead of xxh3.
    pub(crate) legacy_ids: bool,
    /// Why the loaded checkpoint was written.
    pub(crate) source: Option<CheckpointSource>,
    /// Appending channels: what they wrote since their last snapshot.
    pub(crate) delta: BTreeMap<String, DeltaCounter>,
    /// Appending channels the loaded checkpoint did not store (rebuilt from history).
    pub(crate) missing: Vec<String>,
    /// The next checkpoint stores every appending channel's value.
    pub(crate) snapshot_all: bool,
}

impl<S: State> CompiledGraph<S> {
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
        CompiledGraph {
            inner: Arc::new(Inner {
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
            }),
        }
    }

    /// The `__interrupt__` writes of a frame's checkpoint that are pending, as LangGraph
    /// reads them: those of tasks that have not finished (a task with an output write has).
    fn interrupt_writes<'f>(&self, frame: &'f Frame<S>) -> Vec<&'f PendingWrite> {
        let finished: BTreeSet<&str> = frame
            .pending
            .iter()
            .filter(|w| w.task_id != channels::NULL_TASK_ID && !is_control(&w.channel))
            .map(|w| w.task_id.as_str())
            .collect();
        frame
            .pending
            .iter()
            .filter(|w| {
                w.channel == channels::INTERRUPT
                    && w.task_id != channels::NULL_TASK_ID
                    && !finished.contains(w.task_id.as_str())
            })
            .collect()
    }

    /// The interrupts pending on a frame's checkpoint, by task id (see
    /// [`Self::interrupt_writes`]). An interrupt write that cannot be read is an error naming
    /// its task.
    pub(crate) fn read_interrupts(
        &self,
        frame: &Frame<S>,
    ) -> Result<BTreeMap<String, Vec<Interrupt>>> {
        let mut out: BTreeMap<String, Vec<Interrupt>> = BTreeMap::new();
        for write in self.interrupt_writes(frame) {
            let interrupts = self.read_interrupt_write(frame, write).map_err(|e| {
                Error::InvalidUpdate(format!(
                    "the interrupt of task `{}` cannot be read: {e}",
                    write.task_id
                ))
            })?;
            out.entry(write.task_id.clone())
                .or_default()
                .extend(interrupts);
        }
        Ok(out)
    }

    /// [`Self::read_interrupts`] for display, which cannot fail: an interrupt write that
    /// cannot be read shows as an interrupt with no id whose value says why.
    pub(crate) fn pending_interrupts(&self, frame: &Frame<S>) -> BTreeMap<String, Vec<Interrupt>> {
        let mut out: BTreeMap<String, Vec<Interrupt>> = BTreeMap::new();
        for write in self.interrupt_writes(frame) {
            let interrupts = self.read_interrupt_write(frame, write).unwrap_or_else(|e| {
                vec![Interrupt::new(
                    Value::String(format!("<cannot decode interrupt: {e}>")),
                    "",
                )]
            });
            out.entry(write.task_id.clone())
                .or_default()
                .extend(interrupts);
        }
        out
    }

    /// The interrupts of one `__interrupt__` write: a list (LangGraph writes a tuple), or a
    /// single interrupt.
    fn read_interrupt_write(
        &self,
        frame: &Frame<S>,
        write: &PendingWrite,
    ) -> Result<Vec<Interrupt>> {
        // Interrupt values are sealed like any write.
        let value = match (&frame.thread, &frame.checkpoint_id) {
            (Some(thread), Some(checkpoint_id)) => open(
                &self.inner.serde,
                &write.value,
                &Slot::Write {
                    thread_id: thread,
                    checkpoint_ns: &frame.ns,
                    checkpoint_id,
                    task_id: &write.task_id,
                    channel: &write.channel,
                    idx: channels::write_index(&write.channel, 0),
                },
                &write.channel,
            )?,
            _ => write.value.clone(),
        };
        let raw: Value = decode(&self.inner.serde, &value, &write.channel)?;
        let items = match raw {
            Value::Array(items) if items.iter().all(|i| !i.is_string()) => items,
            single => vec![single],
        };
        items
            .into_iter()
            .map(|item| {
                Interrupt::from_value(item).map_err(|e| {
                    crate::state::channel_error(
                        channels::INTERRUPT,
                        waypoint_checkpoint::Error::serialization(value.type_tag.as_ref(), e),
                    )
                })
            })
            .collect()
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
    pub async fn invoke(
        &self,
        input: impl Into<Input<S>>,
        config: &RunConfig,
    ) -> Result<Outcome<S>> {
        self.run(input.into(), config, &Emitter::none()).await
    }

    pub(crate) async fn run(
        &self,
        input: Input<S>,
        config: &RunConfig,
        emitter: &Emitter<S>,
    ) -> Result<Outcome<S>> {
        self.run_nested(input, config, emitter, Nested::default())
            .await
    }

    /// Runs the graph as a subgraph (or the root, with a default `nested`).
    pub(crate) async fn run_nested(
        &self,
        input: Input<S>,
        config: &RunConfig,
        emitter: &Emitter<S>,
        nested: Nested,
    ) -> Result<Outcome<S>> {
        let mut run = Run::new(self, config, emitter, nested)?;
        // The root run holds the thread's lease; its subgraphs write under it.
        let lease = match run.saver() {
            Some((saver, thread)) if run.nested.parents.is_empty() => {
                let (wait, ttl) = (config.wait_for_thread, config.lease_ttl);
                LeaseGuard::acquire(saver, thread, wait, ttl).await?
            }
            _ => None,
        };
        // Every write of the run (its subgraphs' too) proves the lease still holds.
        if let Some(lease) = &lease {
            run.nested.saver = Some(lease.fenced());
        }
        let result = run.execute(input).await;
        // Exit durability (and a failed run) still leave the thread where the run stopped.
        let finished = run.finish().await;
        if let Some(lease) = lease {
            lease.release().await;
        }
        let interrupts = result?;
        finished?;
        run.remember();
        Ok(Outcome {
            values: run.frame.state,
            interrupted: interrupts.is_some(),
            interrupts: interrupts.unwrap_or_default(),
        })
    }

    /// The thread id a config must carry when the graph has a checkpointer.
    pub(crate) fn thread_of<'c>(&self, config: &'c RunConfig) -> Result<Option<&'c str>> {
        match (&self.inner.checkpointer, &config.thread_id) {
            (Some(_), Some(thread)) => Ok(Some(thread)),
            (Some(_), None) => Err(Error::InvalidConfig(
                "this graph has a checkpointer: the config needs a thread_id".into(),
            )),
            (None, _) => Ok(None),
        }
    }

    /// A frame with no checkpoint: the template state.
    pub(crate) fn fresh_frame(&self) -> Frame<S> {
        Frame {
            state: Arc::new(self.inner.template.clone()),
            versions: BTreeMap::new(),
            seen: BTreeMap::new(),
            input: None,
            triggered: BTreeSet::new(),
            sends: Vec::new(),
            step: -2,
            checkpoint_id: None,
            pending: Vec::new(),
            dirty: BTreeSet::new(),
            persisted_id: None,
            thread: None,
            ns: String::new(),
            task_base: None,
            legacy_ids: false,
            source: None,
            delta: BTreeMap::new(),
            missing: Vec::new(),
            snapshot_all: false,
        }
    }

    /// Decodes a stored checkpoint into a frame.
    pub(crate) fn load_frame(&self, tuple: CheckpointTuple) -> Result<Frame<S>> {
        let inner = &self.inner;
        let CheckpointTuple {
            config,
            checkpoint,
            metadata,
            pending_writes,
            ..
        } = tuple;
        let mut frame = self.fresh_frame();
        let thread = config.thread_id.as_str();
        let ns = config.checkpoint_ns.as_deref().unwrap_or("");
        for (name, stored) in &checkpoint.channel_values {
            let slot = channel_slot(thread, ns, name, &checkpoint.channel_versions);
            if let Some(i) = frame.state.channel_index(name) {
                let value = open(&inner.serde, stored, &slot, name)?;
                Arc::make_mut(&mut frame.state).load_channel(i, &value, &inner.serde)?;
            } else if name == INPUT {
                let value = open(&inner.serde, stored, &slot, name)?;
                frame.input = Some(decode(&inner.serde, &value, name)?);
            } else if let Some(node) = name.strip_prefix(BRANCH_PREFIX) {
                if let Some(&i) = inner.index.get(node) {
                    frame.triggered.insert(i);
                }
            } else if name == channels::TASKS {
                let value = open(&inner.serde, stored, &slot, name)?;
                let sends: Vec<SendPacket<S>> = decode(&inner.serde, &value, name)?;
                frame.sends = sends.into_iter().map(|p| (p.0, p.1)).collect();
            }
        }
        frame.missing = inner
            .channel_names
            .iter()
            .filter(|name| {
                self.is_delta(name)
                    && checkpoint.channel_versions.contains_key(*name)
                    && !checkpoint.channel_values.contains_key(*name)
            })
            .cloned()
            .collect();
        frame.legacy_ids = checkpoint.v <= 1;
        frame.versions = checkpoint.channel_versions;
        frame.seen = checkpoint.versions_seen;
        frame.step = metadata.step.unwrap_or(-1);
        frame.checkpoint_id = Some(checkpoint.id.clone());
        frame.persisted_id = Some(checkpoint.id);
        frame.pending = pending_writes;
        frame.thread = Some(thread.to_owned());
        frame.ns = ns.to_owned();
        frame.source = metadata.source;
        frame.delta = crate::delta::read_counters(&metadata.extra);
        frame.task_base = metadata
            .extra
            .get(metadata::FORKED_FROM)
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(frame)
    }

    /// Decodes a stored checkpoint, rebuilding its appending channels from their history.
    ///
    /// A run continuing the thread takes the cached state (`take`), so it alone holds it and
    /// changes it in place; readers (`get_state`, `update_state`) leave it for the next run.
    pub(crate) async fn load(
        &self,
        saver: &Arc<dyn CheckpointSaver>,
        tuple: CheckpointTuple,
        take: bool,
    ) -> Result<Frame<S>> {
        let config = tuple.config.clone();
        let mut frame = self.load_frame(tuple)?;
        if frame.missing.is_empty() {
            return Ok(frame);
        }
        let cached = match (&frame.thread, &frame.checkpoint_id) {
            (Some(thread), Some(id)) => self.inner.cache.lookup(thread, &frame.ns, id, take),
            _ => None,
        };
        match cached {
            // The cached state is the state at this very checkpoint.
            Some(cached) => {
                frame.state = cached;
                frame.missing.clear();
            }
            None => {
                let history = saver.delta_channel_history(&config, &frame.missing).await?;
                for (channel, history) in history {
                    let (seed, writes) = (history.seed.as_ref(), &history.writes);
                    self.replay(Arc::make_mut(&mut frame.state), &channel, seed, writes)?;
                }
                frame.missing.clear();
            }
        }
        Ok(frame)
    }

    /// Sets an appending channel to `seed` (its stored value; empty when `None`) followed by
    /// `writes`, folded through its reducer.
    pub(crate) fn replay(
        &self,
        state: &mut S,
        channel: &str,
        seed: Option<&SerializedValue>,
        writes: &[PendingWrite],
    ) -> Result<()> {
        let serde = &self.inner.serde;
        let Some(i) = state.channel_index(channel) else {
            return Ok(());
        };
        match seed {
            Some(seed) => state.load_channel(i, seed, serde)?,
            None => {
                if let Some(empty) = self.inner.template.dump_channel(i, serde)? {
                    state.load_channel(i, &empty, serde)?;
                }
            }
        }
        for write in writes {
            let mut update = S::Update::default();
            state.load_write(&mut update, i, &write.value, serde)?;
            state.apply(update)?;
        }
        Ok(())
    }

    /// The checkpoint of `frame` with the `changed` channels' values, and their versions.
    ///
    /// An appending channel stores its value only when a snapshot is due, or for every such
    /// channel (with a new version, so the value gets its own blob) when `snapshot_all`;
    /// otherwise its step writes stand for it. Updates the frame's delta counters.
    pub(crate) fn build_checkpoint(
        &self,
        frame: &mut Frame<S>,
        mut changed: BTreeSet<String>,
        snapshot_all: bool,
        thread: &str,
        ns: &str,
    ) -> Result<(Checkpoint, ChannelVersions)> {
        let appending: Vec<String> = self
            .inner
            .channel_names
            .iter()
            .filter(|c| self.is_delta(c))
            .cloned()
            .collect();
        if snapshot_all {
            let stored: Vec<&String> = appending
                .iter()
                .filter(|c| frame.versions.contains_key(*c))
                .collect();
            if !stored.is_empty() {
                let version = self.next_version(frame)?;
                for channel in stored {
                    frame.versions.insert(channel.clone(), version.clone());
                    changed.insert(channel.clone());
                }
            }
        }
        let mut omit = BTreeSet::new();
        for channel in appending.iter().filter(|c| changed.contains(*c)) {
            let counter = frame.delta.entry(channel.clone()).or_default();
            if !snapshot_all && !counter.due(&self.inner.delta) {
                omit.insert(channel.clone());
            }
        }
        let values = self.checkpoint_values(frame, &changed, &omit, thread, ns)?;
        for channel in appending
            .iter()
            .filter(|c| changed.contains(*c) && !omit.contains(*c))
        {
            let size = values.get(channel).map_or(0, |v| v.bytes.len() as u64);
            frame
                .delta
                .entry(channel.clone())
                .or_default()
                .snapshot(size);
        }
        frame.delta.retain(|c, _| appending.contains(c));
        let mut checkpoint = Checkpoint::new(frame.step);
        checkpoint.id = frame.checkpoint_id.clone().unwrap_or(checkpoint.id);
        checkpoint.channel_values = values;
        checkpoint.channel_versions = frame.versions.clone();
        checkpoint.versions_seen = frame.seen.clone();
        checkpoint.updated_channels = Some(changed.iter().cloned().collect());
        let new_versions = changed
            .iter()
            .filter_map(|c| frame.versions.get(c).map(|v| (c.clone(), v.clone())))
            .collect();
        Ok((checkpoint, new_versions))
    }

    /// Whether `channel` is stored as deltas.
    pub(crate) fn is_delta(&self, channel: &str) -> bool {
        self.inner.delta.enabled
            && self
                .inner
                .template
                .channels()
                .iter()
                .any(|c| c.appending && c.name == channel)
    }

    /// The tasks the frame's triggers and sends call for, in a fixed order: the start task,
    /// sends (in the order written), then triggered nodes in the order they were added.
    pub(crate) fn prepare(&self, frame: &Frame<S>, ns: &str) -> Vec<Task<S>> {
        let inner = &self.inner;
        let ids = TaskIds::new(
            frame
                .task_base
                .as_deref()
                .or(frame.checkpoint_id.as_deref())
                .unwrap_or(""),
            frame.legacy_ids,
            ns,
            frame.step + 1,
        );
        let mut tasks = Vec::new();
        if frame.input.is_some() {
            tasks.push(ids.task(None, START, TaskKind::Pull, INPUT, None));
        }
        for (i, (node, arg)) in frame.sends.iter().enumerate() {
            let Some(&index) = inner.index.get(node) else {
                continue;
            };
            let input = Some(Arc::new(arg.clone()));
            tasks.push(ids.task(Some(index), node, TaskKind::Push(i), channels::TASKS, input));
        }
        for &index in &frame.triggered {
            let node = &inner.nodes[index];
            tasks.push(ids.task(Some(index), &node.name, TaskKind::Pull, &node.trigger, None));
        }
        tasks
    }

    /// Where a node's output sends the graph: static edges, routers (on the state with the
    /// update applied) and the command's own `goto`s.
    pub(crate) fn route(
        &self,
        node: &Node<S>,
        state: &S,
        update: Option<&S::Update>,
        gotos: Vec<Goto<S>>,
    ) -> Result<TaskOutput<S>> {
        let mut out = TaskOutput {
            update: update.cloned(),
            triggers: node.edges.clone(),
            sends: Vec::new(),
        };
        let mut all = gotos;
        if !node.branches.is_empty() {
            let routed_state;
            let view = match update {
                Some(update) => {
                    let mut next = state.clone();
                    next.apply(update.clone())?;
                    routed_state = next;
                    &routed_state
                }
                None => state,
            };
            for branch in &node.branches {
                for goto in (branch.router)(view) {
                    all.push(match (goto, &branch.map) {
                        (Goto::Node(key), Some(map)) => match map.get(&key) {
                            Some(target) => Goto::Node(target.clone()),
                            None => {
                                return Err(Error::InvalidUpdate(format!(
                                    "router of `{}` returned `{key}`, which its path map does not name",
                                    node.name
                                )));
                            }
                        },
                        (goto, _) => goto,
                    });
                }
            }
        }
        for goto in all {
            match goto {
                Goto::Node(name) if name == END => {}
                Goto::Node(name) => match self.inner.index.get(&name) {
                    Some(&i) => {
                        if !out.triggers.contains(&i) {
                            out.triggers.push(i);
                        }
                    }
                    None => {
                        return Err(Error::InvalidUpdate(format!(
                            "`{}` routed to `{name}`, which is not a node of this graph",
                            node.name
                        )));
                    }
                },
                Goto::Send(send) => {
                    if !self.inner.index.contains_key(&send.node) {
                        return Err(Error::InvalidUpdate(format!(
                            "`{}` sent to `{}`, which is not a node of this graph",
                            node.name, send.node
                        )));
                    }
                    out.sends.push((send.node, send.arg));
                }
            }
        }
        Ok(out)
    }

    /// The writes a task output stands for, as stored by `put_writes`.
    pub(crate) fn encode_writes(
        &self,
        state: &S,
        output: &TaskOutput<S>,
    ) -> Result<Vec<(String, SerializedValue)>> {
        let inner = &self.inner;
        let mut writes = Vec::new();
        if let Some(update) = &output.update {
            for (i, value) in state.dump_update(update, &inner.serde)? {
                writes.push((inner.channel_names[i].clone(), value));
            }
        }
        for &i in &output.triggers {
            writes.push((inner.nodes[i].trigger.clone(), null_value()));
        }
        for (node, arg) in &output.sends {
            writes.push((
                channels::TASKS.to_owned(),
                inner
                    .serde
                    .dumps(&SendRef(node, arg))
                    .map_err(|e| crate::state::channel_error(channels::TASKS, e))?,
            ));
        }
        if writes.is_empty() {
            // A finished task that wrote nothing still records that it finished.
            writes.push((NO_WRITES.to_owned(), null_value()));
        }
        Ok(writes)
    }

    /// What a task's saved writes say: finished (with its output), or to be run again
    /// (it failed or was interrupted) with the resume values it already consumed.
    pub(crate) fn decode_writes(
        &self,
        state: &S,
        writes: &[&PendingWrite],
        open_slot: impl Fn(&PendingWrite, usize) -> Result<SerializedValue>,
    ) -> Result<SavedTask<S>> {
        let inner = &self.inner;
        let mut out = TaskOutput::default();
        let mut update = S::Update::default();
        let (mut has_update, mut finished, mut answered) = (false, false, Vec::new());
        for (position, write) in writes.iter().enumerate() {
            let channel = write.channel.as_str();
            if channel == channels::RESUME {
                let value: Value = decode(&inner.serde, &open_slot(write, position)?, channel)?;
                // LangGraph reads a single value as a list of one.
                answered = match value {
                    Value::Array(values) => values,
                    one => vec![one],
                };
                continue;
            }
            if is_control(channel) {
                continue;
            }
            finished = true;
            if let Some(i) = state.channel_index(channel) {
                let value = open_slot(write, position)?;
                state.load_write(&mut update, i, &value, &inner.serde)?;
                has_update = true;
            } else if let Some(node) = channel.strip_prefix(BRANCH_PREFIX) {
                if let Some(&i) = inner.index.get(node) {
                    out.triggers.push(i);
                }
            } else if channel == channels::TASKS {
                let value = open_slot(write, position)?;
                let SendPacket(node, arg) = decode(&inner.serde, &value, channel)?;
                out.sends.push((node, arg));
            }
        }
        if !finished {
            return Ok(SavedTask::Unfinished { answered });
        }
        out.update = has_update.then_some(update);
        Ok(SavedTask::Done(out))
    }

    /// Folds the step's outputs into the frame, in task order, and returns the channels whose
    /// version changed.
    pub(crate) fn apply(
        &self,
        frame: &mut Frame<S>,
        tasks: &[Task<S>],
        outputs: Vec<TaskOutput<S>>,
        version: &ChannelVersion,
    ) -> Result<BTreeSet<String>> {
        let inner = &self.inner;
        if outputs.len() > 1 {
            // A last-value channel takes one value per step: two writers is a graph bug.
            let specs = frame.state.channels();
            let mut writers = vec![0usize; specs.len()];
            for update in outputs.iter().filter_map(|o| o.update.as_ref()) {
                for i in frame.state.written(update) {
                    writers[i] += 1;
                }
            }
            if let Some((i, n)) = writers
                .iter()
                .enumerate()
                .find(|(i, n)| **n > 1 && !specs[*i].reduced)
            {
                return Err(Error::InvalidUpdate(format!(
                    "channel `{}` received {n} values in one step; it keeps the last value \
                     only, so give it a reducer to combine concurrent writes",
                    specs[i].name
                )));
            }
        }

        let mut changed = BTreeSet::new();
        // Consume what the tasks read: the input, their triggers, the sends.
        for task in tasks {
            let trigger = match (task.node, &task.kind) {
                (None, _) => INPUT,
                (Some(i), TaskKind::Pull) => inner.nodes[i].trigger.as_str(),
                (Some(_), TaskKind::Push(_)) => channels::TASKS,
            };
            if let Some(seen_version) = frame.versions.get(trigger) {
                frame
                    .seen
                    .entry(task.name.clone())
                    .or_default()
                    .insert(trigger.to_owned(), seen_version.clone());
            }
            let consumed = match (task.node, &task.kind) {
                (None, _) => frame.input.take().is_some(),
                (Some(i), TaskKind::Pull) => frame.triggered.remove(&i),
                // Every pending send is a task of the step.
                (Some(_), TaskKind::Push(_)) => {
                    let had = !frame.sends.is_empty();
                    frame.sends.clear();
                    had
                }
            };
            if consumed {
                changed.insert(trigger.to_owned());
            }
        }
        // Then the writes, in LangGraph's order: by task path.
        let mut outputs: Vec<(usize, TaskOutput<S>)> = outputs.into_iter().enumerate().collect();
        if tasks.len() == outputs.len() {
            outputs.sort_by(|(a, _), (b, _)| tasks[*a].path.cmp(&tasks[*b].path));
        }
        for (_, output) in outputs {
            if let Some(update) = output.update {
                for i in frame.state.written(&update) {
                    changed.insert(inner.channel_names[i].clone());
                }
                Arc::make_mut(&mut frame.state).apply(update)?;
            }
            for i in output.triggers {
                frame.triggered.insert(i);
                changed.insert(inner.nodes[i].trigger.clone());
            }
            if !output.sends.is_empty() {
                frame.sends.extend(output.sends);
                changed.insert(channels::TASKS.to_owned());
            }
        }
        for name in &changed {
            frame.versions.insert(name.clone(), version.clone());
        }
        frame.dirty.extend(changed.iter().cloned());
        Ok(changed)
    }

    /// The next version for a step's changes: one past the greatest version in the frame.
    pub(crate) fn next_version(&self, frame: &Frame<S>) -> Result<ChannelVersion> {
        // Every change of a step takes one version, so the newest is the one with the
        // greatest counter; comparing counters alone avoids re-parsing on each comparison.
        let max = frame
            .versions
            .values()
            .max_by_key(|v| v.counter().unwrap_or(0));
        Ok(match &self.inner.checkpointer {
            Some(saver) => saver.next_version(max)?,
            None => ChannelVersion::next(max)?,
        })
    }

    /// Encodes the frame's `channels` (those with a value) for a checkpoint.
    pub(crate) fn checkpoint_values(
        &self,
        frame: &Frame<S>,
        channels_to_write: &BTreeSet<String>,
        omit: &BTreeSet<String>,
        thread: &str,
        ns: &str,
    ) -> Result<BTreeMap<String, SerializedValue>> {
        let inner = &self.inner;
        let mut values = BTreeMap::new();
        for name in channels_to_write {
            let value = if omit.contains(name) {
                None
            } else if let Some(i) = frame.state.channel_index(name) {
                frame.state.dump_channel(i, &inner.serde)?
            } else if name == INPUT {
                match &frame.input {
                    Some(input) => Some(
                        inner
                            .serde
                            .dumps(input)
                            .map_err(|e| crate::state::channel_error(name, e))?,
                    ),
                    None => None,
                }
            } else if let Some(node) = name.strip_prefix(BRANCH_PREFIX) {
                inner
                    .index
                    .get(node)
                    .filter(|i| frame.triggered.contains(i))
                    .map(|_| null_value())
            } else if name == channels::TASKS && !frame.sends.is_empty() {
                let sends: Vec<SendRef<'_, S>> =
                    frame.sends.iter().map(|(n, a)| SendRef(n, a)).collect();
                Some(
                    inner
                        .serde
                        .dumps(&sends)
                        .map_err(|e| crate::state::channel_error(name, e))?,
                )
            } else {
                None
            };
            if let Some(value) = value {
                let slot = channel_slot(thread, ns, name, &frame.versions);
                let value = inner
                    .serde
                    .seal(&value, &slot)
                    .map_err(|e| crate::state::channel_error(name, e))?;
                values.insert(name.clone(), value);
            }
        }
        Ok(values)
    }
}

/// A task's writes not yet saved (exit durability): task id, task path and writes.
pub(crate) type UnsavedWrites = (String, String, Vec<(String, SerializedValue)>);

/// Whether a write only says what happened to a task (failed, paused, answered) rather than
/// what it produced: a task with no other write has not finished.
fn is_control(channel: &str) -> bool {
    channels::special_index(channel).is_some() || channel == ERROR_SOURCE_NODE
}

/// What the ids of one step's tasks derive from.
struct TaskIds<'a> {
    /// The checkpoint id's bytes (LangGraph hashes the 16 bytes of the uuid).
    checkpoint: Vec<u8>,
    legacy: bool,
    /// The graph's namespace.
    ns: &'a str,
    step: i64,
}

impl<'a> TaskIds<'a> {
    fn new(checkpoint_id: &str, legacy: bool, ns: &'a str, step: i64) -> Self {
        TaskIds {
            checkpoint: checkpoint_id_bytes(checkpoint_id),
            legacy,
            ns,
            step,
        }
    }

    /// A task of node `name` (`index`, `None` for the start task) with its id, path and
    /// namespace; `trigger` is the channel a pulled task runs on.
    fn task<S: State>(
        &self,
        node: Option<usize>,
        name: &str,
        kind: TaskKind,
        trigger: &str,
        input: Option<Arc<S>>,
    ) -> Task<S> {
        let id = task_id(
            &self.checkpoint,
            self.legacy,
            self.ns,
            self.step,
            name,
            &kind,
            trigger,
        );
        Task {
            path: task_path(name, &kind),
            ns: task_ns(self.ns, name, &id),
            id,
            node,
            name: name.to_owned(),
            kind,
            input,
        }
    }
}

/// The bytes of a checkpoint id as LangGraph hashes them: the uuid's 16 bytes (its hex digits
/// without dashes); an id that is not hex is taken as its UTF-8 bytes.
pub(crate) fn checkpoint_id_bytes(checkpoint_id: &str) -> Vec<u8> {
    let hex: Vec<u8> = checkpoint_id.bytes().filter(|&b| b != b'-').collect();
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    if hex.len().is_multiple_of(2) {
        let bytes: Option<Vec<u8>> = hex
            .chunks(2)
            .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
            .collect();
        if let Some(bytes) = bytes {
            return bytes;
        }
    }
    checkpoint_id.as_bytes().to_vec()
}

/// A task's id, as LangGraph derives it (`prepare_single_task`): the 128-bit xxh3 of the
/// checkpoint id's bytes followed by the task's namespace (`{graph ns}|{name}`, or `name` in
/// the root graph), the step, the name, `__pregel_pull` and the trigger channel (or
/// `__pregel_push` and the index of the pending send), formatted as a uuid. Checkpoints of
/// format version 1 (`legacy`) hash with sha1 instead.
pub(crate) fn task_id(
    checkpoint: &[u8],
    legacy: bool,
    ns: &str,
    step: i64,
    name: &str,
    kind: &TaskKind,
    trigger: &str,
) -> String {
    let scoped = if ns.is_empty() {
        name.to_owned()
    } else {
        format!("{ns}{NS_SEP}{name}")
    };
    let step = step.to_string();
    let index;
    let (marker, last) = match kind {
        TaskKind::Pull => (PULL, trigger),
        TaskKind::Push(i) => {
            index = i.to_string();
            (PUSH, index.as_str())
        }
    };
    let parts = [scoped.as_str(), step.as_str(), name, marker, last];
    let hex = if legacy {
        let mut sha = sha1_smol::Sha1::new();
        sha.update(checkpoint);
        for part in parts {
            sha.update(part.as_bytes());
        }
        sha.digest().to_string()
    } else {
        let mut bytes = checkpoint.to_vec();
        for part in parts {
            bytes.extend_from_slice(part.as_bytes());
        }
        format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&bytes))
    };
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A task's path as LangGraph writes it (`task_path_str`): `~__pregel_pull, {name}` for a
/// triggered node, `~__pregel_push, {index:010}, 0000000000` for a pending send.
pub(crate) fn task_path(name: &str, kind: &TaskKind) -> String {
    match kind {
        TaskKind::Pull => format!("~{PULL}, {name}"),
        TaskKind::Push(i) => format!("~{PUSH}, {i:010}, {:010}", 0),
    }
}

/// A task's own checkpoint namespace: `{graph ns}|{name}:{task id}` (`{name}:{task id}` in
/// the root graph), where its subgraphs checkpoint and which its interrupt ids hash.
pub(crate) fn task_ns(ns: &str, name: &str, task_id: &str) -> String {
    if ns.is_empty() {
        format!("{name}{NS_END}{task_id}")
    } else {
        format!("{ns}{NS_SEP}{name}{NS_END}{task_id}")
    }
}

/// A pending `Send` to store: LangGraph's `Send(node, arg)` when writing LangGraph's encoding
/// (`lc: 2`, ext 1, args `[node, arg]`), a `(node, arg)` pair otherwise.
pub(crate) struct SendRef<'a, S>(pub(crate) &'a str, pub(crate) &'a S);

impl<S: serde::Serialize> serde::Serialize for SendRef<'_, S> {
    fn serialize<Z: serde::Serializer>(
        &self,
        serializer: Z,
    ) -> std::result::Result<Z::Ok, Z::Error> {
        use serde::ser::{SerializeMap, SerializeTuple};
        if waypoint_checkpoint::serde::writing_langgraph() {
            let mut map = serializer.serialize_map(Some(7))?;
            map.serialize_entry("lc", &2)?;
            map.serialize_entry("type", "constructor")?;
            map.serialize_entry("id", &["langgraph", "types", "Send"])?;
            map.serialize_entry("ext", &1)?;
            map.serialize_entry("method", &())?;
            map.serialize_entry("args", &(self.0, self.1))?;
            map.serialize_entry("kwargs", &serde_json::Map::new())?;
            map.end()
        } else {
            let mut tuple = serializer.serialize_tuple(2)?;
            tuple.serialize_element(self.0)?;
            tuple.serialize_element(self.1)?;
            tuple.end()
        }
    }
}

/// A stored pending `Send`: a `(node, arg)` pair, LangGraph's `Send` (its `lc: 2` map, or
/// its arguments `[node, arg]` or `[node, arg, timeout]`), or a `{node, arg}` map.
pub(crate) struct SendPacket<S>(pub(crate) String, pub(crate) S);

impl<'de, S: serde::Deserialize<'de>> serde::Deserialize<'de> for SendPacket<S> {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            deserializer.deserialize_any(SendVisitor(std::marker::PhantomData))
        } else {
            deserializer.deserialize_tuple(2, SendVisitor(std::marker::PhantomData))
        }
    }
}

struct SendVisitor<S>(std::marker::PhantomData<S>);

impl<'de, S: serde::Deserialize<'de>> serde::de::Visitor<'de> for SendVisitor<S> {
    type Value = SendPacket<S>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Send: [node, arg] or LangGraph's langgraph.types.Send")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let node: String = seq
            .next_element()?
            .ok_or_else(|| A::Error::invalid_length(0, &self))?;
        let arg: S = seq
            .next_element()?
            .ok_or_else(|| A::Error::invalid_length(1, &self))?;
        // LangGraph's third argument, a timeout policy, has no Waypoint counterpart.
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(SendPacket(node, arg))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let (mut node, mut arg, mut packet, mut args_seen) = (None, None, None, false);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "id" => {
                    let id: Vec<String> = map.next_value()?;
                    if id.last().map(String::as_str) != Some("Send") {
                        return Err(A::Error::custom(format!(
                            "expected langgraph.types.Send, found {}",
                            id.join(".")
                        )));
                    }
                }
                "args" => {
                    args_seen = true;
                    packet = map.next_value_seed(SendArgs(std::marker::PhantomData))?;
                }
                "node" => node = Some(map.next_value::<String>()?),
                "arg" => arg = Some(map.next_value::<S>()?),
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        match (packet, node, arg) {
            (Some(packet), _, _) => Ok(packet),
            (None, Some(node), Some(arg)) if !args_seen => Ok(SendPacket(node, arg)),
            _ => Err(A::Error::custom(
                "a Send needs a node and an arg: [node, arg] or {node, arg}",
            )),
        }
    }
}

/// The `args` of an `lc: 2` map: `[node, arg, ...]` for a `Send`, `None` for anything that
/// does not start with a node name (the map's `id` then says what it is).
struct ArgsVisitor<S>(std::marker::PhantomData<S>);

impl<'de, S: serde::Deserialize<'de>> serde::de::Visitor<'de> for ArgsVisitor<S> {
    type Value = Option<SendPacket<S>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the arguments of a Send: [node, arg]")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let packet = match seq.next_element::<NodeName>()? {
            Some(NodeName(Some(node))) => seq.next_element::<S>()?.map(|arg| SendPacket(node, arg)),
            _ => None,
        };
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(packet)
    }
}

/// A string, or `None` for any other value.
struct NodeName(Option<String>);

impl<'de> serde::Deserialize<'de> for NodeName {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        struct Name;
        impl<'de> serde::de::Visitor<'de> for Name {
            type Value = NodeName;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<NodeName, E> {
                Ok(NodeName(Some(v.to_owned())))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_unit<E>(self) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_none<E>(self) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_bytes<E>(self, _: &[u8]) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<NodeName, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(NodeName(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<NodeName, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(NodeName(None))
            }
        }
        deserializer.deserialize_any(Name)
    }
}

/// The `args` of LangGraph's `Send`, read with the deserializer that holds them.
struct SendArgs<S>(std::marker::PhantomData<S>);

impl<'de, S: serde::Deserialize<'de>> serde::de::DeserializeSeed<'de> for SendArgs<S> {
    type Value = Option<SendPacket<S>>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(ArgsVisitor(std::marker::PhantomData))
    }
}

/// Where a channel value at its current version is stored (what sealing binds it to).
fn channel_slot<'a>(
    thread: &'a str,
    ns: &'a str,
    channel: &'a str,
    versions: &'a ChannelVersions,
) -> Slot<'a> {
    Slot::Channel {
        thread_id: thread,
        checkpoint_ns: ns,
        channel,
        version: versions
            .get(channel)
            .map(ChannelVersion::as_str)
            .unwrap_or(""),
    }
}

/// Encodes one write.
pub(crate) fn dump<T: serde::Serialize + ?Sized>(
    serde: &Serde,
    channel: &str,
    value: &T,
) -> Result<(String, SerializedValue)> {
    serde
        .dumps(value)
        .map(|v| (channel.to_owned(), v))
        .map_err(|e| crate::state::channel_error(channel, e))
}

fn null_value() -> SerializedValue {
    SerializedValue::new(TAG_NULL, Vec::new())
}

pub(crate) fn open(
    serde: &Serde,
    value: &SerializedValue,
    slot: &Slot<'_>,
    channel: &str,
) -> Result<SerializedValue> {
    serde
        .open(value, slot)
        .map_err(|e| crate::state::channel_error(channel, e))
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    serde: &Serde,
    value: &SerializedValue,
    channel: &str,
) -> Result<T> {
    serde
        .loads(value)
        .map_err(|e| crate::state::channel_error(channel, e))
}

pub(crate) mod history;
pub(crate) mod run;

#[cfg(test)]
mod tests;
