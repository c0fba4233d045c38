//! Threads and time travel: reading state, listing history, updating and forking.

use std::collections::BTreeSet;
use std::sync::Arc;

use waypoint_checkpoint::{
    CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, CheckpointTuple,
    ListOptions, PendingWrite, channels,
};

use crate::graph::{END, START};
use crate::interrupt::Interrupt;
use crate::lease::LeaseGuard;
use crate::pregel::{CompiledGraph, Frame, INPUT};
use crate::{Error, Result, RunConfig, State};

/// The parts of a checkpoint tuple a snapshot shows besides its values.
struct Head {
    config: RunConfig,
    parent_config: Option<RunConfig>,
    metadata: CheckpointMetadata,
    created_at: String,
}

impl Head {
    fn of(tuple: &CheckpointTuple) -> Self {
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

impl<S: State> CompiledGraph<S> {
    fn require_saver(&self) -> Result<&std::sync::Arc<dyn CheckpointSaver>> {
        self.inner.checkpointer.as_ref().ok_or_else(|| {
            Error::InvalidConfig("this graph has no checkpointer: compile it with one".into())
        })
    }

    /// The snapshot of a decoded checkpoint.
    fn snapshot(&self, head: Head, frame: Frame<S>) -> StateSnapshot<S> {
        let Head {
            config,
            parent_config,
            metadata,
            created_at,
        } = head;
        let mut interrupts = self.pending_interrupts(&frame);
        let tasks: Vec<TaskInfo> = self
            .prepare(&frame, &config.checkpoint_ns)
            .into_iter()
            .map(|task| {
                let error = frame
                    .pending
                    .iter()
                    .find(|w| w.task_id == task.id && w.channel == channels::ERROR)
                    .map(|w| {
                        self.inner
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

    /// The thread's latest state, or the checkpoint `config.checkpoint_id` names.
    ///
    /// A thread without checkpoints gives the initial state with nothing next.
    pub async fn get_state(&self, config: &RunConfig) -> Result<StateSnapshot<S>> {
        let saver = self.require_saver()?;
        let thread = self.thread_of(config)?.unwrap_or_default();
        match saver.get_tuple(&config.checkpoint_config(thread)).await? {
            Some(tuple) => {
                let head = Head::of(&tuple);
                Ok(self.snapshot(head, self.load(saver, tuple, false).await?))
            }
            None => Ok(StateSnapshot {
                values: self.inner.template.clone(),
                next: Vec::new(),
                config: config.clone(),
                metadata: CheckpointMetadata::default(),
                created_at: String::new(),
                parent_config: None,
                tasks: Vec::new(),
                interrupts: Vec::new(),
            }),
        }
    }

    /// The thread's checkpoints as snapshots, newest first, filtered by metadata, before a
    /// checkpoint id, and limited as `options` says.
    pub async fn get_state_history(
        &self,
        config: &RunConfig,
        options: &ListOptions,
    ) -> Result<Vec<StateSnapshot<S>>> {
        let saver = self.require_saver()?;
        let thread = self.thread_of(config)?.unwrap_or_default();
        let list_config = CheckpointConfig {
            thread_id: thread.to_owned(),
            checkpoint_ns: Some(config.checkpoint_ns.clone()),
            checkpoint_id: None,
        };
        let mut options = options.clone();
        if options.before.is_none() {
            options.before = config.checkpoint_id.clone();
        }
        let tuples = saver.list(Some(&list_config), &options).await?;
        // Oldest first, so a checkpoint's appending channels are its parent's (already
        // rebuilt) plus the parent's step writes: one pass, no history walk per checkpoint.
        let mut rebuilt: std::collections::HashMap<String, usize> = Default::default();
        let mut out: Vec<StateSnapshot<S>> = Vec::with_capacity(tuples.len());
        let writes_of: std::collections::HashMap<String, Vec<PendingWrite>> = tuples
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
                    let mut frame = self.load_frame(tuple)?;
                    let parent_state = &out[index].values;
                    let writes = writes_of.get(parent_id).map(Vec::as_slice).unwrap_or(&[]);
                    for channel in std::mem::take(&mut frame.missing) {
                        self.extend_from(
                            Arc::make_mut(&mut frame.state),
                            parent_state,
                            &channel,
                            writes,
                        )?;
                    }
                    frame
                }
                None => self.load(saver, tuple, false).await?,
            };
            rebuilt.insert(id, out.len());
            out.push(self.snapshot(head, frame));
        }
        out.reverse();
        Ok(out)
    }

    /// Sets an appending channel to `parent`'s value of it plus the parent's step `writes`.
    fn extend_from(
        &self,
        state: &mut S,
        parent: &S,
        channel: &str,
        writes: &[PendingWrite],
    ) -> Result<()> {
        let serde = &self.inner.serde;
        let Some(i) = state.channel_index(channel) else {
            return Ok(());
        };
        state.copy_channel(parent, i, serde)?;
        for write in writes.iter().filter(|w| w.channel == channel) {
            let mut update = S::Update::default();
            state.load_write(&mut update, i, &write.value, serde)?;
            state.apply(update)?;
        }
        Ok(())
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
        let thread = self.thread_of(config)?.unwrap_or_default().to_owned();
        // Like a run, an update holds the thread's lease while it writes.
        let (wait, ttl) = (config.wait_for_thread, config.lease_ttl);
        let lease = LeaseGuard::acquire(saver, &thread, wait, ttl).await?;
        let writer = lease
            .as_ref()
            .map_or_else(|| Arc::clone(saver), LeaseGuard::fenced);
        let result = self
            .update_state_held(&writer, thread, config, values, as_node)
            .await;
        if let Some(lease) = lease {
            lease.release().await;
        }
        result
    }

    async fn update_state_held(
        &self,
        saver: &std::sync::Arc<dyn CheckpointSaver>,
        thread: String,
        config: &RunConfig,
        values: Option<S::Update>,
        as_node: Option<&str>,
    ) -> Result<RunConfig> {
        let mut frame = match saver.get_tuple(&config.checkpoint_config(&thread)).await? {
            Some(tuple) => self.load(saver, tuple, false).await?,
            None if config.checkpoint_id.is_some() => {
                return Err(Error::InvalidConfig(format!(
                    "checkpoint `{}` of thread `{thread}` does not exist",
                    config.checkpoint_id.as_deref().unwrap_or("")
                )));
            }
            None => self.fresh_frame(),
        };
        let as_node = match as_node {
            Some(name) => name.to_owned(),
            None => self.last_writer(&frame)?,
        };
        let node = if as_node == START {
            &self.inner.start
        } else if as_node == END {
            return Err(Error::InvalidUpdate(
                "update_state as END is not supported; name the node the update comes from".into(),
            ));
        } else {
            let index = *self.inner.index.get(&as_node).ok_or_else(|| {
                Error::InvalidUpdate(format!("as_node `{as_node}` is not a node of this graph"))
            })?;
            &self.inner.nodes[index]
        };

        // The update is a task of `as_node`: what was pending is replaced by its routing.
        let version = self.next_version(&frame)?;
        let output = self.route_update(node, &frame.state, values)?;
        let mut changed = BTreeSet::new();
        if frame.input.take().is_some() {
            changed.insert(INPUT.to_owned());
        }
        for i in std::mem::take(&mut frame.triggered) {
            changed.insert(self.inner.nodes[i].trigger.clone());
        }
        if !frame.sends.is_empty() {
            frame.sends.clear();
            changed.insert(channels::TASKS.to_owned());
        }
        changed.extend(self.apply(&mut frame, &[], vec![output], &version)?);
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
            self.build_checkpoint(&mut frame, changed, true, &thread, &config.checkpoint_ns)?;
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Update, step);
        crate::delta::write_counters(&frame.delta, &mut metadata.extra);
        if let Some(run_id) = &config.run_id {
            metadata = metadata.with_run_id(run_id.clone());
        }
        let parent = CheckpointConfig {
            thread_id: thread,
            checkpoint_ns: Some(config.checkpoint_ns.clone()),
            checkpoint_id: parent_id,
        };
        let stored = saver
            .put(&parent, checkpoint, metadata, new_versions)
            .await?;
        Ok(RunConfig {
            configurable: config.configurable.clone(),
            ..RunConfig::from(&stored)
        })
    }

    /// The node whose writes the state saw last, for `update_state` without `as_node`.
    fn last_writer(&self, frame: &Frame<S>) -> Result<String> {
        let mut best: Option<(&waypoint_checkpoint::ChannelVersion, Vec<&str>)> = None;
        for (node, seen) in &frame.seen {
            if node != START && !self.inner.index.contains_key(node) {
                continue;
            }
            let Some(version) = seen.values().max() else {
                continue;
            };
            match &mut best {
                Some((v, names)) if version.counter() == v.counter() => names.push(node),
                Some((v, _)) if version.counter() < v.counter() => {}
                _ => best = Some((version, vec![node])),
            }
        }
        match best {
            None => Ok(START.to_owned()),
            Some((_, names)) if names.len() == 1 => Ok(names[0].to_owned()),
            Some((_, names)) => Err(Error::InvalidUpdate(format!(
                "ambiguous update: nodes {names:?} ran last; pass as_node"
            ))),
        }
    }

    /// Checks an update's keys and routes it as `node`'s output.
    fn route_update(
        &self,
        node: &crate::pregel::Node<S>,
        state: &S,
        values: Option<S::Update>,
    ) -> Result<crate::pregel::TaskOutput<S>> {
        self.route(node, state, values.as_ref(), Vec::new())
    }
}
