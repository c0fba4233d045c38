//! When a run's writes and checkpoints reach the checkpointer: the three [`Durability`]
//! modes, and the one place where they differ.
//!
//! The loop tells [`Saves`] what happened (a task finished, a step reached its barrier, the
//! frame became a checkpoint, the run ended) and each mode saves accordingly:
//!
//! | event           | `Sync`                              | `Async`               | `Exit`                  |
//! |-----------------|-------------------------------------|-----------------------|-------------------------|
//! | task finished   | its writes saved before it returns  | kept for the barrier  | kept for the barrier    |
//! | barrier         | the writes go with the checkpoint   | queued                | kept until the end      |
//! | checkpoint      | saved (with those writes, one batch)| queued                | not saved               |
//! | run ends        | nothing left                        | waits for the queue   | last checkpoint, writes |
//!
//! A step's sole task hands its writes to the barrier in every mode: the step's checkpoint is
//! the very next write and holds them (see `Run::run_tasks`).
//!
//! A saver that saves in process ([`CheckpointSaver::in_process`]: the in-memory one) has no
//! background writer: its async runs save as sync ones do (see [`Saves::new`]).
//!
//! Each checkpoint's metadata also records LangGraph's `writes` key (see [`step_writes`]):
//! what made it, as LangGraph up to 0.4 stored it. It duplicates the update values, as
//! LangGraph's did, and is recorded in every durability mode (in exit mode only the last
//! checkpoint is saved, with its own step's writes). Two exceptions: under encryption it is
//! left out (the metadata is plaintext; the values are sealed), and LangGraph's PostgreSQL
//! saver, like Waypoint's in LangGraph mode, drops it when storing.
//!
//! Where the step's writes saved against the parent checkpoint give that value back exactly
//! ([`crate::stored::rebuild_writes`]: one node's update, every channel of it saved, as in a
//! chat whose node appends a message), the checkpoint stores only the node's name
//! ([`metadata::WRITES_FROM`]) and reads rebuild `writes` from the parent; an input
//! checkpoint likewise names `__start__`, the channel that stores its input. Each value is
//! then stored once, not twice. A parent that held writes before the step (a resumed step),
//! exit durability (the parent's writes are not saved), encryption and LangGraph mode keep
//! it inline.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value};
use tracing::Instrument;
use waypoint_checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Save, SerializedValue, metadata,
};

use crate::config::Durability;
use crate::error::{Error, Result};
use crate::pregel::frame::Frame;
use crate::pregel::graph::{Graph, INPUT};
use crate::pregel::step::{self, Task, TaskOutput};
use crate::state::State;

/// A batch (one transaction) takes no more of the queue's saves once it holds this many.
const MAX_BATCH: usize = 256;

/// One task's writes not saved yet.
pub(crate) struct TaskWrites {
    pub(crate) task_id: String,
    /// LangGraph's task path, which orders a step's writes.
    pub(crate) task_path: String,
    pub(crate) writes: Vec<(String, SerializedValue)>,
}

/// Where a run saves, and what its checkpoints' metadata say besides the frame.
pub(crate) struct Target {
    pub(crate) saver: Arc<dyn CheckpointSaver>,
    pub(crate) thread: String,
    pub(crate) ns: String,
    /// Namespace to checkpoint id of every ancestor graph (the `parents` metadata).
    pub(crate) parents: BTreeMap<String, String>,
    pub(crate) run_id: Option<String>,
    /// Why the frame's checkpoint was made.
    pub(crate) source: CheckpointSource,
    /// LangGraph's `writes` metadata of the frame's checkpoint; `None` leaves the key out.
    pub(crate) writes: Option<Arc<Value>>,
}

impl Target {
    /// The config of checkpoint `checkpoint_id` on this target.
    fn at(&self, checkpoint_id: &str) -> CheckpointConfig {
        CheckpointConfig::of(&self.thread, &self.ns, checkpoint_id)
    }

