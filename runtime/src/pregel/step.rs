//! One super-step's algorithm: which tasks a frame calls for (and their LangGraph ids, paths
//! and namespaces), where a node's output routes the graph, the writes a task output stands
//! for and what saved writes say, and folding a step's outputs into the frame.
//!
//! Task ids are derived as LangGraph derives them (see [`task_id`]): from the checkpoint they
//! start from, the graph's namespace, the step, the node and the trigger (or the index of the
//! pending `Send`), so a resumed run finds the writes its finished tasks saved with
//! `put_writes` and does not run them again, whichever of Waypoint and Python LangGraph wrote
//! them. A task runs its subgraphs in the namespace `{graph ns}|{node}:{task id}`, LangGraph's.
//!
//! A step folds its tasks' writes in LangGraph's order, by task path: triggered nodes by name,
//! then pending sends by index.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use futures::FutureExt;
use serde_json::Value;
use waypoint_checkpoint::{ChannelVersion, PendingWrite, SerializedValue, channels};

use crate::command::Goto;
use crate::error::{Error, Result, panic_message};
use crate::pregel::codec::{NO_WRITES, SendPacket, SendRef, decode, is_control, null_value};
use crate::pregel::frame::Frame;
use crate::pregel::graph::{BRANCH_PREFIX, END, Graph, INPUT, Node, START};
use crate::state::State;

/// The first part of a triggered task's path, and of the hash its id is.
pub(crate) const PULL: &str = "__pregel_pull";
/// The first part of a pending send's task path, and of the hash its id is.
pub(crate) const PUSH: &str = "__pregel_push";
pub(crate) use crate::names::NS_SEP;
/// LangGraph's separator of a node and its task id in a namespace level.
const NS_END: &str = ":";

/// What a step's saved writes say about one of its tasks.
pub(crate) enum SavedTask<S: State> {
    /// It finished: its output.
    Done(TaskOutput<S>),
    /// It failed or paused: run it again, with the resume values it already consumed.
    Unfinished { answered: Vec<Value> },
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
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    let mut bytes = Vec::with_capacity(checkpoint_id.len() / 2);
    let mut high = None;
    for b in checkpoint_id.bytes().filter(|&b| b != b'-') {
        let Some(d) = digit(b) else {
            return checkpoint_id.as_bytes().to_vec();
        };
        match high.take() {
            None => high = Some(d),
            Some(h) => bytes.push(h << 4 | d),
        }
    }
    if high.is_some() {
        return checkpoint_id.as_bytes().to_vec();
    }
    bytes
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
    let mut step_digits = Digits::default();
    let step = step_digits.of(step);
    let mut index_digits = Digits::default();
    let (marker, last) = match kind {
        TaskKind::Pull => (PULL, trigger),
        TaskKind::Push(i) => (PUSH, index_digits.of(*i as i64)),
    };
    // The scoped name `{ns}|{name}` (`name` in the root graph) comes first.
    let scope: [&str; 2] = if ns.is_empty() {
        ["", ""]
    } else {
        [ns, NS_SEP]
    };
    let parts = [scope[0], scope[1], name, step, name, marker, last];
    let digest: [u8; 16] = if legacy {
        let mut sha = sha1_smol::Sha1::new();
        sha.update(checkpoint);
        for part in parts {
            sha.update(part.as_bytes());
        }
        let full = sha.digest().bytes();
        let mut first = [0u8; 16];
        first.copy_from_slice(&full[..16]);
        first
    } else {
        let mut xxh3 = xxhash_rust::xxh3::Xxh3::new();
        xxh3.update(checkpoint);
        for part in parts {
            xxh3.update(part.as_bytes());
        }
        xxh3.digest128().to_be_bytes()
    };
    uuid_text(&digest)
}

/// The decimal digits of an integer, written on the stack.
#[derive(Default)]
struct Digits {
    buf: [u8; 20],
}

