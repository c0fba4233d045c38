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
//! Task ids are derived from the checkpoint they start from, the step, the node and the
//! trigger, so a resumed run finds the writes its finished tasks saved with `put_writes` and
//! does not run them again.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use serde_json::Value;
use waypoint_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointSource, CheckpointTuple, PendingWrite, Save, Serde, SerializedValue,
    Slot, channels, serde::TAG_NULL,
};
use waypoint_store::Store;

use crate::command::{Command, Goto};
use crate::config::{Durability, RunConfig};
use crate::context::{CallSite, Context, CustomSink};
use crate::delta::{DeltaCounter, DeltaPolicy};
use crate::graph::{Branch, CompileOptions, END, NodeFn, START};
use crate::interrupt::{Input, Interrupt, Outcome, Resume, Scratch, SharedScratch};
use crate::lease::LeaseGuard;
use crate::state::State;
use crate::stream::{Emitter, StreamMode};
use crate::{Error, Result};

/// The channel holding a run's input.
pub(crate) const INPUT: &str = START;
/// The prefix of trigger channels.
pub(crate) const BRANCH_PREFIX: &str = "branch:to:";
/// Metadata key of a replay fork: the checkpoint it copies.
pub(crate) const FORKED_FROM: &str = "forked_from";
/// The write of a task that finished without writing anything.
const NO_WRITES: &str = "__no_writes__";
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
enum StepEnd<S: State> {
    /// Every task finished: their outputs, in task order, and the bytes they wrote to each
    /// appending channel.
    Done(Vec<TaskOutput<S>>, BTreeMap<String, u64>),
    /// Some tasks paused; the step does not end in a checkpoint.
    Interrupted(Vec<Interrupt>),
}