    /// The span of saving `frame`'s checkpoint here.
    fn save_span<S: State>(&self, frame: &Frame<S>) -> tracing::Span {
        tracing::debug_span!(
            "save_checkpoint",
            thread_id = %self.thread,
            checkpoint_ns = %self.ns,
            checkpoint_id = frame.checkpoint_id.as_deref(),
            step = frame.step,
        )
    }
}

/// The `writes` metadata reads rebuild for the next checkpoint from the writes a step saved
/// against its parent.
pub(crate) struct Rebuilt {
    /// The checkpoint the writes were saved against.
    parent: String,
    /// The node whose update they are.
    node: String,
    /// `writes` as [`crate::stored::rebuild_writes`] gives it back.
    writes: Value,
}

/// A run's saves in its durability mode, with what the mode holds between them.
pub(crate) enum Saves {
    /// Each save completes before the run goes on.
    Sync {
        /// Writes that go with the next checkpoint, in its transaction.
        with_checkpoint: Vec<Save>,
        /// What the last step's saved writes rebuild.
        rebuilt: Option<Rebuilt>,
    },
    /// Saves go, in order, to a background writer started with the first.
    Async {
        writer: Option<Writer>,
        /// What the last step's saved writes rebuild.
        rebuilt: Option<Rebuilt>,
    },
    /// Nothing is saved before the run ends.
    Exit {
        /// Writes of the tasks since the last checkpoint.
        kept: Vec<TaskWrites>,
    },
}

impl Saves {
    /// The saves of a run in `durability` to a saver that saves `in_process` or not. Async
    /// saves to an in-process saver are made in line, as sync ones: handing a save to the
    /// background writer (a task woken on another thread) costs more than the save (at
    /// 2f23685: 17,500 super-steps/s in the background, 25,600 in line, benches/runtime_steps
    /// with `WAYPOINT_BENCH_PROFILE`).
    pub(crate) fn new(durability: Durability, in_process: bool) -> Self {
        match durability {
            Durability::Async if !in_process => Saves::Async {
                writer: None,
                rebuilt: None,
            },
            Durability::Sync | Durability::Async => Saves::Sync {
                with_checkpoint: Vec::new(),
                rebuilt: None,
            },
            Durability::Exit => Saves::Exit { kept: Vec::new() },
        }
    }

    /// A task finished with `writes`, against checkpoint `checkpoint_id`: sync saves them
    /// now; the others hand them back, for [`Saves::barrier`] in task order.
    pub(crate) async fn task_done(
        &self,
        to: &Target,
        checkpoint_id: &str,
        writes: TaskWrites,
    ) -> Result<Option<TaskWrites>> {
        match self {
            Saves::Sync { .. } => {
                to.saver
                    .put_writes(
                        &to.at(checkpoint_id),
                        writes.writes,
                        &writes.task_id,
                        &writes.task_path,
                    )
                    .await?;
                Ok(None)
            }
            Saves::Async { .. } | Saves::Exit { .. } => Ok(Some(writes)),
        }
    }

    /// A step's tasks are done; `unsaved` are their writes not saved yet, in task order,
    /// against checkpoint `checkpoint_id`, which held no writes before the step unless
    /// `held_writes`: sync writes them with the step's checkpoint, async queues them, exit
    /// keeps them until the end.
    pub(crate) fn barrier(
        &mut self,
        to: Option<&Target>,
        checkpoint_id: &str,
        unsaved: Vec<TaskWrites>,
        held_writes: bool,
    ) {
        let rebuilt = match self {
            Saves::Exit { kept } => {
                kept.extend(unsaved);
                return;
            }
            Saves::Sync { rebuilt, .. } | Saves::Async { rebuilt, .. } => rebuilt,
        };
        let Some(to) = to else {
            return;
        };
        *rebuilt = match held_writes || to.saver.langgraph_values() || to.saver.sealed() {
            true => None,
            false => rebuild(checkpoint_id, &unsaved),
        };
        if unsaved.is_empty() {
            return;
        }
        let saves = unsaved.into_iter().map(
            |TaskWrites {
                 task_id,
                 task_path,
                 writes,
             }| Save::Writes {
                config: to.at(checkpoint_id),
                writes,
                task_id,
                task_path,
            },
        );
        match self {
            Saves::Sync {
                with_checkpoint, ..
            } => {
                // Exactly room for the checkpoint's put too, which joins these in one batch:
                // a `Save` is ~350 bytes, and growth's minimum of four would make the usual
                // step's vector (one task) over 1 KiB, an allocation of the slower kind.
                with_checkpoint.reserve_exact(saves.len() + 1);
                with_checkpoint.extend(saves);
            }
            Saves::Async { writer, .. } => Writer::send(writer, to, saves.collect()),
            Saves::Exit { .. } => {}
        }
    }