impl Digits {
    /// `n` in decimal, as `to_string` writes it.
    fn of(&mut self, n: i64) -> &str {
        let mut rest = n.unsigned_abs();
        let mut at = self.buf.len();
        loop {
            at -= 1;
            self.buf[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        if n < 0 {
            at -= 1;
            self.buf[at] = b'-';
        }
        std::str::from_utf8(&self.buf[at..]).unwrap_or("")
    }
}

/// 16 bytes in a uuid's text form (`8-4-4-4-12` lowercase hex digits).
fn uuid_text(bytes: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
    out
}

/// A task's path as LangGraph writes it (`task_path_str`): `~__pregel_pull, {name}` for a
/// triggered node, `~__pregel_push, {index:010}, 0000000000` for a pending send.
pub(crate) fn task_path(name: &str, kind: &TaskKind) -> String {
    match kind {
        TaskKind::Pull => concat(&["~", PULL, ", ", name]),
        TaskKind::Push(i) => format!("~{PUSH}, {i:010}, {:010}", 0),
    }
}

/// `parts` joined into one string, allocated once.
fn concat(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    out
}

/// A task's own checkpoint namespace: `{graph ns}|{name}:{task id}` (`{name}:{task id}` in
/// the root graph), where its subgraphs checkpoint and which its interrupt ids hash.
pub(crate) fn task_ns(ns: &str, name: &str, task_id: &str) -> String {
    if ns.is_empty() {
        concat(&[name, NS_END, task_id])
    } else {
        concat(&[ns, NS_SEP, name, NS_END, task_id])
    }
}

/// The tasks the frame's triggers and sends call for, in a fixed order: the start task,
/// sends (in the order written), then triggered nodes in the order they were added.
pub(crate) fn prepare<S: State>(graph: &Graph<S>, frame: &Frame<S>, ns: &str) -> Vec<Task<S>> {
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
        let Some(&index) = graph.index.get(node) else {
            continue;
        };
        let input = Some(Arc::new(arg.clone()));
        tasks.push(ids.task(Some(index), node, TaskKind::Push(i), channels::TASKS, input));
    }
    for &index in &frame.triggered {
        let node = &graph.nodes[index];
        tasks.push(ids.task(Some(index), &node.name, TaskKind::Pull, &node.trigger, None));
    }
    tasks
}

/// Where a node's output sends the graph: static edges, routers (on the state with the
/// update applied) and the command's own `goto`s.
pub(crate) fn route<S: State>(
    graph: &Graph<S>,
    node: &Node<S>,
    state: &S,
    update: Option<&S::Update>,
    gotos: Vec<Goto<S>>,
) -> Result<TaskOutput<S>> {
    route_update(graph, node, state, update.cloned(), gotos)
}

/// [`route`] of an update the caller gives up (the output takes it without a copy).
pub(crate) fn route_update<S: State>(
    graph: &Graph<S>,
    node: &Node<S>,
    state: &S,
    update: Option<S::Update>,
    gotos: Vec<Goto<S>>,
) -> Result<TaskOutput<S>> {
    let mut out = TaskOutput {
        update: None,
        triggers: node.edges.clone(),
        sends: Vec::new(),
    };
    let mut all = gotos;
    if !node.branches.is_empty() {
        let routed_state;
        let view = match &update {
            Some(update) => {
                let mut next = state.clone();
                fold(&mut next, update.clone(), Some(&node.name))?;
                routed_state = next;
                &routed_state
            }
            None => state,
        };
        for branch in &node.branches {
            let gotos = catch_unwind(AssertUnwindSafe(|| (branch.router)(view)))
                .map_err(|payload| panicked(&node.name, payload, Some(IN_ROUTER)))?;
            for goto in gotos {
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
            Goto::Node(name) => match graph.index.get(&name) {
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
                if !graph.index.contains_key(&send.node) {
                    return Err(Error::InvalidUpdate(format!(
                        "`{}` sent to `{}`, which is not a node of this graph",
                        node.name, send.node
                    )));
                }
                out.sends.push((send.node, send.arg));
            }
        }
    }
    out.update = update;
    Ok(out)
}

/// The writes a task output stands for, as stored by `put_writes`.
pub(crate) fn encode_writes<S: State>(
    graph: &Graph<S>,
    state: &S,
    output: &TaskOutput<S>,
) -> Result<Vec<(String, SerializedValue)>> {
    let mut writes = update_writes(graph, state, output, |_| true)?;
    for &i in &output.triggers {
        writes.push((graph.nodes[i].trigger.clone(), null_value()));
    }
    for (node, arg) in &output.sends {
        writes.push((
            channels::TASKS.to_owned(),
            graph
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

/// The writes of a task output to appending channels alone (see [`encode_writes`]).
pub(crate) fn encode_delta_writes<S: State>(
    graph: &Graph<S>,
    state: &S,
    output: &TaskOutput<S>,
) -> Result<Vec<(String, SerializedValue)>> {
    update_writes(graph, state, output, |channel| graph.is_delta(channel))
}

/// The writes of a task output's update to the channels `keep` keeps.
fn update_writes<S: State>(
    graph: &Graph<S>,
    state: &S,
    output: &TaskOutput<S>,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<(String, SerializedValue)>> {
    let mut writes = Vec::new();
    if let Some(update) = &output.update {
        for (i, value) in state.dump_update(update, &graph.serde)? {
            let channel = &graph.channel_names[i];
            if keep(channel) {
                writes.push((channel.clone(), value));
            }
        }
    }
    Ok(writes)
}

/// What a task's saved writes say: finished (with its output), or to be run again
/// (it failed or was interrupted) with the resume values it already consumed.
pub(crate) fn decode_writes<S: State>(
    graph: &Graph<S>,
    state: &S,
    writes: &[&PendingWrite],
    open_slot: impl Fn(&PendingWrite, usize) -> Result<SerializedValue>,
) -> Result<SavedTask<S>> {
    let mut out = TaskOutput::default();
    let mut update = S::Update::default();
    let (mut has_update, mut finished, mut answered) = (false, false, Vec::new());
    for (position, write) in writes.iter().enumerate() {
        let channel = write.channel.as_str();
        if channel == channels::RESUME {
            let value: Value = decode(&graph.serde, &open_slot(write, position)?, channel)?;
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
            state.load_write(&mut update, i, &value, &graph.serde)?;
            has_update = true;
        } else if let Some(node) = channel.strip_prefix(BRANCH_PREFIX) {
            if let Some(&i) = graph.index.get(node) {
                out.triggers.push(i);
            }
        } else if channel == channels::TASKS {
            let value = open_slot(write, position)?;
            let SendPacket(node, arg) = decode(&graph.serde, &value, channel)?;
            out.sends.push((node, arg));
        }
    }
    if !finished {
        return Ok(SavedTask::Unfinished { answered });
    }
    out.update = has_update.then_some(update);
    Ok(SavedTask::Done(out))
}

/// Folds the step's outputs into the frame, in task order; the channels whose version
/// changed join the frame's `dirty` ones. Returns whether the state's output changed (see
/// [`crate::state::shows_output`]).
pub(crate) fn apply<S: State>(
    graph: &Graph<S>,
    frame: &mut Frame<S>,
    tasks: &[Task<S>],
    outputs: Vec<TaskOutput<S>>,
    version: &ChannelVersion,
) -> Result<bool> {
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

    // The writes fold first, in LangGraph's order: by task path. A failed run drops its
    // frame, unless it holds changes still to be saved (exit durability saves them as the
    // frame is): then a reducer that fails or panics must leave the frame as the step found
    // it, so the state before the fold is kept until the fold is done.
    let mut outputs: Vec<(usize, TaskOutput<S>)> = outputs.into_iter().enumerate().collect();
    // Each output is its task's when there is one per task.
    let named = tasks.len() == outputs.len();
    if named {
        outputs.sort_by(|(a, _), (b, _)| tasks[*a].path.cmp(&tasks[*b].path));
    }
    let before = (!frame.dirty.is_empty()).then(|| Arc::clone(&frame.state));
    let mut written = BTreeSet::new();
    for (index, output) in &mut outputs {
        if let Some(update) = output.update.take() {
            for i in frame.state.written(&update) {
                written.insert(graph.channel_names[i].clone());
            }
            let node = named.then(|| tasks[*index].name.as_str());
            if let Err(err) = fold(Arc::make_mut(&mut frame.state), update, node) {
                if let Some(before) = before {
                    frame.state = before;
                }
                return Err(err);
            }
        }
    }
    let mut changed = BTreeSet::new();
    // Consume what the tasks read: the input, their triggers, the sends.
    for task in tasks {
        let trigger = match (task.node, &task.kind) {
            (None, _) => INPUT,
            (Some(i), TaskKind::Pull) => graph.nodes[i].trigger.as_str(),
            (Some(_), TaskKind::Push(_)) => channels::TASKS,
        };
        if let Some(seen_version) = frame.versions.get(trigger) {
            let seen_version = seen_version.clone();
            match frame.seen.get_mut(&task.name) {
                Some(seen) => set(seen, trigger, seen_version),
                None => {
                    let seen = BTreeMap::from([(trigger.to_owned(), seen_version)]);
                    frame.seen.insert(task.name.clone(), seen);
                }
            }
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
    // Then what the tasks wrote: the channels, the triggers and sends, in task order.
    changed.extend(written);
    for (_, output) in outputs {
        for i in output.triggers {
            frame.triggered.insert(i);
            changed.insert(graph.nodes[i].trigger.clone());
        }
        if !output.sends.is_empty() {
            frame.sends.extend(output.sends);
            changed.insert(channels::TASKS.to_owned());
        }
    }
    for name in &changed {
        set(&mut frame.versions, name, version.clone());
    }
    let shows_output = crate::state::shows_output(&*frame.state, &changed);
    // Moved, not copied, when nothing was dirty (every step but those of exit durability).
    frame.dirty.append(&mut changed);
    Ok(shows_output)
}

/// Sets `key` to `value`, copying the key only when the map does not hold it yet.
fn set<V>(map: &mut BTreeMap<String, V>, key: &str, value: V) {
    match map.get_mut(key) {
        Some(old) => *old = value,
        None => {
            map.insert(key.to_owned(), value);
        }
    }
}

/// Where a panic outside a node's function happened, for its error.
const IN_ROUTER: &str = "in a router of its conditional edges";
/// Where a panic in a reducer happened, for its error.
const IN_REDUCER: &str = "in a reducer folding its update";

/// The error for a panic caught in `node`'s code (`place` says where, outside its function).
fn panicked(node: &str, payload: Box<dyn std::any::Any + Send>, place: Option<&str>) -> Error {
    let message = panic_message(payload);
    Error::Panicked {
        node: node.to_owned(),
        message: match place {
            Some(place) => format!("{message} ({place})"),
            None => message,
        },
    }
}

/// Awaits a task's work (its node's function and routing); a panic in it is caught and
/// becomes [`Error::Panicked`] naming `node`, so it fails the run as an error would instead
/// of unwinding through the runtime.
pub(crate) async fn catch_panic<T>(node: &str, work: impl Future<Output = T>) -> Result<T> {
    AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .map_err(|payload| panicked(node, payload, None))
}

/// Folds `update` into `state`; a panicking reducer is an error naming `node`, the task the
/// update came from (an invalid update for an update of no task).
fn fold<S: State>(state: &mut S, update: S::Update, node: Option<&str>) -> Result<()> {
    match catch_unwind(AssertUnwindSafe(|| state.apply(update))) {
        Ok(folded) => folded,
        Err(payload) => Err(match node {
            Some(node) => panicked(node, payload, Some(IN_REDUCER)),
            None => Error::InvalidUpdate(format!(
                "a reducer panicked folding the update: {}",
                panic_message(payload)
            )),
        }),
    }
}
