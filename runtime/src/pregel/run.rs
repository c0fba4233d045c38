//! One run of the loop on one thread: loading the thread, the steps, interrupts and
//! breakpoints, handing saves to the run's durability, and what a subgraph inherits.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::future::join_all;
use tracing::Instrument;
use waypoint_checkpoint::{
    CheckpointConfig, CheckpointSaver, CheckpointSource, PendingWrite, SerializedValue, Slot,
    channels,
};

use crate::command::{Command, CommandGraph, Goto, ParentCommand};
use crate::config::RunConfig;
use crate::context::{CallSite, Context};
use crate::error::{Error, Result};
use crate::interrupt::{Input, Interrupt, Outcome, Resume, Scratch, SharedScratch};
use crate::lease::LeaseGuard;
use crate::pregel::codec::{decode, dump, open};
use crate::pregel::durability::{self, Saves, Target, TaskWrites};
use crate::pregel::frame::Frame;
use crate::pregel::graph::{Graph, INPUT, Node, START};
use crate::pregel::step::{self, SavedTask, Task, TaskOutput};
use crate::state::State;
use crate::stream::{CustomSink, Emitter, MessageMetadata, MessageSink, StreamMode};

/// The `versions_seen` entry recording the channel versions at the last resume, so a
/// static breakpoint does not fire again for a step it already paused.
const INTERRUPT_SEEN: &str = channels::INTERRUPT;

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
    /// Paused: its own interrupt, or every interrupt of a subgraph it called.
    Interrupted(Vec<Interrupt>),
    /// Returned a command for the parent graph: the run stops and hands it up, unsaved.
    Parent(ParentCommand),
    Failed(Error),
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
    /// The resume the calling task brought and has not consumed: answers for the
    /// subgraph's interrupts, handed down in memory (LangGraph stores none in the
    /// subgraph's namespace).
    pub(crate) resume: Option<Resume>,
}

/// Runs `graph` until it finishes or pauses: as the root graph (with a default `nested`),
/// or as a subgraph of a node's task.
pub(crate) async fn run<S: State>(
    graph: &Graph<S>,
    input: Input<S>,
    config: &RunConfig,
    emitter: &Emitter<S>,
    nested: Nested,
) -> Result<Outcome<S>> {
    if let Input::Update(update) = &input {
        crate::state::check_input(&graph.template, update)?;
    }
    let mut run = Run::new(graph, config, emitter, nested)?;
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
    let work = async {
        let result = run.execute(input).await;
        // Exit durability (and a failed run) still leave the thread where the run stopped.
        let target = run.make_target();
        let finished = run
            .saves
            .finish(target.as_ref(), graph, &mut run.frame)
            .await;
        (result, finished)
    };
    let (result, finished) = LeaseGuard::hold(lease.as_ref(), work).await;
    if let Some(lease) = lease {
        lease.release().await;
    }
    let interrupts = result?;
    finished?;
    run.remember();
    // The caller sees the output channels only; the checkpoints hold them all.
    let values = run.frame.state;
    Ok(Outcome {
        values: values.output().map_or(values, Arc::new),
        interrupted: interrupts.is_some(),
        interrupts: interrupts.unwrap_or_default(),
    })
}

/// One run of the loop on one thread.
struct Run<'g, S: State> {
    graph: &'g Graph<S>,
    config: Arc<RunConfig>,
    emitter: &'g Emitter<S>,
    thread: Option<String>,
    ns: String,
    frame: Frame<S>,
    custom: Option<CustomSink>,
    messages: Option<MessageSink>,
    /// Why the frame's checkpoint was made.
    last_source: CheckpointSource,
    /// LangGraph's `writes` metadata of the frame's checkpoint (`None`: no such key).
    /// Shared with each [`Target`], which the loop makes several times a step.
    last_writes: Option<Arc<serde_json::Value>>,
    /// The resume command's answers, for the interrupted tasks.
    resume: Option<Resume>,
    /// When its writes and checkpoints are saved.
    saves: Saves,
    /// What a subgraph run inherits; default for a root run.
    nested: Nested,
    /// Whether the current step replays a past checkpoint (its subgraphs start over).
    replaying: bool,
    /// The last step the run may take under its recursion limit.
    stop: i64,
    /// Where the run saves, made once the run knows its namespace and kept up to date with
    /// each checkpoint's source and writes (the loop hands it to its saves several times a
    /// step).
    target: Option<Target>,
}