    /// The frame became a new checkpoint: sync writes it (in one batch with the step's
    /// writes), async queues it; exit leaves it for the end of the run, and drops the writes
    /// kept against the checkpoint before.
    pub(crate) async fn checkpoint<S: State>(
        &mut self,
        to: Option<&Target>,
        graph: &Graph<S>,
        frame: &mut Frame<S>,
    ) -> Result<()> {
        if let Saves::Exit { kept } = self {
            kept.clear();
            return Ok(());
        }
        let changed = std::mem::take(&mut frame.dirty);
        let Some(to) = to else {
            return Ok(());
        };
        let put = self.put(to, graph, frame, changed)?;
        let span = to.save_span(frame);
        match self {
            Saves::Sync {
                with_checkpoint, ..
            } if with_checkpoint.is_empty() => {
                to.saver
                    .put(&put.parent, put.checkpoint, put.metadata, put.new_versions)
                    .instrument(span)
                    .await?;
            }
            Saves::Sync {
                with_checkpoint, ..
            } => {
                let mut batch = std::mem::take(with_checkpoint);
                batch.push(put.into_save());
                to.saver.save_batch(batch).instrument(span).await?;
            }
            Saves::Async { writer, .. } => Writer::send(writer, to, vec![put.into_save()]),
            Saves::Exit { .. } => {}
        }
        frame.persisted_id = frame.checkpoint_id.clone();
        Ok(())
    }

    /// The run ends (finished, failed or paused): async waits until its queue is saved; exit
    /// writes the last checkpoint, if the run changed the frame, and the writes kept since.
    pub(crate) async fn finish<S: State>(
        &mut self,
        to: Option<&Target>,
        graph: &Graph<S>,
        frame: &mut Frame<S>,
    ) -> Result<()> {
        let kept = match self {
            Saves::Sync { .. } => return Ok(()),
            Saves::Async { writer, .. } => {
                return match writer.take() {
                    Some(writer) => writer.close().await,
                    None => Ok(()),
                };
            }
            Saves::Exit { kept } => std::mem::take(kept),
        };
        let Some(to) = to else {
            return Ok(());
        };
        if !frame.dirty.is_empty() {
            let dirty = std::mem::take(&mut frame.dirty);
            let put = self.put(to, graph, frame, dirty)?;
            let span = to.save_span(frame);
            to.saver
                .save_batch(vec![put.into_save()])
                .instrument(span)
                .await?;
            frame.persisted_id = frame.checkpoint_id.clone();
        }
        let config = to.at(frame.checkpoint_id.as_deref().unwrap_or(""));
        for TaskWrites {
            task_id,
            task_path,
            writes,
        } in kept
        {
            to.saver
                .put_writes(&config, writes, &task_id, &task_path)
                .await?;
        }
        Ok(())
    }

