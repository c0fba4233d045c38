//! The frame: a thread's channels at one checkpoint, decoded, as a run changes them; loading
//! it from a checkpoint tuple (rebuilding appending channels from their history), reading
//! its pending interrupts, and building the checkpoint it becomes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;
use waypoint_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointSaver, CheckpointSource,
    CheckpointTuple, DeltaChannelHistory, PendingWrite, SerializedValue, Slot, TupleWithHistory,
    channels, metadata,
};

use crate::delta::DeltaCounter;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::state::State;

use super::codec::{
    SendPacket, SendRef, channel_slot, decode, is_control, null_value, open, seal_channel,
};
use super::graph::{BRANCH_PREFIX, Graph, INPUT, START};

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

impl<S: State> Frame<S> {
    /// A frame with no checkpoint: the template state.
    pub(crate) fn fresh(graph: &Graph<S>) -> Self {
        Frame {
            state: Arc::new(graph.template.clone()),
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

    /// Decodes a stored checkpoint into a frame; its appending channels the checkpoint did
    /// not store are left `missing`.
    pub(crate) fn decode(graph: &Graph<S>, tuple: CheckpointTuple) -> Result<Self> {
        let CheckpointTuple {
            config,
            checkpoint,
            metadata,
            pending_writes,
            ..
        } = tuple;
        let mut frame = Frame::fresh(graph);
        let thread = config.thread_id.as_str();
        let ns = config.checkpoint_ns.as_deref().unwrap_or("");
        for (name, stored) in &checkpoint.channel_values {
            let slot = channel_slot(thread, ns, name, &checkpoint.channel_versions);
            if let Some(i) = frame.state.channel_index(name) {
                let value = open(&graph.serde, stored, &slot, name)?;
                Arc::make_mut(&mut frame.state).load_channel(i, &value, &graph.serde)?;
            } else if name == INPUT {
                let value = open(&graph.serde, stored, &slot, name)?;
                frame.input = Some(decode(&graph.serde, &value, name)?);
            } else if let Some(node) = name.strip_prefix(BRANCH_PREFIX) {
                if let Some(&i) = graph.index.get(node) {
                    frame.triggered.insert(i);
                }
            } else if name == channels::TASKS {
                let value = open(&graph.serde, stored, &slot, name)?;
                let sends: Vec<SendPacket<S>> = decode(&graph.serde, &value, name)?;
                frame.sends = sends.into_iter().map(|p| (p.0, p.1)).collect();
            }
        }
        frame.missing = graph
            .channel_names
            .iter()
            .filter(|name| {
                graph.is_delta(name)
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
        graph: &Graph<S>,
        saver: &Arc<dyn CheckpointSaver>,
        tuple: CheckpointTuple,
        take: bool,
    ) -> Result<Self> {
        let config = tuple.config.clone();
        let mut frame = Frame::decode(graph, tuple)?;
        if frame.missing.is_empty() {
            return Ok(frame);
        }
        let cached = match (&frame.thread, &frame.checkpoint_id) {
            (Some(thread), Some(id)) => graph.cache.lookup(thread, &frame.ns, id, take),
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
                frame.rebuild(graph, history)?;
            }
        }
        Ok(frame)
    }

    /// Decodes a stored checkpoint read with the histories of its appending channels
    /// ([`CheckpointSaver::get_tuple_with_history`] over [`Self::appending`]).
    pub(crate) fn with_history(
        graph: &Graph<S>,
        (tuple, history): TupleWithHistory,
    ) -> Result<Self> {
        let mut frame = Frame::decode(graph, tuple)?;
        frame.rebuild(graph, history)?;
        Ok(frame)
    }

    /// The channels of `graph` a checkpoint may store as their history.
    pub(crate) fn appending(graph: &Graph<S>) -> Vec<String> {
        graph
            .channel_names
            .iter()
            .filter(|name| graph.is_delta(name))
            .cloned()
            .collect()
    }

    /// Rebuilds the missing appending channels from their `history`.
    fn rebuild(
        &mut self,
        graph: &Graph<S>,
        history: BTreeMap<String, DeltaChannelHistory>,
    ) -> Result<()> {
        for (channel, history) in history {
            let (seed, writes) = (history.seed.as_ref(), &history.writes);
            replay(
                graph,
                Arc::make_mut(&mut self.state),
                &channel,
                seed,
                writes,
            )?;
        }
        self.missing.clear();
        Ok(())
    }

    /// The next version for a step's changes: one past the greatest version in the frame.
    pub(crate) fn next_version(&self, graph: &Graph<S>) -> Result<ChannelVersion> {
        // Every change of a step takes one version, so the newest is the one with the
        // greatest counter; comparing counters alone avoids re-parsing on each comparison.
        let max = self
            .versions
            .values()
            .max_by_key(|v| v.counter().unwrap_or(0));
        Ok(match &graph.checkpointer {
            Some(saver) => saver.next_version(max)?,
            None => ChannelVersion::next(max)?,
        })
    }

    /// The checkpoint of the frame with the `changed` channels' values, and their versions.
    ///
    /// An appending channel stores its value only when a snapshot is due, or for every such
    /// channel (with a new version, so the value gets its own blob) when `snapshot_all`;
    /// otherwise its step writes stand for it. Updates the frame's delta counters.
    pub(crate) fn build_checkpoint(
        &mut self,
        graph: &Graph<S>,
        mut changed: BTreeSet<String>,
        snapshot_all: bool,
        thread: &str,
        ns: &str,
    ) -> Result<(Checkpoint, ChannelVersions)> {
        // Appending channels, walked without collecting them (a step's checkpoint is built
        // often enough for each allocation to count).
        let appending = || graph.channel_names.iter().filter(|c| graph.is_delta(c));
        if snapshot_all {
            let stored: Vec<&String> = appending()
                .filter(|c| self.versions.contains_key(*c))
                .collect();
            if !stored.is_empty() {
                let version = self.next_version(graph)?;
                for channel in stored {
                    self.versions.insert(channel.clone(), version.clone());
                    changed.insert(channel.clone());
                }
            }
        }
        // A changed appending channel leaves its value to its step writes unless a snapshot
        // is due (a channel without a counter yet counts from zero).
        let omit = |channel: &str| {
            !snapshot_all
                && graph.is_delta(channel)
                && !self
                    .delta
                    .get(channel)
                    .copied()
                    .unwrap_or_default()
                    .due(&graph.delta)
        };
        let values = self.values(graph, &changed, omit, thread, ns)?;
        for channel in appending().filter(|c| changed.contains(*c)) {
            let counter = match self.delta.get_mut(channel) {
                Some(counter) => counter,
                None => self.delta.entry(channel.clone()).or_default(),
            };
            if snapshot_all || counter.due(&graph.delta) {
                let size = values.get(channel).map_or(0, |v| v.bytes.len() as u64);
                counter.snapshot(size);
            }
        }
        self.delta.retain(|c, _| graph.is_delta(c));
        // Inserted in order: collecting would buffer and sort the few entries first.
        let mut new_versions = ChannelVersions::new();
        for channel in &changed {
            if let Some(version) = self.versions.get(channel) {
                new_versions.insert(channel.clone(), version.clone());
            }
        }
        // The frame's id when it has one: `Checkpoint::new` would make one only to drop it.
        let id = match &self.checkpoint_id {
            Some(id) => id.clone(),
            None => waypoint_checkpoint::checkpoint_id(self.step),
        };
        let checkpoint = Checkpoint {
            v: waypoint_checkpoint::CHECKPOINT_VERSION,
            id,
            ts: waypoint_checkpoint::now_rfc3339(),
            channel_values: values,
            channel_versions: self.versions.clone(),
            versions_seen: self.seen.clone(),
            updated_channels: Some(changed.into_iter().collect()),
        };
        Ok((checkpoint, new_versions))
    }

    /// Encodes the frame's `channels_to_write` (those with a value) for a checkpoint.
    fn values(
        &self,
        graph: &Graph<S>,
        channels_to_write: &BTreeSet<String>,
        omit: impl Fn(&str) -> bool,
        thread: &str,
        ns: &str,
    ) -> Result<BTreeMap<String, SerializedValue>> {
        let mut values = BTreeMap::new();
        for name in channels_to_write {
            let value = if omit(name) {
                None
            } else if let Some(i) = self.state.channel_index(name) {
                self.state.dump_channel(i, &graph.serde)?
            } else if name == INPUT {
                match &self.input {
                    Some(input) => Some(
                        graph
                            .serde
                            .dumps(input)
                            .map_err(|e| crate::state::channel_error(name, e))?,
                    ),
                    None => None,
                }
            } else if let Some(node) = name.strip_prefix(BRANCH_PREFIX) {
                graph
                    .index
                    .get(node)
                    .filter(|i| self.triggered.contains(i))
                    .map(|_| null_value())
            } else if name == channels::TASKS && !self.sends.is_empty() {
                let sends: Vec<SendRef<'_, S>> =
                    self.sends.iter().map(|(n, a)| SendRef(n, a)).collect();
                Some(
                    graph
                        .serde
                        .dumps(&sends)
                        .map_err(|e| crate::state::channel_error(name, e))?,
                )
            } else {
                None
            };
            if let Some(value) = value {
                let value = seal_channel(&graph.serde, value, (thread, ns, name), &self.versions)?;
                values.insert(name.clone(), value);
            }
        }
        Ok(values)
    }

    /// The `__interrupt__` writes of the frame's checkpoint that are pending, as LangGraph
    /// reads them: those of tasks that have not finished (a task with an output write has).
    fn interrupt_writes(&self) -> Vec<&PendingWrite> {
        let finished: BTreeSet<&str> = self
            .pending
            .iter()
            .filter(|w| w.task_id != channels::NULL_TASK_ID && !is_control(&w.channel))
            .map(|w| w.task_id.as_str())
            .collect();
        self.pending
            .iter()
            .filter(|w| {
                w.channel == channels::INTERRUPT
                    && w.task_id != channels::NULL_TASK_ID
                    && !finished.contains(w.task_id.as_str())
            })
            .collect()
    }

    /// The interrupts pending on the frame's checkpoint, by task id (see
    /// [`Self::interrupt_writes`]). An interrupt write that cannot be read is an error naming
    /// its task.
    pub(crate) fn read_interrupts(
        &self,
        graph: &Graph<S>,
    ) -> Result<BTreeMap<String, Vec<Interrupt>>> {
        let mut out: BTreeMap<String, Vec<Interrupt>> = BTreeMap::new();
        for write in self.interrupt_writes() {
            let interrupts = self.read_interrupt_write(graph, write).map_err(|e| {
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
    pub(crate) fn pending_interrupts(&self, graph: &Graph<S>) -> BTreeMap<String, Vec<Interrupt>> {
        let mut out: BTreeMap<String, Vec<Interrupt>> = BTreeMap::new();
        for write in self.interrupt_writes() {
            let interrupts = self.read_interrupt_write(graph, write).unwrap_or_else(|e| {
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
        graph: &Graph<S>,
        write: &PendingWrite,
    ) -> Result<Vec<Interrupt>> {
        // Interrupt values are sealed like any write.
        let value = match (&self.thread, &self.checkpoint_id) {
            (Some(thread), Some(checkpoint_id)) => open(
                &graph.serde,
                &write.value,
                &Slot::Write {
                    thread_id: thread,
                    checkpoint_ns: &self.ns,
                    checkpoint_id,
                    task_id: &write.task_id,
                    channel: &write.channel,
                    idx: channels::write_index(&write.channel, 0),
                },
                &write.channel,
            )?,
            _ => write.value.clone(),
        };
        let raw: Value = decode(&graph.serde, &value, &write.channel)?;
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

    /// The node whose writes the state saw last, for `update_state` without `as_node`.
    pub(crate) fn last_writer(&self, graph: &Graph<S>) -> Result<String> {
        let mut best: Option<(&ChannelVersion, Vec<&str>)> = None;
        for (node, seen) in &self.seen {
            if node != START && !graph.index.contains_key(node) {
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
}

/// Sets an appending channel to `seed` (its stored value; empty when `None`) followed by
/// `writes`, folded through its reducer.
fn replay<S: State>(
    graph: &Graph<S>,
    state: &mut S,
    channel: &str,
    seed: Option<&SerializedValue>,
    writes: &[PendingWrite],
) -> Result<()> {
    let serde = &graph.serde;
    let Some(i) = state.channel_index(channel) else {
        return Ok(());
    };
    let empty;
    let seed = match seed {
        Some(seed) => Some(seed),
        None => {
            empty = graph.template.dump_channel(i, serde)?;
            empty.as_ref()
        }
    };
    // A plain append's value is its items then each write's: joined encoded, decoded once.
    if state.channels()[i].concatenates
        && let Some(joined) = seed.and_then(|seed| join_arrays(seed, writes))
    {
        return state.load_channel(i, &joined, serde);
    }
    if let Some(seed) = seed {
        state.load_channel(i, seed, serde)?;
    }
    for write in writes {
        let mut update = S::Update::default();
        state.load_write(&mut update, i, &write.value, serde)?;
        state.apply(update)?;
    }
    Ok(())
}

/// One MessagePack array of `seed`'s items followed by each write's; `None` unless all are
/// MessagePack arrays (the caller then folds them one by one).
fn join_arrays(seed: &SerializedValue, writes: &[PendingWrite]) -> Option<SerializedValue> {
    let parts = std::iter::once(seed).chain(writes.iter().map(|w| &w.value));
    let mut items = Vec::with_capacity(writes.len() + 1);
    let mut count: u32 = 0;
    for part in parts {
        if part.type_tag != waypoint_checkpoint::serde::TAG_MSGPACK {
            return None;
        }
        let mut rest: &[u8] = &part.bytes;
        count = count.checked_add(rmp::decode::read_array_len(&mut rest).ok()?)?;
        items.push(rest);
    }
    let mut joined = Vec::with_capacity(5 + items.iter().map(|i| i.len()).sum::<usize>());
    rmp::encode::write_array_len(&mut joined, count).ok()?;
    for part in items {
        joined.extend_from_slice(part);
    }
    Some(SerializedValue::new(
        waypoint_checkpoint::serde::TAG_MSGPACK,
        joined,
    ))
}

/// Sets an appending channel to `parent`'s value of it plus the parent's step `writes`.
pub(crate) fn extend_from<S: State>(
    graph: &Graph<S>,
    state: &mut S,
    parent: &S,
    channel: &str,
    writes: &[PendingWrite],
) -> Result<()> {
    let serde = &graph.serde;
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use waypoint_checkpoint::serde::Format;
    use waypoint_checkpoint::{PendingWrite, Serde, SerializedValue};

    use super::join_arrays;

    fn write(value: SerializedValue) -> PendingWrite {
        PendingWrite {
            task_id: "t".into(),
            channel: "items".into(),
            value,
        }
    }

    /// Joined items decode to the seed's items followed by each write's, across the three
    /// array header sizes (fixarray, array16, array32).
    #[test]
    fn joined_arrays_decode_to_the_concatenation() {
        for format in [Format::MsgPack, Format::LangGraph] {
            let serde = Serde::new(format);
            for (seed_len, write_lens) in [
                (0, vec![]),
                (2, vec![1, 0, 3]),
                (15, vec![1]),
                (65_535, vec![1, 2]),
            ] {
                let items = |from: usize, n: usize| -> Vec<Value> {
                    (from..from + n).map(|i| json!({"n": i})).collect()
                };
                let seed = serde.dumps(&items(0, seed_len)).expect("encodes");
                let mut want = items(0, seed_len);
                let mut writes = Vec::new();
                for n in write_lens {
                    let more = items(want.len(), n);
                    writes.push(write(serde.dumps(&more).expect("encodes")));
                    want.extend(more);
                }
                let joined = join_arrays(&seed, &writes).expect("all arrays");
                let got: Vec<Value> = serde.loads(&joined).expect("decodes");
                assert_eq!(got, want, "{format:?}, seed of {seed_len}");
            }
        }
    }

    /// A write that is not a MessagePack array (JSON, or one item) is left to the reducer.
    #[test]
    fn other_writes_are_not_joined() {
        let msgpack = Serde::new(Format::MsgPack);
        let seed = msgpack.dumps(&vec![1, 2]).expect("encodes");
        let one = write(msgpack.dumps(&3).expect("encodes"));
        assert!(join_arrays(&seed, &[one]).is_none());
        let json = Serde::new(Format::Json);
        let listed = write(json.dumps(&vec![3]).expect("encodes"));
        assert!(join_arrays(&seed, &[listed]).is_none());
        let empty = write(SerializedValue::new("msgpack", Vec::new()));
        assert!(join_arrays(&seed, &[empty]).is_none());
    }
}