impl<'g, S: State> Run<'g, S> {
    fn new(
        graph: &'g Graph<S>,
        config: &RunConfig,
        emitter: &'g Emitter<S>,
        nested: Nested,
    ) -> Result<Self> {
        let thread = match &nested.saver {
            Some(_) => config.thread_id.clone(),
            None => graph.thread_of(config)?.map(str::to_owned),
        };
        let in_process = (nested.saver.as_ref())
            .or(graph.checkpointer.as_ref())
            .is_some_and(|saver| saver.in_process());
        let custom = emitter.custom_sink();
        let messages = emitter.message_sink();
        Ok(Run {
            graph,
            config: Arc::new(config.clone()),
            emitter,
            thread,
            ns: config.checkpoint_ns.clone(),
            frame: Frame::fresh(graph),
            custom,
            messages,
            last_source: CheckpointSource::Loop,
            last_writes: None,
            resume: None,
            saves: Saves::new(config.durability, in_process),
            nested,
            replaying: false,
            stop: i64::MAX,
            target: None,
        })
    }

    /// Keeps the state the run ended at, when it is the thread's stored latest checkpoint
    /// and has channels a load would otherwise rebuild from history.
    fn remember(&self) {
        let frame = &self.frame;
        let appending = self
            .graph
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
                .cache
                .put(thread, &self.ns, id.clone(), Arc::clone(&frame.state));
        }
    }

    /// The saver the run writes to (its parent's, in a subgraph) and its thread.
    fn saver(&self) -> Option<(&Arc<dyn CheckpointSaver>, &str)> {
        let saver = self
            .nested
            .saver
            .as_ref()
            .or(self.graph.checkpointer.as_ref());
        match (saver, &self.thread) {
            (Some(saver), Some(thread)) => Some((saver, thread.as_str())),
            _ => None,
        }
    }

    /// Where the run saves: `None` without a checkpointer.
    fn make_target(&self) -> Option<Target> {
        let (saver, thread) = self.saver()?;
        Some(Target {
            saver: Arc::clone(saver),
            thread: thread.to_owned(),
            ns: self.ns.clone(),
            parents: self.nested.parents.clone(),
            run_id: self.config.run_id.clone(),
            source: self.last_source,
            writes: self.last_writes.clone(),
        })
    }

    /// Runs the loop; `Some(interrupts)` when the run paused instead of finishing.
    async fn execute(&mut self, input: Input<S>) -> Result<Option<Vec<Interrupt>>> {
        if matches!(input, Input::Continue) {
            self.travel_into_subgraph().await?;
        }
        self.target = self.make_target();
        let replaying = self.config.checkpoint_id.is_some();
        if let Some((saver, thread)) = self.saver().filter(|_| !self.nested.start_over) {
            let config = self.config.checkpoint_config(thread);
            match saver.get_tuple(&config).await? {
                Some(tuple) => {
                    let saver = Arc::clone(saver);
                    self.frame = Frame::load(self.graph, &saver, tuple, true).await?;
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
        let unfinished = !step::prepare(self.graph, &self.frame, &self.ns).is_empty();
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
                    if let Some(resume) = self.nested.resume.take() {
                        self.resume = Some(resume);
                    }
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
                let by_id = self.save_command(command).await?;
                self.apply_null_writes()?;
                if by_id.is_some() {
                    self.resume = by_id;
                }
                skip_done = true;
            }
        }

        let mut steps = 0usize;
        loop {
            let tasks = step::prepare(self.graph, &self.frame, &self.ns);
            if tasks.is_empty() {
                return Ok(None);
            }
            if self.breakpoint(
                &tasks,
                &self.config.interrupt_before,
                &self.graph.interrupt_before,
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
            let left = self.config.recursion_limit - steps;
            self.stop = step.saturating_add(i64::try_from(left).unwrap_or(i64::MAX));
            let span = tracing::debug_span!("superstep", step, tasks = tasks.len());
            for task in &tasks {
                self.emitter.debug(|| self.task_event(task, step));
            }
            let (outputs, unsaved) = self
                .run_tasks(&tasks, skip_done)
                .instrument(span.clone())
                .await;
            let checkpoint_id = self.frame.checkpoint_id.as_deref().unwrap_or("");
            let held = !self.frame.pending.is_empty();
            self.saves
                .barrier(self.target.as_ref(), checkpoint_id, unsaved, held);
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
            let writes = durability::step_writes(&tasks, &outputs)?;
            let version = self.frame.next_version(self.graph)?;
            let shows_output = span
                .in_scope(|| step::apply(self.graph, &mut self.frame, &tasks, outputs, &version))?;
            self.checkpoint(CheckpointSource::Loop, step, Some(writes))
                .instrument(span)
                .await?;
            if shows_output {
                self.emitter.values(&self.frame.state);
            }
            if self.breakpoint(
                &tasks,
                &self.config.interrupt_after,
                &self.graph.interrupt_after,
            ) {
                self.emitter.interrupts(&[]);
                return Ok(Some(Vec::new()));
            }
        }
    }

    /// Brings the target's source and writes up to date with the frame's checkpoint.
    fn retarget(&mut self) {
        match &mut self.target {
            Some(target) => {
                target.source = self.last_source;
                target.writes = self.last_writes.clone();
            }
            None => self.target = self.make_target(),
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
        self.frame.legacy_ids = false;
        self.frame.pending.clear();
        self.frame.snapshot_all = true;
        self.last_source = CheckpointSource::Fork;
        self.last_writes = None;
        self.replaying = true;
        self.retarget();
        self.saves
            .checkpoint(self.target.as_ref(), self.graph, &mut self.frame)
            .await
    }

    /// Starts a new run with `update` as input: the input checkpoint.
    async fn start(&mut self, update: S::Update) -> Result<()> {
        // A new input drops the tasks an earlier run left unfinished; their saved writes
        // must then not count towards the appending channels' history.
        if !self.frame.pending.is_empty() {
            self.frame.snapshot_all = true;
        }
        let version = self.frame.next_version(self.graph)?;
        if !self.frame.triggered.is_empty() || !self.frame.sends.is_empty() {
            let stale = step::prepare(self.graph, &self.frame, &self.ns);
            let outputs = stale.iter().map(|_| TaskOutput::default()).collect();
            step::apply(self.graph, &mut self.frame, &stale, outputs, &version)?;
        }
        let writes = durability::update_json(Some(&update))?;
        self.frame.input = Some(update);
        self.frame.versions.insert(INPUT.to_owned(), version);
        self.frame.dirty.insert(INPUT.to_owned());
        let step = self.frame.step + 1;
        self.checkpoint(CheckpointSource::Input, step, Some(writes))
            .await
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

    /// Saves a command as writes of no task (so a crash before the step ends keeps them), as
    /// LangGraph does: its single resume value as `__resume__`, its update and routing, and
    /// queues them for this run. Answers by id are not stored (LangGraph stores none): they
    /// are returned, for this run's tasks.
    async fn save_command(&mut self, command: Command<S>) -> Result<Option<Resume>> {
        let graph = self.graph;
        let mut writes = Vec::new();
        let mut by_id = None;
        match &command.resume {
            Some(Resume::One(value)) => {
                let pending: usize = self.pending_interrupts()?.values().map(Vec::len).sum();
                if pending > 1 {
                    return Err(Error::InvalidUpdate(format!(
                        "{pending} interrupts are pending; resume them by id with Command::resume_by_id"
                    )));
                }
                writes.push(dump(&graph.serde, channels::RESUME, value)?);
            }
            Some(resume @ Resume::ById(_)) => by_id = Some(resume.clone()),
            None => {}
        }
        let routed = step::route(graph, &graph.start, &self.frame.state, None, command.goto)?;
        let output = TaskOutput {
            update: command.update,
            triggers: routed
                .triggers
                .into_iter()
                .filter(|i| !graph.start.edges.contains(i))
                .collect(),
            sends: routed.sends,
        };
        if output.update.is_some() || !output.triggers.is_empty() || !output.sends.is_empty() {
            writes.extend(step::encode_writes(graph, &self.frame.state, &output)?);
        }
        // Update writes of an earlier resume of this checkpoint were applied then: a new
        // command replaces them.
        self.frame
            .pending
            .retain(|w| w.task_id != channels::NULL_TASK_ID);
        if writes.is_empty() {
            return Ok(by_id);
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
        Ok(by_id)
    }

    /// Pending interrupts of the frame's checkpoint, by task id.
    fn pending_interrupts(&self) -> Result<BTreeMap<String, Vec<Interrupt>>> {
        self.frame.read_interrupts(self.graph)
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
                // The value of a `Command(resume=...)`, from either side.
                let value = self.open_write(write, &checkpoint_id, position)?;
                resume = Some(Resume::One(decode(
                    &self.graph.serde,
                    &value,
                    channels::RESUME,
                )?));
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
        let saved = step::decode_writes(self.graph, &self.frame.state, &rest, open_slot)?;
        self.resume = resume;
        if let SavedTask::Done(output) = saved {
            let version = self.frame.next_version(self.graph)?;
            step::apply(self.graph, &mut self.frame, &[], vec![output], &version)?;
        }
        Ok(())
    }

    /// Runs a step's tasks concurrently; each task's writes go to the run's saves as it
    /// finishes, and those not saved yet are returned, in task order. Tasks whose writes the
    /// checkpoint already holds are not run again (unless replaying). A failure wins over
    /// interrupts.
    async fn run_tasks(
        &self,
        tasks: &[Task<S>],
        skip_done: bool,
    ) -> (Result<StepEnd<S>>, Vec<TaskWrites>) {
        let graph = self.graph;
        let mut saved: HashMap<&str, Vec<&PendingWrite>> = HashMap::new();
        if skip_done {
            for write in &self.frame.pending {
                saved.entry(write.task_id.as_str()).or_default().push(write);
            }
        }
        let checkpoint_id = self.frame.checkpoint_id.as_deref().unwrap_or("");
        let target = self.target.as_ref();
        let interrupted = if self.resume.is_some() {
            match self.pending_interrupts() {
                Ok(interrupted) => interrupted,
                Err(err) => return (Err(err), Vec::new()),
            }
        } else {
            BTreeMap::new()
        };
        // A step's only task needs no separate save of its writes: the step's checkpoint is
        // the very next write and holds them, so a crash loses no more than it would between
        // the task's end and its `put_writes`. Failures and interrupts are always saved.
        let sole = tasks.len() == 1;
        let counted: std::sync::Mutex<BTreeMap<String, u64>> = Default::default();
        let delta_bytes = &counted;
        let saved = &saved;
        let futures = tasks.iter().map(|task| {
            let interrupted = &interrupted;
            let span = tracing::debug_span!(
                "node",
                node = %task.name,
                step = self.frame.step + 1,
                task_id = %task.id,
            );
            async move {
                let mut answered = Vec::new();
                if let Some(own) = saved.get(task.id.as_str()) {
                    // A write's slot is its position among its task's writes.
                    let open_slot =
                        |w: &PendingWrite, position| self.open_write(w, checkpoint_id, position);
                    match step::decode_writes(graph, &self.frame.state, own, open_slot)? {
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
                let scratch = Scratch::new(&task.ns, answered, fresh);
                // A panic in the node fails its task as an error would.
                let end = step::catch_panic(&task.name, self.run_task(task, Arc::clone(&scratch)))
                    .await
                    .unwrap_or_else(TaskEnd::Failed);
                let Some(target) = target.filter(|_| !matches!(end, TaskEnd::Parent(_))) else {
                    return Ok((end, None));
                };
                let serde = &graph.serde;
                let writes = match &end {
                    TaskEnd::Done(output) => {
                        // The step's checkpoint follows a sole task's writes in the same
                        // transaction and holds everything but the appended items, which it
                        // leaves to these: only they are encoded.
                        let writes = match sole {
                            true => step::encode_delta_writes(graph, &self.frame.state, output)?,
                            false => step::encode_writes(graph, &self.frame.state, output)?,
                        };
                        for (channel, value) in &writes {
                            if graph.is_delta(channel) {
                                let mut counted =
                                    delta_bytes.lock().unwrap_or_else(|p| p.into_inner());
                                *counted.entry(channel.clone()).or_default() +=
                                    value.bytes.len() as u64;
                            }
                        }
                        if sole {
                            if writes.is_empty() {
                                return Ok((end, None));
                            }
                            let writes = self.seal_writes(writes, checkpoint_id, &task.id)?;
                            return Ok((end, Some(task_writes(task, writes))));
                        }
                        writes
                    }
                    // As LangGraph: the answers the task consumed go with its error or its
                    // interrupt, so its next attempt gets them again.
                    TaskEnd::Failed(_) | TaskEnd::Interrupted(_) => {
                        let answered = scratch
                            .lock()
                            .map(|s| s.answered.clone())
                            .unwrap_or_default();
                        let mut writes = Vec::new();
                        if !answered.is_empty() {
                            writes.push(dump(serde, channels::RESUME, &answered)?);
                        }
                        match &end {
                            TaskEnd::Interrupted(interrupts) => {
                                writes.push(dump(serde, channels::INTERRUPT, interrupts)?);
                            }
                            TaskEnd::Failed(err) => {
                                writes.push(dump(serde, channels::ERROR, &err.to_string())?);
                            }
                            TaskEnd::Done(_) | TaskEnd::Parent(_) => {}
                        }
                        writes
                    }
                    TaskEnd::Parent(_) => Vec::new(),
                };
                // Under the task's own id and path: savers return a checkpoint's writes in
                // `(task_path, task_id, idx)` order, the order `apply` folds a step's tasks in,
                // so a delta history replays parallel appends as the step made them.
                let writes = self.seal_writes(writes, checkpoint_id, &task.id)?;
                let unsaved = self
                    .saves
                    .task_done(target, checkpoint_id, task_writes(task, writes))
                    .await?;
                Ok::<_, Error>((end, unsaved))
            }
            .instrument(span)
        });
        // A step's sole task runs right here: nothing to join, and its future (kilobytes)
        // is not moved into a list.
        let results = if sole {
            let mut futures = futures;
            match futures.next() {
                Some(only) => vec![only.await],
                None => Vec::new(),
            }
        } else {
            join_all(futures).await
        };
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
                        TaskEnd::Interrupted(raised) => interrupts.extend(raised),
                        // The subgraph stops; the caller's task gets the command.
                        TaskEnd::Parent(command) => {
                            failure.get_or_insert(Error::Node {
                                node: command.node.clone(),
                                source: Box::new(command),
                            });
                        }
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
                counted.into_inner().unwrap_or_else(|p| p.into_inner()),
            )),
        };
        (end, unsaved)
    }

    /// Calls one task's node and routes its result.
    async fn run_task(&self, task: &Task<S>, scratch: SharedScratch) -> TaskEnd<S> {
        let graph = self.graph;
        let Some(index) = task.node else {
            // The start task writes the input and follows START's edges.
            return match step::route(
                graph,
                &graph.start,
                &self.frame.state,
                self.frame.input.as_ref(),
                Vec::new(),
            ) {
                Ok(output) => TaskEnd::Done(output),
                Err(err) => TaskEnd::Failed(err),
            };
        };
        let node = &graph.nodes[index];
        let Some(func) = &node.func else {
            return TaskEnd::Done(TaskOutput::default());
        };
        let ctx = Context {
            config: Arc::clone(&self.config),
            store: graph.store.clone(),
            custom: self.custom.clone(),
            messages: self.messages.clone(),
            node: Arc::from(node.name.as_str()),
            step: self.frame.step + 1,
            stop: self.stop,
            scratch: Some(Arc::clone(&scratch)),
            call: Some(Arc::new(CallSite {
                saver: self.saver().map(|(saver, _)| Arc::clone(saver)),
                task_ns: task.ns.clone(),
                calls: Default::default(),
                parents: {
                    let mut parents = self.nested.parents.clone();
                    if let Some(id) = &self.frame.checkpoint_id {
                        parents.insert(self.ns.clone(), id.clone());
                    }
                    parents
                },
                checkpoint_map: Arc::clone(&self.nested.checkpoint_map),
                replaying: self.replaying,
                stream: self.emitter.subgraph_stream(),
            })),
        };
        let input = task
            .input
            .clone()
            .unwrap_or_else(|| Arc::clone(&self.frame.state));
        let before = Arc::clone(&input);
        let command = match crate::context::scope(ctx.clone(), func(input, ctx)).await {
            Ok(command) => {
                if let Some(update) = &command.update {
                    let metadata = MessageMetadata {
                        node: node.name.clone(),
                        step: self.frame.step + 1,
                        namespace: self.ns.clone(),
                        checkpoint_ns: task.ns.clone(),
                        id: None,
                    };
                    self.emitter.whole_messages(&before, update, &metadata);
                }
                command
            }
            Err(source) => {
                return match crate::context::bubbled(source).downcast::<Interrupt>() {
                    Ok(interrupt) => {
                        // A subgraph's pause carries all of its interrupts.
                        let bubbled = scratch
                            .lock()
                            .map(|mut s| std::mem::take(&mut s.bubbled))
                            .unwrap_or_default();
                        if bubbled.contains(&interrupt) {
                            TaskEnd::Interrupted(bubbled)
                        } else {
                            TaskEnd::Interrupted(vec![*interrupt])
                        }
                    }
                    Err(source) => match source.downcast::<ParentCommand>() {
                        // A subgraph this node ran sent a command up to this graph.
                        Ok(command) => self.command_from_subgraph(node, *command),
                        Err(source) => TaskEnd::Failed(Error::Node {
                            node: node.name.clone(),
                            source,
                        }),
                    },
                };
            }
        };
        if command.graph == CommandGraph::Parent {
            return self.command_to_parent(node, command);
        }
        match step::route_update(
            self.graph,
            node,
            &self.frame.state,
            command.update,
            command.goto,
        ) {
            Ok(output) => TaskEnd::Done(output),
            Err(err) => TaskEnd::Failed(err),
        }
    }

    /// A node's command for the parent graph, to hand up; an error in a root graph or when
    /// it sends (only node names go up).
    fn command_to_parent(&self, node: &Node<S>, command: Command<S>) -> TaskEnd<S> {
        if self.ns.is_empty() {
            return TaskEnd::Failed(Error::InvalidUpdate(format!(
                "node `{}` returned a Command for the parent graph, but its graph was not \
                 called as a subgraph: it has no parent",
                node.name
            )));
        }
        let mut goto = Vec::with_capacity(command.goto.len());
        for target in command.goto {
            match target {
                Goto::Node(name) => goto.push(name),
                Goto::Send(send) => {
                    return TaskEnd::Failed(Error::InvalidUpdate(format!(
                        "node `{}` sent to `{}` in a Command for the parent graph; only node \
                         names can go to the parent",
                        node.name, send.node
                    )));
                }
            }
        }
        let update = match command
            .update
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
        {
            Ok(update) => update,
            Err(err) => {
                return TaskEnd::Failed(Error::InvalidUpdate(format!(
                    "node `{}` returned a Command for the parent graph whose update has no \
                     JSON form: {err}",
                    node.name
                )));
            }
        };
        TaskEnd::Parent(ParentCommand {
            node: node.name.clone(),
            update,
            goto,
        })
    }

    /// Applies a command a subgraph sent up as the update and routing of `node`, the node
    /// that ran the subgraph (LangGraph's handling of `ParentCommand`).
    fn command_from_subgraph(&self, node: &Node<S>, command: ParentCommand) -> TaskEnd<S> {
        let update = match command.update.map(serde_json::from_value::<S::Update>) {
            None => None,
            Some(Ok(update)) => Some(update),
            Some(Err(err)) => {
                return TaskEnd::Failed(Error::InvalidUpdate(format!(
                    "node `{}` of the subgraph run by `{}` sent the parent graph an update \
                     that does not fit its state: {err}",
                    command.node, node.name
                )));
            }
        };
        let goto = command.goto.into_iter().map(Goto::Node).collect();
        match step::route_update(self.graph, node, &self.frame.state, update, goto) {
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
        open(&self.graph.serde, &write.value, &slot, &write.channel)
    }

    fn seal_writes(
        &self,
        writes: Vec<(String, SerializedValue)>,
        checkpoint_id: &str,
        task_id: &str,
    ) -> Result<Vec<(String, SerializedValue)>> {
        let serde = &self.graph.serde;
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

    /// Makes the frame a new checkpoint, saved as the run's durability says; `writes` is its
    /// LangGraph `writes` metadata.
    async fn checkpoint(
        &mut self,
        source: CheckpointSource,
        step: i64,
        writes: Option<serde_json::Value>,
    ) -> Result<()> {
        self.frame.step = step;
        self.frame.checkpoint_id = Some(waypoint_checkpoint::checkpoint_id(step));
        self.frame.task_base = None;
        self.frame.legacy_ids = false;
        self.replaying = false;
        self.frame.pending.clear();
        self.resume = None;
        self.last_source = source;
        self.last_writes = writes.map(Arc::new);
        self.retarget();
        self.saves
            .checkpoint(self.target.as_ref(), self.graph, &mut self.frame)
            .await?;
        self.emitter.debug(|| self.checkpoint_event());
        Ok(())
    }

    /// The debug event of a task about to run, with LangGraph's payload: its id, name,
    /// input (the run's input for the start task) and triggers.
    fn task_event(&self, task: &Task<S>, step: i64) -> serde_json::Value {
        let (input, trigger) = match (&task.kind, task.node) {
            (step::TaskKind::Push(_), _) => {
                (serde_json::to_value(task.input.as_deref()), step::PUSH)
            }
            (step::TaskKind::Pull, None) => (serde_json::to_value(&self.frame.input), START),
            (step::TaskKind::Pull, Some(index)) => (
                serde_json::to_value(&*self.frame.state),
                self.graph.nodes[index].trigger.as_str(),
            ),
        };
        serde_json::json!({"type": "task", "step": step, "payload": {
            "id": task.id, "name": task.name, "input": input.unwrap_or_default(),
            "triggers": [trigger]}})
    }

    /// The debug event of the frame's checkpoint.
    fn checkpoint_event(&self) -> serde_json::Value {
        let next: Vec<String> = step::prepare(self.graph, &self.frame, &self.ns)
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
}

/// A task's `writes`, to save under its id and path.
fn task_writes<S: State>(task: &Task<S>, writes: Vec<(String, SerializedValue)>) -> TaskWrites {
    TaskWrites {
        task_id: task.id.clone(),
        task_path: task.path.clone(),
        writes,
    }
}