    /// The put of the frame's checkpoint with `changed` channels changed since the last one
    /// stored, its parent that one.
    fn put<S: State>(
        &mut self,
        to: &Target,
        graph: &Graph<S>,
        frame: &mut Frame<S>,
        changed: BTreeSet<String>,
    ) -> Result<Put> {
        // Exit durability keeps no step writes, so appending channels store their values.
        let snapshot_all =
            std::mem::take(&mut frame.snapshot_all) || matches!(self, Saves::Exit { .. });
        let (checkpoint, new_versions) =
            frame.build_checkpoint(graph, changed, snapshot_all, &to.thread, &to.ns)?;
        let mut metadata = CheckpointMetadata::new(to.source, frame.step);
        crate::delta::write_counters(&frame.delta, &mut metadata.extra);
        metadata.parents = Some(to.parents.clone());
        if let (CheckpointSource::Fork, Some(base)) = (to.source, &frame.task_base) {
            metadata = metadata.with(metadata::FORKED_FROM, base.clone());
        }
        if let Some(run_id) = &to.run_id {
            metadata = metadata.with_run_id(run_id.clone());
        }
        let rebuilt = match self {
            Saves::Sync { rebuilt, .. } | Saves::Async { rebuilt, .. } => rebuilt.take(),
            Saves::Exit { .. } => None,
        };
        if let Some(writes) = &to.writes {
            let from = writes_from(to, frame, &checkpoint, rebuilt, writes);
            match from.filter(|_| !graph.serde.is_encrypted()) {
                Some(from) => metadata = metadata.with(metadata::WRITES_FROM, from),
                None => record_writes(graph, &*to.saver, &mut metadata, Value::clone(writes)),
            }
        }
        Ok(Put {
            parent: CheckpointConfig {
                thread_id: to.thread.clone(),
                checkpoint_ns: Some(to.ns.clone()),
                checkpoint_id: frame.persisted_id.clone(),
            },
            checkpoint,
            metadata,
            new_versions,
        })
    }
}

/// Where reads can rebuild `writes`, the `writes` metadata of the frame's `checkpoint`, from
/// instead of it being stored ([`metadata::WRITES_FROM`]): the node of `rebuilt` when the
/// step's writes saved against the checkpoint's parent give it back, `__start__` when the
/// input it stores does (an input checkpoint). `None`: stored as it is.
fn writes_from<S: State>(
    to: &Target,
    frame: &Frame<S>,
    checkpoint: &Checkpoint,
    rebuilt: Option<Rebuilt>,
    writes: &Value,
) -> Option<String> {
    if let Some(rebuilt) = rebuilt
        && frame.persisted_id.as_deref() == Some(rebuilt.parent.as_str())
        && rebuilt.writes == *writes
    {
        return Some(rebuilt.node);
    }
    let input = checkpoint.channel_values.get(INPUT);
    let kept = !to.saver.langgraph_values() && !to.saver.sealed();
    (kept && to.source == CheckpointSource::Input)
        .then(|| input.and_then(crate::stored::rebuild_input))
        .flatten()
        .filter(|input| input == writes)
        .map(|_| INPUT.to_owned())
}

/// What reads rebuild as the `writes` of the checkpoint after `parent` from the step's
/// writes `unsaved`, saved against it: the update of the node whose task wrote its state
/// channels, if one did (see [`crate::stored::rebuild_writes`]).
fn rebuild(parent: &str, unsaved: &[TaskWrites]) -> Option<Rebuilt> {
    let writer = unsaved.iter().find(|task| {
        task.writes
            .iter()
            .any(|(channel, _)| !crate::stored::is_internal(channel))
    })?;
    // A triggered node's task path: `~__pregel_pull, {node}`.
    let node = writer
        .task_path
        .strip_prefix('~')
        .and_then(|path| path.strip_prefix(step::PULL))
        .and_then(|path| path.strip_prefix(", "))
        .filter(|node| *node != INPUT)?;
    let writes = unsaved.iter().flat_map(|task| {
        task.writes
            .iter()
            .map(|(channel, value)| (task.task_id.as_str(), channel.as_str(), value))
    });
    Some(Rebuilt {
        parent: parent.to_owned(),
        node: node.to_owned(),
        writes: crate::stored::rebuild_writes(node, writes)?,
    })
}

