//! What a thread looks like at one checkpoint: [`StateSnapshot`], built from a decoded frame,
//! one checkpoint at a time or a whole history at once.

use std::collections::HashMap;
use std::sync::Arc;

use waypoint_checkpoint::{
    CheckpointMetadata, CheckpointSaver, CheckpointTuple, PendingWrite, channels,
};

use crate::config::RunConfig;
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::pregel::frame::{Frame, extend_from};
use crate::pregel::graph::Graph;
use crate::pregel::step;
use crate::state::State;

/// The parts of a checkpoint tuple a snapshot shows besides its values.
pub(crate) struct Head {
    config: RunConfig,
    parent_config: Option<RunConfig>,
    metadata: CheckpointMetadata,
    created_at: String,
}

impl Head {
    pub(crate) fn of(tuple: &CheckpointTuple) -> Self {
        Head {
            config: RunConfig::from(&tuple.config),
            parent_config: tuple.parent_config.as_ref().map(RunConfig::from),
            metadata: tuple.metadata.clone(),
            created_at: tuple.checkpoint.ts.clone(),
        }
    }
}

/// A task a checkpoint will run next, and its error if it already failed.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskInfo {
    /// The task id (stable for a checkpoint: a resumed run uses the same one).
    pub id: String,
    /// The node.
    pub name: String,
    /// The error the task saved, if it failed.
    pub error: Option<String>,
    /// The interrupts it is paused on.
    pub interrupts: Vec<Interrupt>,
}

/// The state of a thread at one checkpoint (LangGraph's `StateSnapshot`).
#[derive(Clone, Debug)]
pub struct StateSnapshot<S: State> {
    /// The state's values.
    pub values: S,
    /// The nodes that run next (empty when the run is done).
    pub next: Vec<String>,
    /// This checkpoint's config: thread, namespace and id.
    pub config: RunConfig,
    /// Its metadata (`source`, `step`, `parents`, ...).
    pub metadata: CheckpointMetadata,
    /// When it was written (RFC 3339).
    pub created_at: String,
    /// The parent checkpoint's config, `None` for the first.
    pub parent_config: Option<RunConfig>,
    /// The tasks of `next`, with errors of failed ones and interrupts of paused ones.
    pub tasks: Vec<TaskInfo>,
    /// Every pending interrupt, in task order.
    pub interrupts: Vec<Interrupt>,
}

/// The snapshot of a decoded checkpoint.
pub(crate) fn snapshot<S: State>(
    graph: &Graph<S>,
    head: Head,
    frame: Frame<S>,
) -> StateSnapshot<S> {
    let Head {
        config,
        parent_config,
        metadata,
        created_at,
    } = head;
    let mut interrupts = frame.pending_interrupts(graph);
    let tasks: Vec<TaskInfo> = step::prepare(graph, &frame, &config.checkpoint_ns)
        .into_iter()
        .map(|task| {
            let error = frame
                .pending
                .iter()
                .find(|w| w.task_id == task.id && w.channel == channels::ERROR)
                .map(|w| {
                    graph
                        .serde
                        .loads::<String>(&w.value)
                        .unwrap_or_else(|e| format!("(unreadable error: {e})"))
                });
            TaskInfo {
                interrupts: interrupts.remove(&task.id).unwrap_or_default(),
                id: task.id,
                name: task.name,
                error,
            }
        })
        .collect();
    StateSnapshot {
        values: Arc::unwrap_or_clone(frame.state),
        interrupts: tasks.iter().flat_map(|t| t.interrupts.clone()).collect(),
        next: tasks.iter().map(|t| t.name.clone()).collect(),
        config,
        metadata,
        created_at,
        parent_config,
        tasks,
    }
}

/// The snapshot of a thread without checkpoints: the initial state, nothing next.
pub(crate) fn empty<S: State>(graph: &Graph<S>, config: &RunConfig) -> StateSnapshot<S> {
    StateSnapshot {
        values: graph.template.clone(),
        next: Vec::new(),
        config: config.clone(),
        metadata: CheckpointMetadata::default(),
        created_at: String::new(),
        parent_config: None,
        tasks: Vec::new(),
        interrupts: Vec::new(),
    }
}

/// The snapshots of `tuples` (a listing, newest first), in the same order.
pub(crate) async fn history<S: State>(
    graph: &Graph<S>,
    saver: &Arc<dyn CheckpointSaver>,
    tuples: Vec<CheckpointTuple>,
) -> Result<Vec<StateSnapshot<S>>> {
    // Oldest first, so a checkpoint's appending channels are its parent's (already
    // rebuilt) plus the parent's step writes: one pass, no history walk per checkpoint.
    let mut rebuilt: HashMap<String, usize> = Default::default();
    let mut out: Vec<StateSnapshot<S>> = Vec::with_capacity(tuples.len());
    let writes_of: HashMap<String, Vec<PendingWrite>> = tuples
        .iter()
        .map(|t| (t.checkpoint.id.clone(), t.pending_writes.clone()))
        .collect();
    for tuple in tuples.into_iter().rev() {
        let head = Head::of(&tuple);
        let id = tuple.checkpoint.id.clone();
        let parent = tuple
            .parent_config
            .as_ref()
            .and_then(|p| p.checkpoint_id.clone());
        let frame = match parent
            .as_ref()
            .and_then(|p| rebuilt.get(p).map(|&i| (p, i)))
        {
            Some((parent_id, index)) => {
                let mut frame = Frame::decode(graph, tuple)?;
                let parent_state = &out[index].values;
                let writes = writes_of.get(parent_id).map(Vec::as_slice).unwrap_or(&[]);
                for channel in std::mem::take(&mut frame.missing) {
                    extend_from(
                        graph,
                        Arc::make_mut(&mut frame.state),
                        parent_state,
                        &channel,
                        writes,
                    )?;
                }
                frame
            }
            None => Frame::load(graph, saver, tuple, false).await?,
        };
        rebuilt.insert(id, out.len());
        out.push(snapshot(graph, head, frame));
    }
    out.reverse();
    Ok(out)
}