/// How one task of a step ended.
enum TaskEnd<S: State> {
    Done(TaskOutput<S>),
    Interrupted(Interrupt),
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
    pub(crate) index: HashMap<String, usize>,
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

/// Threads whose last state is kept.
const CACHED_THREADS: usize = 1024;

/// Thread id and namespace.
type CacheKey = (String, String);

/// The state the last run on each thread ended at, with its checkpoint id: the next run on
/// the thread starts from it instead of rebuilding appending channels from their history.
/// A checkpoint never changes once written, so an entry is right for as long as its id is
/// the thread's latest, whichever process wrote what came after.
pub(crate) struct StateCache<S> {
    entries: Mutex<CacheEntries<S>>,
}

/// The entries, and the order they came in (oldest first) to evict by.
struct CacheEntries<S> {
    map: HashMap<CacheKey, (String, Arc<S>)>,
    order: VecDeque<CacheKey>,
}

impl<S> Default for StateCache<S> {
    fn default() -> Self {
        StateCache {
            entries: Mutex::new(CacheEntries {
                map: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }
}

impl<S> StateCache<S> {
    /// The state at `checkpoint_id`, if cached. `take` removes the entry, so the run that
    /// continues the thread holds the only reference and changes it in place (it puts its
    /// own end state back when it finishes).
    fn lookup(&self, thread: &str, ns: &str, checkpoint_id: &str, take: bool) -> Option<Arc<S>> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let key = (thread.to_owned(), ns.to_owned());
        let (id, state) = entries.map.get(&key)?;
        if id != checkpoint_id {
            return None;
        }
        if !take {
            return Some(Arc::clone(state));
        }
        entries.order.retain(|k| *k != key);
        entries.map.remove(&key).map(|(_, state)| state)
    }

    fn put(&self, thread: &str, ns: &str, checkpoint_id: String, state: Arc<S>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let key = (thread.to_owned(), ns.to_owned());
        if entries
            .map
            .insert(key.clone(), (checkpoint_id, state))
            .is_none()
        {
            entries.order.push_back(key);
        }
        while entries.map.len() > CACHED_THREADS {
            let Some(oldest) = entries.order.pop_front() else {
                break;
            };
            entries.map.remove(&oldest);
        }
    }
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
        index: HashMap<String, usize>,
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

    /// The interrupts pending on a frame's checkpoint, by task id.
    pub(crate) fn pending_interrupts(&self, frame: &Frame<S>) -> BTreeMap<String, Vec<Interrupt>> {
        let mut out: BTreeMap<String, Vec<Interrupt>> = BTreeMap::new();
        for write in frame
            .pending
            .iter()
            .filter(|w| w.channel == channels::INTERRUPT)
        {
            // Interrupt values are sealed like any write; an unreadable one is skipped
            // rather than hiding the others.
            let value = match (&frame.thread, &frame.checkpoint_id) {
                (Some(thread), Some(checkpoint_id)) => self.inner.serde.open(
                    &write.value,
                    &Slot::Write {
                        thread_id: thread,
                        checkpoint_ns: &frame.ns,
                        checkpoint_id,
                        task_id: &write.task_id,
                        channel: &write.channel,
                        idx: channels::write_index(&write.channel, 0),
                    },
                ),
                _ => Ok(write.value.clone()),
            };
            if let Ok(interrupts) = value.and_then(|v| self.inner.serde.loads::<Vec<Interrupt>>(&v))
            {
                out.entry(write.task_id.clone())
                    .or_default()
                    .extend(interrupts);
            }
        }
        out
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
    /// comes after that checkpoint; a [`Command`] resumes pending interrupts.
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
                LeaseGuard::acquire(saver, thread, config.wait_for_thread).await?
            }
            _ => None,
        };
        let result = run.execute(input).await;
        // Exit durability (and a failed run) still leave the thread where the run stopped.
        let finished = run.finish().await;
        let released = match lease {
            Some(lease) => lease.release().await,
            None => Ok(()),
        };
        let interrupts = result?;
        finished?;
        released?;
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
                frame.sends = decode(&inner.serde, &value, name)?;
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
            .get(FORKED_FROM)
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

    /// The tasks the frame's triggers and sends call for, in a fixed order: sends first (in
    /// the order written), then triggered nodes in the order they were added.
    pub(crate) fn prepare(&self, frame: &Frame<S>, ns: &str) -> Vec<Task<S>> {
        let inner = &self.inner;
        let checkpoint_id = frame
            .task_base
            .as_deref()
            .or(frame.checkpoint_id.as_deref())
            .unwrap_or("");
        let step = frame.step + 1;
        let mut tasks = Vec::new();
        if frame.input.is_some() {
            tasks.push(Task {
                id: task_id(checkpoint_id, ns, step, START, &TaskKind::Pull, tasks.len()),
                node: None,
                name: START.to_owned(),
                kind: TaskKind::Pull,
                input: None,
            });
        }
        for (i, (node, arg)) in frame.sends.iter().enumerate() {
            let Some(&index) = inner.index.get(node) else {
                continue;
            };
            let kind = TaskKind::Push(i);
            tasks.push(Task {
                id: task_id(checkpoint_id, ns, step, node, &kind, tasks.len()),
                node: Some(index),
                name: node.clone(),
                kind,
                input: Some(Arc::new(arg.clone())),
            });
        }
        for &index in &frame.triggered {
            let name = &inner.nodes[index].name;
            tasks.push(Task {
                id: task_id(checkpoint_id, ns, step, name, &TaskKind::Pull, tasks.len()),
                node: Some(index),
                name: name.clone(),
                kind: TaskKind::Pull,
                input: None,
            });
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
    fn encode_writes(
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
        for send in &output.sends {
            writes.push((
                channels::TASKS.to_owned(),
                inner
                    .serde
                    .dumps(send)
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
    fn decode_writes(
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
                answered = decode(&inner.serde, &open_slot(write, position)?, channel)?;
                continue;
            }
            if channels::special_index(channel).is_some() {
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
                out.sends.push(decode(&inner.serde, &value, channel)?);
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
        // Then the writes, in task order.
        for output in outputs {
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
                Some(
                    inner
                        .serde
                        .dumps(&frame.sends)
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

/// What a subgraph run inherits from the node that calls it.
#[derive(Clone, Default)]
pub(crate) struct Nested {
    /// The parent run's checkpointer (used instead of the subgraph's own).
    pub(crate) saver: Option<Arc<dyn CheckpointSaver>>,
    /// Namespace to checkpoint id of every ancestor (the `parents` metadata).
    pub(crate) parents: BTreeMap<String, String>,
    /// Namespace to checkpoint id to travel back to (time travel into a subgraph).
    pub(crate) checkpoint_map: Arc<BTreeMap<String, String>>,
    /// Continue an unfinished run in the namespace instead of starting a new one.
    pub(crate) continue_unfinished: bool,
    /// Ignore what the namespace holds: the caller replays a step from before it existed.
    pub(crate) start_over: bool,
}

/// One run of the loop on one thread.
struct Run<'g, S: State> {
    graph: &'g CompiledGraph<S>,
    config: Arc<RunConfig>,
    emitter: &'g Emitter<S>,
    thread: Option<String>,
    ns: String,
    frame: Frame<S>,
    /// Writes of finished tasks in exit durability, kept until the final put.
    exit_writes: Vec<(String, Vec<(String, SerializedValue)>)>,
    custom: Option<CustomSink>,
    /// Why the frame's checkpoint was made.
    last_source: CheckpointSource,
    /// Async durability: the background writer, started with the first save.
    writer: Option<Writer>,
    /// The resume command's answers, for the interrupted tasks.
    resume: Option<Resume>,
    /// Sync durability: writes that go with the next checkpoint, in its transaction.
    step_writes: Vec<Save>,
    /// What a subgraph run inherits; default for a root run.
    nested: Nested,
    /// Whether the current step replays a past checkpoint (its subgraphs start over).
    replaying: bool,
}

/// Saves at most this many calls in one batch (one transaction).
const MAX_BATCH: usize = 256;

/// The background writer of async durability: saves leave in order, and whatever queued
/// up while the previous batch was being written goes out together in one `save_batch`
/// (one commit), so a slow commit is shared by several steps.
struct Writer {
    queue: tokio::sync::mpsc::UnboundedSender<Save>,
    task: tokio::task::JoinHandle<Result<()>>,
}

impl Writer {
    fn spawn(saver: Arc<dyn CheckpointSaver>) -> Self {
        let (queue, mut rx) = tokio::sync::mpsc::unbounded_channel::<Save>();
        let task = tokio::spawn(async move {
            while let Some(save) = rx.recv().await {
                let mut batch = vec![save];
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(save) => batch.push(save),
                        Err(_) => break,
                    }
                }
                // After a failure nothing more is written: a later checkpoint without the
                // one before it would break the thread's chain.
                saver.save_batch(batch).await?;
            }
            Ok(())
        });
        Writer { queue, task }
    }

    /// Queues a save; a writer that already failed reports it when the run finishes.
    fn send(&self, save: Save) {
        let _ = self.queue.send(save);
    }

    /// Waits until everything queued is saved.
    async fn close(self) -> Result<()> {
        drop(self.queue);
        self.task
            .await
            .map_err(|e| Error::Checkpoint(waypoint_checkpoint::Error::backend("runtime", e)))?
    }
}

impl<'g, S: State> Run<'g, S> {
    fn new(
        graph: &'g CompiledGraph<S>,
        config: &RunConfig,
        emitter: &'g Emitter<S>,
        nested: Nested,
    ) -> Result<Self> {
        let thread = match &nested.saver {
            Some(_) => config.thread_id.clone(),
            None => graph.thread_of(config)?.map(str::to_owned),
        };
        let custom = emitter.custom_sink();
        Ok(Run {
            graph,
            config: Arc::new(config.clone()),
            emitter,
            thread,
            ns: config.checkpoint_ns.clone(),
            frame: graph.fresh_frame(),
            exit_writes: Vec::new(),
            custom,
            last_source: CheckpointSource::Loop,
            writer: None,
            resume: None,
            step_writes: Vec::new(),
            nested,
            replaying: false,
        })
    }

    /// Keeps the state the run ended at, when it is the thread's stored latest checkpoint
    /// and has channels a load would otherwise rebuild from history.
    fn remember(&self) {
        let frame = &self.frame;
        let appending = self
            .graph
            .inner
            .channel_names
            .iter()
            .any(|c| self.graph.is_delta(c));
        if let (true, Some(thread), Some(id), true) = (
            appending,
            &self.thread,
            &frame.checkpoint_id,
            frame.checkpoint_id == frame.persisted_id,
        ) {
            self.graph
                .inner
                .cache
                .put(thread, &self.ns, id.clone(), Arc::clone(&frame.state));
        }
    }

    fn saver(&self) -> Option<(&Arc<dyn CheckpointSaver>, &str)> {
        let saver = self
            .nested
            .saver
            .as_ref()
            .or(self.graph.inner.checkpointer.as_ref());
        match (saver, &self.thread) {
            (Some(saver), Some(thread)) => Some((saver, thread.as_str())),
            _ => None,
        }
    }

    fn sync(&self) -> bool {
        self.config.durability == Durability::Sync
    }

    /// Runs the loop; `Some(interrupts)` when the run paused instead of finishing.
    async fn execute(&mut self, input: Input<S>) -> Result<Option<Vec<Interrupt>>> {
        if matches!(input, Input::Continue) {
            self.travel_into_subgraph().await?;
        }
        let replaying = self.config.checkpoint_id.is_some();
        if let Some((saver, thread)) = self.saver().filter(|_| !self.nested.start_over) {
            let config = self.config.checkpoint_config(thread);
            match saver.get_tuple(&config).await? {
                Some(tuple) => {
                    let saver = Arc::clone(saver);
                    self.frame = self.graph.load(&saver, tuple, true).await?;
                }
                None if replaying => {
                    return Err(Error::InvalidConfig(format!(
                        "checkpoint `{}` of thread `{thread}` does not exist",
                        self.config.checkpoint_id.as_deref().unwrap_or("")
                    )));
                }
                None => {}
            }
        }
        let fresh_thread = self.frame.checkpoint_id.is_none();
        let input = match input {
            // A command without resume on an empty thread is plain input.
            Input::Command(Command {
                update: Some(update),
                resume: None,
                ..
            }) if fresh_thread => Input::Update(update),
            other => other,
        };
        let mut skip_done = !replaying;
        let unfinished = !self.graph.prepare(&self.frame, &self.ns).is_empty();
        let input = match input {
            // A subgraph called again by a node that re-runs picks up where it stopped.
            Input::Update(_) if self.nested.continue_unfinished && unfinished => Input::Continue,
            other => other,
        };
        match input {
            Input::Update(update) => self.start(update).await?,
            Input::Continue if fresh_thread => return Ok(None),
            Input::Continue => {
                self.mark_resumed();
                // A branch head made by `update_state` (or a fork) is continued as it is.
                let branch_head = matches!(
                    self.frame.source,
                    Some(CheckpointSource::Update | CheckpointSource::Fork)
                );
                if !replaying {
                    self.apply_null_writes()?;
                } else if unfinished && !branch_head {
                    self.fork_for_replay().await?;
                } else {
                    self.replaying = true;
                }
            }
            Input::Command(command) => {
                if fresh_thread {
                    return Err(Error::InvalidUpdate(
                        "nothing to resume: the thread has no checkpoint".into(),
                    ));
                }
                self.mark_resumed();
                self.save_command(command).await?;
                self.apply_null_writes()?;
                skip_done = true;
            }
        }

        let mut steps = 0usize;
        loop {
            let tasks = self.graph.prepare(&self.frame, &self.ns);
            if tasks.is_empty() {
                return Ok(None);
            }
            if self.breakpoint(
                &tasks,
                &self.config.interrupt_before,
                &self.graph.inner.interrupt_before,
            ) {
                self.emitter.interrupts(&[]);
                return Ok(Some(Vec::new()));
            }
            if steps >= self.config.recursion_limit {
                return Err(Error::Recursion {
                    limit: self.config.recursion_limit,
                });
            }
            steps += 1;
            let step = self.frame.step + 1;
            for task in &tasks {
                self.emitter.debug(|| {
                    serde_json::json!({"type": "task", "step": step,
                        "payload": {"id": task.id, "name": task.name}})
                });
            }
            let (outputs, unsaved) = self.run_tasks(&tasks, skip_done).await;
            self.keep_writes(unsaved);
            let outputs = match outputs? {
                StepEnd::Done(outputs, delta_bytes) => {
                    for (channel, bytes) in delta_bytes {
                        let counter = self.frame.delta.entry(channel).or_default();
                        counter.updates += 1;
                        counter.bytes += bytes;
                    }
                    outputs
                }
                StepEnd::Interrupted(interrupts) => {
                    self.emitter.interrupts(&interrupts);
                    return Ok(Some(interrupts));
                }
            };
            for (task, output) in tasks.iter().zip(&outputs) {
                self.emitter.debug(|| {
                    serde_json::json!({"type": "task_result", "step": step,
                        "payload": {"id": task.id, "name": task.name,
                            "result": serde_json::to_value(&output.update).unwrap_or_default()}})
                });
            }
            skip_done = true;
            self.emit_updates(&tasks, &outputs);
            let version = self.graph.next_version(&self.frame)?;
            self.graph
                .apply(&mut self.frame, &tasks, outputs, &version)?;
            self.checkpoint(CheckpointSource::Loop, step).await?;
            self.emitter.values(&self.frame.state);
            if self.breakpoint(
                &tasks,
                &self.config.interrupt_after,
                &self.graph.inner.interrupt_after,
            ) {
                self.emitter.interrupts(&[]);
                return Ok(Some(Vec::new()));
            }
        }
    }

    /// Time travel to a subgraph's checkpoint (a config naming a subgraph namespace and
    /// checkpoint): replay the root graph from the checkpoint that was current when the
    /// subgraph's was written, and have the subgraph (and any between) start from theirs,
    /// so the subgraph resumes at that checkpoint instead of starting over.
    async fn travel_into_subgraph(&mut self) -> Result<()> {
        if !self.nested.parents.is_empty() || self.ns.is_empty() {
            return Ok(());
        }
        let (Some((saver, thread)), Some(_)) = (self.saver(), &self.config.checkpoint_id) else {
            return Ok(());
        };
        let config = self.config.checkpoint_config(thread);
        let Some(tuple) = saver.get_tuple(&config).await? else {
            return Ok(());
        };
        let parents = tuple.metadata.parents.unwrap_or_default();
        let Some(root) = parents.get("").cloned() else {
            return Ok(());
        };
        let mut map: BTreeMap<String, String> = parents
            .into_iter()
            .filter(|(ns, _)| !ns.is_empty())
            .collect();
        map.insert(self.ns.clone(), tuple.checkpoint.id);
        self.nested.checkpoint_map = Arc::new(map);
        self.ns = String::new();
        self.config = Arc::new(RunConfig {
            checkpoint_ns: String::new(),
            checkpoint_id: Some(root),
            ..(*self.config).clone()
        });
        Ok(())
    }

    /// Replaying a past checkpoint first copies it as the thread's newest (`source: fork`),
    /// so whatever the replay leaves pending (an interrupt) is found by the next resume. The
    /// copy keeps the original's task ids, so its subgraphs keep their namespaces.
    async fn fork_for_replay(&mut self) -> Result<()> {
        let original = self.frame.checkpoint_id.clone().unwrap_or_default();
        self.frame.task_base = Some(self.frame.task_base.clone().unwrap_or(original));
        self.frame.checkpoint_id = Some(waypoint_checkpoint::checkpoint_id(self.frame.step));
        self.frame.pending.clear();
        self.frame.snapshot_all = true;
        self.last_source = CheckpointSource::Fork;
        self.replaying = true;
        if self.config.durability != Durability::Exit {
            self.persist(BTreeSet::new()).await?;
        }
        Ok(())
    }

    /// Starts a new run with `update` as input: the input checkpoint.
    async fn start(&mut self, update: S::Update) -> Result<()> {
        // A new input drops the tasks an earlier run left unfinished; their saved writes
        // must then not count towards the appending channels' history.
        if !self.frame.pending.is_empty() {
            self.frame.snapshot_all = true;
        }
        let version = self.graph.next_version(&self.frame)?;
        if !self.frame.triggered.is_empty() || !self.frame.sends.is_empty() {
            let stale = self.graph.prepare(&self.frame, &self.ns);
            let outputs = stale.iter().map(|_| TaskOutput::default()).collect();
            self.graph
                .apply(&mut self.frame, &stale, outputs, &version)?;
        }
        self.frame.input = Some(update);
        self.frame.versions.insert(INPUT.to_owned(), version);
        self.frame.dirty.insert(INPUT.to_owned());
        let step = self.frame.step + 1;
        self.checkpoint(CheckpointSource::Input, step).await
    }

    /// Records that the thread was resumed at its current versions, so a static breakpoint
    /// that paused this step does not pause it again.
    fn mark_resumed(&mut self) {
        let versions = self.frame.versions.clone();
        self.frame.seen.insert(INTERRUPT_SEEN.to_owned(), versions);
    }

    /// Whether a static breakpoint in `run_list` (or, without one, `compiled`) stops before
    /// (or after) `tasks`: one of them is listed and a channel changed since the last resume.
    fn breakpoint(
        &self,
        tasks: &[Task<S>],
        run_list: &Option<Vec<String>>,
        compiled: &[String],
    ) -> bool {
        let nodes = run_list.as_deref().unwrap_or(compiled);
        if nodes.is_empty()
            || !tasks
                .iter()
                .any(|t| t.node.is_some() && nodes.contains(&t.name))
        {
            return false;
        }
        let seen = self.frame.seen.get(INTERRUPT_SEEN);
        self.frame.versions.iter().any(|(channel, version)| {
            seen.and_then(|s| s.get(channel))
                .is_none_or(|old| version.counter() > old.counter())
        })
    }

    /// Saves a resume command as writes of no task (so a crash before the step ends keeps
    /// them) and queues them for this run.
    async fn save_command(&mut self, command: Command<S>) -> Result<()> {
        let inner = &self.graph.inner;
        let mut writes = Vec::new();
        if let Some(resume) = &command.resume {
            let pending = self.pending_interrupts();
            if matches!(resume, Resume::One(_)) && pending.len() > 1 {
                return Err(Error::InvalidUpdate(format!(
                    "{} interrupts are pending; resume them by id with Command::resume_by_id",
                    pending.len()
                )));
            }
            writes.push((
                channels::RESUME.to_owned(),
                inner
                    .serde
                    .dumps(resume)
                    .map_err(|e| crate::state::channel_error(channels::RESUME, e))?,
            ));
        }
        let routed = self
            .graph
            .route(&inner.start, &self.frame.state, None, command.goto)?;
        let output = TaskOutput {
            update: command.update,
            triggers: routed
                .triggers
                .into_iter()
                .filter(|i| !inner.start.edges.contains(i))
                .collect(),
            sends: routed.sends,
        };
        if output.update.is_some() || !output.triggers.is_empty() || !output.sends.is_empty() {
            writes.extend(self.graph.encode_writes(&self.frame.state, &output)?);
        }
        // Update writes of an earlier resume of this checkpoint were applied then: a new
        // command replaces them.
        self.frame
            .pending
            .retain(|w| w.task_id != channels::NULL_TASK_ID);
        if writes.is_empty() {
            return Ok(());
        }
        let checkpoint_id = self.frame.checkpoint_id.clone().unwrap_or_default();
        let sealed = self.seal_writes(writes.clone(), &checkpoint_id, channels::NULL_TASK_ID)?;
        if let Some((saver, thread)) = self.saver() {
            let config = CheckpointConfig::of(thread, &self.ns, &checkpoint_id);
            saver
                .put_writes(&config, sealed.clone(), channels::NULL_TASK_ID, "")
                .await?;
        }
        self.frame
            .pending
            .extend(sealed.into_iter().map(|(channel, value)| PendingWrite {
                task_id: channels::NULL_TASK_ID.to_owned(),
                channel,
                value,
            }));
        Ok(())
    }

    /// Pending interrupts of the frame's checkpoint, by task id.
    fn pending_interrupts(&self) -> BTreeMap<String, Vec<Interrupt>> {
        self.graph.pending_interrupts(&self.frame)
    }

    /// Applies the writes of no task (a resume command's update and routing) before the next
    /// step, and takes its resume value for the interrupted task.
    fn apply_null_writes(&mut self) -> Result<()> {
        let checkpoint_id = self.frame.checkpoint_id.clone().unwrap_or_default();
        let null: Vec<&PendingWrite> = self
            .frame
            .pending
            .iter()
            .filter(|w| w.task_id == channels::NULL_TASK_ID)
            .collect();
        if null.is_empty() {
            return Ok(());
        }
        let mut resume = None;
        for (position, write) in null.iter().enumerate() {
            if write.channel == channels::RESUME {
                let value = self.open_write(write, &checkpoint_id, position)?;
                resume = Some(decode::<Resume>(
                    &self.graph.inner.serde,
                    &value,
                    channels::RESUME,
                )?);
            }
        }
        // The rest are an update and routing, decoded like a task's writes. Positions stay
        // those of the stored writes, which the sealing slots name.
        let open_slot = |w: &PendingWrite, _: usize| {
            let position = null.iter().position(|n| std::ptr::eq(*n, w)).unwrap_or(0);
            self.open_write(w, &checkpoint_id, position)
        };
        let rest: Vec<&PendingWrite> = null
            .iter()
            .copied()
            .filter(|w| w.channel != channels::RESUME)
            .collect();
        let saved = self
            .graph
            .decode_writes(&self.frame.state, &rest, open_slot)?;
        self.resume = resume;
        if let SavedTask::Done(output) = saved {
            let version = self.graph.next_version(&self.frame)?;
            self.graph
                .apply(&mut self.frame, &[], vec![output], &version)?;
        }
        Ok(())
    }

    /// Runs a step's tasks concurrently; each task's writes are saved as it finishes
    /// (in sync durability) or returned for later. Tasks whose writes the checkpoint already
    /// holds are not run again (unless replaying). A failure wins over interrupts.
    async fn run_tasks(
        &self,
        tasks: &[Task<S>],
        skip_done: bool,
    ) -> (Result<StepEnd<S>>, Vec<UnsavedWrites>) {
        let graph = self.graph;
        let mut saved: HashMap<&str, Vec<&PendingWrite>> = HashMap::new();
        if skip_done {
            for write in &self.frame.pending {
                saved.entry(write.task_id.as_str()).or_default().push(write);
            }
        }
        let checkpoint_id = self.frame.checkpoint_id.as_deref().unwrap_or("");
        let interrupted = if self.resume.is_some() {
            self.pending_interrupts()
        } else {
            BTreeMap::new()
        };
        // A step's only task needs no separate save of its writes: the step's checkpoint is
        // the very next write and holds them, so a crash loses no more than it would between
        // the task's end and its `put_writes`. Failures and interrupts are always saved.
        let sole = tasks.len() == 1;
        let delta_bytes: std::sync::Mutex<BTreeMap<String, u64>> = Default::default();
        let delta_bytes = &delta_bytes;
        let futures = tasks.iter().map(|task| {
            let saved = saved.get(task.id.as_str());
            let interrupted = &interrupted;
            async move {
                let mut answered = Vec::new();
                if let Some(saved) = saved {
                    let open_slot = |w: &PendingWrite, position: usize| {
                        self.open_write(w, checkpoint_id, position)
                    };
                    match graph.decode_writes(&self.frame.state, saved, open_slot)? {
                        SavedTask::Done(output) => return Ok((TaskEnd::Done(output), None)),
                        SavedTask::Unfinished { answered: earlier } => answered = earlier,
                    }
                }
                let fresh = match &self.resume {
                    Some(Resume::One(value))
                        if interrupted.contains_key(&task.id) || interrupted.is_empty() && sole =>
                    {
                        Some(Resume::One(value.clone()))
                    }
                    Some(Resume::ById(answers)) => Some(Resume::ById(answers.clone())),
                    _ => None,
                };
                let scratch = Scratch::new(&task.id, answered, fresh);
                let end = self.run_task(task, Arc::clone(&scratch)).await;
                if self.saver().is_none() {
                    return Ok((end, None));
                }
                let serde = &graph.inner.serde;
                let writes = match &end {
                    TaskEnd::Done(output) => {
                        let mut writes = graph.encode_writes(&self.frame.state, output)?;
                        for (channel, value) in &writes {
                            if graph.is_delta(channel) {
                                let mut counted =
                                    delta_bytes.lock().unwrap_or_else(|p| p.into_inner());
                                *counted.entry(channel.clone()).or_default() +=
                                    value.bytes.len() as u64;
                            }
                        }
                        if sole {
                            // The step's checkpoint follows in the same transaction and holds
                            // everything but the appended items, which it leaves to these.
                            writes.retain(|(channel, _)| graph.is_delta(channel));
                            if writes.is_empty() {
                                return Ok((end, None));
                            }
                            let writes = self.seal_writes(writes, checkpoint_id, &task.id)?;
                            return Ok((end, Some((task.id.clone(), writes))));
                        }
                        writes
                    }
                    TaskEnd::Failed(err) => vec![dump(serde, channels::ERROR, &err.to_string())?],
                    TaskEnd::Interrupted(interrupt) => {
                        let answered = scratch
                            .lock()
                            .map(|s| s.answered.clone())
                            .unwrap_or_default();
                        let mut writes = Vec::new();
                        if !answered.is_empty() {
                            writes.push(dump(serde, channels::RESUME, &answered)?);
                        }
                        writes.push(dump(serde, channels::INTERRUPT, &vec![interrupt.clone()])?);
                        writes
                    }
                };
                let writes = self.seal_writes(writes, checkpoint_id, &task.id)?;
                match self.saver() {
                    Some((saver, thread)) if self.sync() => {
                        let config = CheckpointConfig::of(thread, &self.ns, checkpoint_id);
                        saver
                            .put_writes(&config, writes, &task.id, &task.name)
                            .await?;
                        Ok::<_, Error>((end, None))
                    }
                    _ => Ok((end, Some((task.id.clone(), writes)))),
                }
            }
        });
        let results = join_all(futures).await;
        let mut outputs = Vec::with_capacity(tasks.len());
        let mut unsaved = Vec::new();
        let mut interrupts = Vec::new();
        let mut failure = None;
        for result in results {
            match result {
                Ok((end, writes)) => {
                    unsaved.extend(writes);
                    match end {
                        TaskEnd::Done(output) => outputs.push(output),
                        TaskEnd::Interrupted(interrupt) => interrupts.push(interrupt),
                        TaskEnd::Failed(err) => {
                            failure.get_or_insert(err);
                        }
                    }
                }
                Err(err) => {
                    failure.get_or_insert(err);
                }
            }
        }
        let end = match failure {
            Some(err) => Err(err),
            None if !interrupts.is_empty() => Ok(StepEnd::Interrupted(interrupts)),
            None => Ok(StepEnd::Done(
                outputs,
                delta_bytes.lock().map(|b| b.clone()).unwrap_or_default(),
            )),
        };
        (end, unsaved)
    }

    /// Calls one task's node and routes its result.
    async fn run_task(&self, task: &Task<S>, scratch: SharedScratch) -> TaskEnd<S> {
        let inner = &self.graph.inner;
        let Some(index) = task.node else {
            // The start task writes the input and follows START's edges.
            return match self.graph.route(
                &inner.start,
                &self.frame.state,
                self.frame.input.as_ref(),
                Vec::new(),
            ) {
                Ok(output) => TaskEnd::Done(output),
                Err(err) => TaskEnd::Failed(err),
            };
        };
        let node = &inner.nodes[index];
        let Some(func) = &node.func else {
            return TaskEnd::Done(TaskOutput::default());
        };
        let ctx = Context {
            config: Arc::clone(&self.config),
            store: inner.store.clone(),
            custom: self.custom.clone(),
            node: Arc::from(node.name.as_str()),
            step: self.frame.step + 1,
            scratch: Some(scratch),
            call: Some(Arc::new(CallSite {
                saver: self.saver().map(|(saver, _)| Arc::clone(saver)),
                task_id: task.id.clone(),
                ns: self.ns.clone(),
                parents: {
                    let mut parents = self.nested.parents.clone();
                    if let Some(id) = &self.frame.checkpoint_id {
                        parents.insert(self.ns.clone(), id.clone());
                    }
                    parents
                },
                checkpoint_map: Arc::clone(&self.nested.checkpoint_map),
                replaying: self.replaying,
            })),
        };
        let input = task
            .input
            .clone()
            .unwrap_or_else(|| Arc::clone(&self.frame.state));
        let command = match func(input, ctx).await {
            Ok(command) => command,
            Err(source) => {
                return match source.downcast::<Interrupt>() {
                    Ok(interrupt) => TaskEnd::Interrupted(*interrupt),
                    Err(source) => TaskEnd::Failed(Error::Node {
                        node: node.name.clone(),
                        source,
                    }),
                };
            }
        };
        match self.graph.route(
            node,
            &self.frame.state,
            command.update.as_ref(),
            command.goto,
        ) {
            Ok(output) => TaskEnd::Done(output),
            Err(err) => TaskEnd::Failed(err),
        }
    }

    fn open_write(
        &self,
        write: &PendingWrite,
        checkpoint_id: &str,
        position: usize,
    ) -> Result<SerializedValue> {
        let Some(thread) = &self.thread else {
            return Ok(write.value.clone());
        };
        let slot = Slot::Write {
            thread_id: thread,
            checkpoint_ns: &self.ns,
            checkpoint_id,
            task_id: &write.task_id,
            channel: &write.channel,
            idx: channels::write_index(&write.channel, position),
        };
        open(&self.graph.inner.serde, &write.value, &slot, &write.channel)
    }

    fn seal_writes(
        &self,
        writes: Vec<(String, SerializedValue)>,
        checkpoint_id: &str,
        task_id: &str,
    ) -> Result<Vec<(String, SerializedValue)>> {
        let serde = &self.graph.inner.serde;
        let Some(thread) = self.thread.as_deref().filter(|_| serde.is_encrypted()) else {
            return Ok(writes);
        };
        writes
            .into_iter()
            .enumerate()
            .map(|(position, (channel, value))| {
                let slot = Slot::Write {
                    thread_id: thread,
                    checkpoint_ns: &self.ns,
                    checkpoint_id,
                    task_id,
                    channel: &channel,
                    idx: channels::write_index(&channel, position),
                };
                let sealed = serde
                    .seal(&value, &slot)
                    .map_err(|e| crate::state::channel_error(&channel, e))?;
                Ok((channel, sealed))
            })
            .collect()
    }

    fn emit_updates(&self, tasks: &[Task<S>], outputs: &[TaskOutput<S>]) {
        if !self.emitter.wants(StreamMode::Updates) {
            return;
        }
        for (task, output) in tasks.iter().zip(outputs) {
            if task.node.is_some() {
                self.emitter.update(&task.name, output.update.clone());
            }
        }
    }

    /// Makes the frame a new checkpoint, and writes it unless durability is exit-only.
    async fn checkpoint(&mut self, source: CheckpointSource, step: i64) -> Result<()> {
        self.frame.step = step;
        self.frame.checkpoint_id = Some(waypoint_checkpoint::checkpoint_id(step));
        self.frame.task_base = None;
        self.replaying = false;
        self.frame.pending.clear();
        self.exit_writes.clear();
        self.resume = None;
        self.last_source = source;
        if self.config.durability != Durability::Exit {
            let changed = std::mem::take(&mut self.frame.dirty);
            self.persist(changed).await?;
        }
        self.emitter.debug(|| self.checkpoint_event());
        Ok(())
    }

    /// Writes that `run_tasks` did not save: in the background (async durability) or at
    /// the end of the run (exit durability).
    fn keep_writes(&mut self, unsaved: Vec<UnsavedWrites>) {
        if self.config.durability == Durability::Exit {
            self.exit_writes.extend(unsaved);
            return;
        }
        let Some((_, thread)) = self.saver() else {
            return;
        };
        let config = CheckpointConfig::of(
            thread,
            &self.ns,
            self.frame.checkpoint_id.as_deref().unwrap_or(""),
        );
        for (task_id, writes) in unsaved {
            let save = Save::Writes {
                config: config.clone(),
                writes,
                task_id,
                task_path: String::new(),
            };
            match self.config.durability {
                Durability::Async => self.background(save),
                // Written with the step's checkpoint, in one transaction.
                _ => self.step_writes.push(save),
            }
        }
    }

    /// Hands a save to the background writer, starting it if needed.
    fn background(&mut self, save: Save) {
        if self.writer.is_none() {
            let Some((saver, _)) = self.saver() else {
                return;
            };
            self.writer = Some(Writer::spawn(Arc::clone(saver)));
        }
        if let Some(writer) = &self.writer {
            writer.send(save);
        }
    }

    /// The debug event of the frame's checkpoint.
    fn checkpoint_event(&self) -> serde_json::Value {
        let next: Vec<String> = self
            .graph
            .prepare(&self.frame, &self.ns)
            .into_iter()
            .map(|t| t.name)
            .collect();
        serde_json::json!({
            "type": "checkpoint",
            "step": self.frame.step,
            "payload": {
                "config": {
                    "thread_id": self.thread,
                    "checkpoint_ns": self.ns,
                    "checkpoint_id": self.frame.checkpoint_id,
                },
                "values": serde_json::to_value(&*self.frame.state).unwrap_or_default(),
                "metadata": {"source": self.last_source, "step": self.frame.step},
                "next": next,
            },
        })
    }

    /// Writes the frame's checkpoint with `channels` changed since the last one stored.
    async fn persist(&mut self, changed: BTreeSet<String>) -> Result<()> {
        let Some((saver, thread)) = self.saver() else {
            return Ok(());
        };
        let saver = Arc::clone(saver);
        let thread = thread.to_owned();
        // Exit durability keeps no step writes, so appending channels store their values.
        let snapshot_all = std::mem::take(&mut self.frame.snapshot_all)
            || self.config.durability == Durability::Exit;
        let (checkpoint, new_versions) = self.graph.build_checkpoint(
            &mut self.frame,
            changed,
            snapshot_all,
            &thread,
            &self.ns,
        )?;
        let frame = &self.frame;
        let mut metadata = CheckpointMetadata::new(self.last_source, frame.step);
        crate::delta::write_counters(&frame.delta, &mut metadata.extra);
        metadata.parents = Some(self.nested.parents.clone());
        if let (CheckpointSource::Fork, Some(base)) = (self.last_source, &frame.task_base) {
            metadata = metadata.with(FORKED_FROM, base.clone());
        }
        if let Some(run_id) = &self.config.run_id {
            metadata = metadata.with_run_id(run_id.clone());
        }
        let parent = CheckpointConfig {
            thread_id: thread,
            checkpoint_ns: Some(self.ns.clone()),
            checkpoint_id: frame.persisted_id.clone(),
        };
        if self.config.durability == Durability::Sync && self.step_writes.is_empty() {
            saver
                .put(&parent, checkpoint, metadata, new_versions)
                .await?;
        } else {
            let put = Save::Put {
                config: parent,
                checkpoint,
                metadata,
                new_versions,
            };
            if self.config.durability == Durability::Async {
                self.background(put);
            } else {
                let mut batch = std::mem::take(&mut self.step_writes);
                batch.push(put);
                saver.save_batch(batch).await?;
            }
        }
        self.frame.persisted_id = self.frame.checkpoint_id.clone();
        Ok(())
    }

    /// At the end of a run: waits for background saves (async durability), or writes the
    /// last checkpoint and its writes (exit durability).
    async fn finish(&mut self) -> Result<()> {
        if let Some(writer) = self.writer.take() {
            writer.close().await?;
        }
        if self.config.durability != Durability::Exit
            || self.frame.dirty.is_empty() && self.exit_writes.is_empty()
        {
            return Ok(());
        }
        if !self.frame.dirty.is_empty() {
            let dirty = std::mem::take(&mut self.frame.dirty);
            self.persist(dirty).await?;
        }
        let unsaved = std::mem::take(&mut self.exit_writes);
        if let Some((saver, thread)) = self.saver() {
            let config = CheckpointConfig::of(
                thread,
                &self.ns,
                self.frame.checkpoint_id.as_deref().unwrap_or(""),
            );
            for (task_id, writes) in unsaved {
                saver.put_writes(&config, writes, &task_id, "").await?;
            }
        }
        Ok(())
    }
}

/// A task's writes not yet saved (exit durability): task id and writes.
type UnsavedWrites = (String, Vec<(String, SerializedValue)>);

/// A task's id: a uuid5 of where and what it is, so reruns of one step agree.
///
/// The first two bytes are the task's position in its step, so ids sort in task order:
/// savers return pending writes by task id, and a history replayed from them must fold
/// parallel writes in the order the step applied them.
pub(crate) fn task_id(
    checkpoint_id: &str,
    ns: &str,
    step: i64,
    name: &str,
    kind: &TaskKind,
    position: usize,
) -> String {
    let kind = match kind {
        TaskKind::Pull => "pull".to_owned(),
        TaskKind::Push(i) => format!("push:{i}"),
    };
    let key = format!("{checkpoint_id}\u{0}{ns}\u{0}{step}\u{0}{name}\u{0}{kind}");
    let mut bytes = *uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, key.as_bytes()).as_bytes();
    let position = u16::try_from(position).unwrap_or(u16::MAX).to_be_bytes();
    bytes[..2].copy_from_slice(&position);
    uuid::Uuid::from_bytes(bytes).to_string()
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
fn dump<T: serde::Serialize + ?Sized>(
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

fn open(
    serde: &Serde,
    value: &SerializedValue,
    slot: &Slot<'_>,
    channel: &str,
) -> Result<SerializedValue> {
    serde
        .open(value, slot)
        .map_err(|e| crate::state::channel_error(channel, e))
}

fn decode<T: serde::de::DeserializeOwned>(
    serde: &Serde,
    value: &SerializedValue,
    channel: &str,
) -> Result<T> {
    serde
        .loads(value)
        .map_err(|e| crate::state::channel_error(channel, e))
}