/// LangGraph's `writes` metadata of a step's checkpoint: each node's update as the `updates`
/// stream shows it, `{node: update}` (a list of updates for a node that ran as several
/// tasks, `null` for a node that returned none), or `null` when no node ran (the step of the
/// start task).
pub(crate) fn step_writes<S: State>(tasks: &[Task<S>], outputs: &[TaskOutput<S>]) -> Result<Value> {
    // A step of one node's task (most steps) needs no grouping.
    if let ([task], [output]) = (tasks, outputs)
        && task.node.is_some()
    {
        let update = update_json(output.update.as_ref())?;
        return Ok(Value::Object(Map::from_iter([(task.name.clone(), update)])));
    }
    let mut by_node: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for (task, output) in tasks.iter().zip(outputs) {
        if task.node.is_some() {
            let update = update_json(output.update.as_ref())?;
            by_node.entry(&task.name).or_default().push(update);
        }
    }
    if by_node.is_empty() {
        return Ok(Value::Null);
    }
    let writes = by_node.into_iter().map(|(node, mut updates)| {
        let value = match updates.len() {
            1 => updates.remove(0),
            _ => Value::Array(updates),
        };
        (node.to_owned(), value)
    });
    Ok(Value::Object(writes.collect()))
}

/// An update as JSON, for the `writes` metadata.
pub(crate) fn update_json<U: serde::Serialize>(update: Option<&U>) -> Result<Value> {
    serde_json::to_value(update).map_err(|e| {
        crate::state::channel_error(
            metadata::WRITES,
            waypoint_checkpoint::Error::serialization("json", e),
        )
    })
}

/// Sets LangGraph's `writes` key of `metadata`, unless `graph` or `saver` encrypts values
/// (the metadata is stored in plaintext).
pub(crate) fn record_writes<S: State>(
    graph: &Graph<S>,
    saver: &dyn CheckpointSaver,
    metadata: &mut CheckpointMetadata,
    writes: Value,
) {
    if !graph.serde.is_encrypted() && !saver.sealed() {
        metadata.extra.insert(metadata::WRITES.to_owned(), writes);
    }
}

/// The put of one checkpoint: the arguments of [`CheckpointSaver::put`].
struct Put {
    /// The last checkpoint stored, the new one's parent.
    parent: CheckpointConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
}

impl Put {
    /// The put as one save of a batch.
    fn into_save(self) -> Save {
        Save::Put {
            config: self.parent,
            checkpoint: self.checkpoint,
            metadata: self.metadata,
            new_versions: self.new_versions,
        }
    }
}

/// The background writer of async durability: saves leave in order, and whatever queued
/// up while the previous batch was being written goes out together in one `save_batch`
/// (one commit), so a slow commit is shared by several steps.
///
/// The queue carries a barrier's or a checkpoint's saves as one `Vec`: the queue allocates
/// its items in blocks of 32, and a block of `Save`s (kilobytes, allocated when each run's
/// writer starts) cost as much as a few steps.
pub(crate) struct Writer {
    queue: tokio::sync::mpsc::UnboundedSender<Vec<Save>>,
    task: tokio::task::JoinHandle<Result<()>>,
}

impl Writer {
    fn spawn(saver: Arc<dyn CheckpointSaver>, thread_id: &str) -> Self {
        let (queue, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<Save>>();
        // Its own root (it outlives the step that starts it), linked to that step's span.
        let span = tracing::debug_span!(parent: None, "async_saves", thread_id);
        span.follows_from(tracing::Span::current());
        let task = tokio::spawn(
            async move {
                while let Some(mut batch) = rx.recv().await {
                    while batch.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(saves) => batch.extend(saves),
                            Err(_) => break,
                        }
                    }
                    // After a failure nothing more is written: a later checkpoint without the
                    // one before it would break the thread's chain.
                    saver.save_batch(batch).await?;
                }
                Ok(())
            }
            .instrument(span),
        );
        Writer { queue, task }
    }

    /// Queues `saves`, in order, on `writer`, starting it if needed; a writer that already
    /// failed reports it when the run finishes.
    fn send(writer: &mut Option<Writer>, to: &Target, saves: Vec<Save>) {
        let writer = writer.get_or_insert_with(|| Writer::spawn(Arc::clone(&to.saver), &to.thread));
        let _ = writer.queue.send(saves);
    }

    /// Waits until everything queued is saved.
    async fn close(self) -> Result<()> {
        drop(self.queue);
        self.task
            .await
            .map_err(|e| Error::Checkpoint(waypoint_checkpoint::Error::backend("runtime", e)))?
    }
}
