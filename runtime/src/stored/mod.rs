//! What a checkpoint says without its graph: values, next nodes, interrupts, changes, read
//! from the stored checkpoint alone (the inspector's and the subgraph snapshots' view).
//!
//! The runtime writes LangGraph's channel layout, so the rules are LangGraph's
//! (`prepare_next_tasks`): node `N` runs next when `branch:to:N` holds a value whose version
//! is newer than the one `N` last saw (`versions_seen[N]`), `__start__` likewise for the
//! input, and every `Send` waiting in `__pregel_tasks` is a task of its node.

use std::collections::{BTreeMap, BTreeSet};
use waypoint_checkpoint::metadata;

use serde_json::{Value, json};
use waypoint_checkpoint::channels::{self, START};
use waypoint_checkpoint::{CheckpointSaver, CheckpointTuple, SerializedValue};

use crate::error::Result;
use crate::{Interrupt, Message, add_messages};

mod decode;
mod writes;

pub use decode::Decoded;
pub use writes::{
    list, metadata_of, rebuild as rebuild_writes, rebuild_input, shown_metadata, writes_from,
};

/// The prefix of a node's trigger channel.
const BRANCH_PREFIX: &str = "branch:to:";
/// LangGraph's channel naming the node that raised an error.
const ERROR_SOURCE: &str = "__error_source_node__";

/// Whether `channel` is bookkeeping (triggers, input, sends) rather than graph state.
pub fn is_internal(channel: &str) -> bool {
    channel.starts_with("branch:")
        || channel.starts_with("start:")
        || (channel.starts_with("__") && channel != "__root__")
}

/// Every channel value of `tuple`, decoded; appending channels the checkpoint stores as
/// deltas are rebuilt from their history (chat messages folded by `add_messages`, other
/// lists appended).
pub async fn channel_values(
    saver: &dyn CheckpointSaver,
    tuple: &CheckpointTuple,
) -> Result<BTreeMap<String, Decoded>> {
    let checkpoint = &tuple.checkpoint;
    let mut out: BTreeMap<String, Decoded> = checkpoint
        .channel_values
        .iter()
        .map(|(name, value)| (name.clone(), Decoded::of(value)))
        .collect();
    // Delta channels are named by their counters in the metadata; one versioned without a
    // value here is stored as its history.
    let missing: Vec<String> = match tuple.metadata.extra.get(metadata::DELTA_COUNTERS) {
        Some(Value::Object(counters)) => counters
            .keys()
            .filter(|c| {
                checkpoint.channel_versions.contains_key(*c)
                    && !checkpoint.channel_values.contains_key(*c)
            })
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    if missing.is_empty() {
        return Ok(out);
    }
    let history = saver.delta_channel_history(&tuple.config, &missing).await?;
    for (channel, history) in history {
        let writes: Vec<&SerializedValue> = history.writes.iter().map(|w| &w.value).collect();
        out.insert(channel, fold(history.seed.as_ref(), &writes));
    }
    Ok(out)
}

/// An appending channel's value: its seed followed by its writes. Parts that all decode as
/// chat messages are folded by the runtime's own `add_messages` (replace by id, remove,
/// remove-all); anything else by `append`, which concatenates. (A message channel declared
/// with plain `append` folds the same unless two of its messages share an id.)
fn fold(seed: Option<&SerializedValue>, writes: &[&SerializedValue]) -> Decoded {
    let stored: Vec<&SerializedValue> = seed.into_iter().chain(writes.iter().copied()).collect();
    let mut parts = Vec::with_capacity(stored.len());
    for value in &stored {
        match Decoded::of(value) {
            Decoded::Value(value) => parts.push(value),
            undecodable => return undecodable,
        }
    }
    if let Some(messages) = fold_messages(&stored, &parts) {
        return messages;
    }
    let mut items = Vec::new();
    for part in parts {
        match part {
            Value::Array(list) => items.extend(list),
            Value::Null => {}
            other => items.push(other),
        }
    }
    Decoded::Value(Value::Array(items))
}

/// The `parts` (decoded from `stored`) folded by `add_messages`, or `None` unless every part
/// is a list of messages, each shown as a dict with a `type` that `Message` reads.
fn fold_messages(stored: &[&SerializedValue], parts: &[Value]) -> Option<Decoded> {
    let mut messages: Vec<Message> = Vec::new();
    for (stored, part) in stored.iter().zip(parts) {
        let update = part
            .as_array()?
            .iter()
            .map(|item| {
                item.get("type")?.as_str()?;
                serde_json::from_value::<Message>(item.clone()).ok()
            })
            .collect::<Option<Vec<Message>>>()?;
        if let Err(e) = add_messages(&mut messages, update) {
            return Some(Decoded::Undecodable {
                reason: format!("the messages do not fold: {e}"),
                tag: stored.type_tag.to_string(),
                bytes: stored.bytes.len(),
            });
        }
    }
    serde_json::to_value(&messages).ok().map(Decoded::Value)
}

/// The nodes that run next from `tuple`: pending `Send`s first (in the order written), then
/// triggered nodes by name.
pub fn next_nodes(tuple: &CheckpointTuple) -> Vec<String> {
    next_tasks(tuple)
        .into_iter()
        .map(|task| task.name)
        .collect()
}

/// A task that runs next from a stored checkpoint, as [`next_tasks`] reads it.
pub(crate) struct NextTask {
    /// Its node.
    pub(crate) name: String,
    /// For a pending `Send`: its index among them.
    pub(crate) send: Option<usize>,
    /// The channel that triggered it (`__pregel_tasks` for a send).
    pub(crate) trigger: String,
}

/// The tasks of [`next_nodes`], in its order, with what triggered each.
pub(crate) fn next_tasks(tuple: &CheckpointTuple) -> Vec<NextTask> {
    let checkpoint = &tuple.checkpoint;
    let mut out = Vec::new();
    if let Some(stored) = checkpoint.channel_values.get(channels::TASKS)
        && let Decoded::Value(Value::Array(sends)) = Decoded::of(stored)
    {
        let names = sends.iter().filter_map(send_node);
        out.extend(names.enumerate().map(|(i, name)| NextTask {
            name: name.to_owned(),
            send: Some(i),
            trigger: channels::TASKS.to_owned(),
        }));
    }
    let mut pulled = BTreeMap::new();
    for channel in checkpoint.channel_values.keys() {
        let node = match channel.strip_prefix(BRANCH_PREFIX) {
            Some(node) => node,
            None if channel == START => START,
            None => continue,
        };
        let Some(version) = checkpoint.channel_versions.get(channel) else {
            continue;
        };
        let seen = checkpoint
            .versions_seen
            .get(node)
            .and_then(|seen| seen.get(channel));
        if seen.is_none_or(|seen| version > seen) {
            pulled.insert(node.to_owned(), channel.clone());
        }
    }
    out.extend(pulled.into_iter().map(|(name, trigger)| NextTask {
        name,
        send: None,
        trigger,
    }));
    out
}

/// The node a stored `Send` goes to: LangGraph's `langgraph.types.Send` (its `lc: 2` form,
/// arguments `[node, arg]`), the runtime's `[node, arg]` pair, or a `{node, arg}` map.
fn send_node(send: &Value) -> Option<&str> {
    let node = match send {
        Value::Object(map) if map.get("lc").and_then(Value::as_u64) == Some(2) => {
            let id = map.get("id").and_then(Value::as_array)?;
            let class: Vec<&str> = id.iter().filter_map(Value::as_str).collect();
            if class != ["langgraph", "types", "Send"] {
                return None;
            }
            map.get("args")?.get(0)?
        }
        Value::Object(map) => map.get("node")?,
        Value::Array(pair) => pair.first()?,
        _ => return None,
    };
    node.as_str()
}

/// The interrupts written against `tuple`, as `{task_id, id, value}`. With `pending_only`,
/// those of tasks that have since finished (they have output writes) are left out, as
/// LangGraph's `get_state` does for a thread's current checkpoint.
pub fn interrupts(tuple: &CheckpointTuple, pending_only: bool) -> Vec<Value> {
    let control = [
        channels::INTERRUPT,
        channels::RESUME,
        channels::ERROR,
        ERROR_SOURCE,
    ];
    let finished: BTreeSet<&str> = tuple
        .pending_writes
        .iter()
        .filter(|w| w.task_id != channels::NULL_TASK_ID && !control.contains(&w.channel.as_str()))
        .map(|w| w.task_id.as_str())
        .collect();
    let mut out = Vec::new();
    for write in &tuple.pending_writes {
        if write.channel != channels::INTERRUPT
            || pending_only && finished.contains(write.task_id.as_str())
        {
            continue;
        }
        let decoded = Decoded::of(&write.value);
        let items = match decoded.value() {
            Some(Value::Array(items)) => items.clone(),
            Some(other) => vec![other.clone()],
            None => {
                let value = decoded.to_json();
                out.push(json!({"task_id": write.task_id, "id": null, "value": value}));
                continue;
            }
        };
        for item in items {
            // LangGraph's `Interrupt` (any version's fields) or the runtime's own forms;
            // anything else is shown whole, without an id.
            let shaped = match &item {
                Value::Object(map) => map.contains_key("lc") || map.contains_key("value"),
                Value::Array(_) => true,
                _ => false,
            };
            let read = shaped.then(|| Interrupt::from_value(item.clone()).ok());
            let (id, value) = match read.flatten() {
                Some(i) if !i.id.is_empty() => (Value::String(i.id), i.value),
                Some(i) => (Value::Null, i.value),
                None => (Value::Null, item),
            };
            out.push(json!({"task_id": write.task_id, "id": id, "value": value}));
        }
    }
    out
}

/// The channels the step that wrote `tuple` changed: as the checkpoint records them, or else
/// by comparing versions with its `parent` when that is at hand.
pub fn changed_channels(
    tuple: &CheckpointTuple,
    parent: Option<&CheckpointTuple>,
) -> Option<Vec<String>> {
    if let Some(updated) = &tuple.checkpoint.updated_channels {
        return Some(updated.clone());
    }
    let parent = parent?;
    Some(
        tuple
            .checkpoint
            .channel_versions
            .iter()
            .filter(|(c, v)| parent.checkpoint.channel_versions.get(*c) != Some(*v))
            .map(|(c, _)| c.clone())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use waypoint_checkpoint::{
        Checkpoint, CheckpointConfig, CheckpointMetadata, PendingWrite, Serde,
    };

    fn tuple(checkpoint: Checkpoint) -> CheckpointTuple {
        CheckpointTuple {
            config: CheckpointConfig::of("t", "", &checkpoint.id),
            checkpoint,
            metadata: CheckpointMetadata::default(),
            parent_config: None,
            pending_writes: Vec::new(),
        }
    }

    #[test]
    fn next_follows_versions_seen() {
        let mut checkpoint = Checkpoint::new(1);
        let null = SerializedValue::new("null", Vec::new());
        for (channel, version) in [("branch:to:a", "2"), ("branch:to:b", "2"), ("x", "2")] {
            checkpoint
                .channel_values
                .insert(channel.into(), null.clone());
            checkpoint
                .channel_versions
                .insert(channel.into(), version.into());
        }
        checkpoint
            .versions_seen
            .insert("a".into(), [("branch:to:a".into(), "2".into())].into());
        checkpoint
            .versions_seen
            .insert("b".into(), [("branch:to:b".into(), "1".into())].into());
        let sends = Serde::default().dumps(&[("c", 1)]).unwrap();
        checkpoint
            .channel_values
            .insert(channels::TASKS.into(), sends);
        assert_eq!(next_nodes(&tuple(checkpoint)), ["c", "b"]);
    }

    /// Python's `[Send("c", {"x": 1})]` and `[Interrupt(value={"question": "name?"},
    /// id="abc")]` as langgraph 1.2.22 writes them (the interrupt has `response_schema`).
    const PY_SENDS: &str = "91c71d0193af6c616e6767726170682e7479706573a453656e6492a16381a17801";
    const PY_INTERRUPTS: &str = "91c74a0293af6c616e6767726170682e7479706573a9496e7465727275707483\
        a576616c756581a87175657374696f6ea56e616d653fa26964a3616263af726573706f6e73655f736368656d\
        61c0";

    fn msgpack_hex(text: &str) -> SerializedValue {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        let bytes = digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect::<Vec<u8>>();
        SerializedValue::new("msgpack", bytes)
    }

    #[test]
    fn python_sends_and_interrupts_are_read() {
        let mut checkpoint = Checkpoint::new(1);
        checkpoint
            .channel_values
            .insert(channels::TASKS.into(), msgpack_hex(PY_SENDS));
        let mut tuple = tuple(checkpoint);
        assert_eq!(next_nodes(&tuple), ["c"]);
        let write = |task: &str, channel: &str, value: SerializedValue| PendingWrite {
            task_id: task.into(),
            channel: channel.into(),
            value,
        };
        let serde = Serde::default();
        let waypoint = serde
            .dumps(&vec![crate::Interrupt::new(json!(7), "w1")])
            .unwrap();
        tuple.pending_writes = vec![
            write("t1", channels::INTERRUPT, msgpack_hex(PY_INTERRUPTS)),
            write("t2", channels::INTERRUPT, waypoint),
            write(
                "t3",
                channels::INTERRUPT,
                SerializedValue::new("pickle", vec![1]),
            ),
        ];
        let shown = interrupts(&tuple, true);
        assert_eq!(
            shown[0],
            json!({"task_id": "t1", "id": "abc", "value": {"question": "name?"}})
        );
        assert_eq!(shown[1], json!({"task_id": "t2", "id": "w1", "value": 7}));
        assert_eq!(shown[2]["id"], Value::Null);
        assert_eq!(shown[2]["value"]["type"], "pickle");
        // A task that has written its output since is no longer pending.
        tuple
            .pending_writes
            .push(write("t1", "x", serde.dumps(&1).unwrap()));
        assert_eq!(interrupts(&tuple, true).len(), 2);
        assert_eq!(interrupts(&tuple, false).len(), 3);
    }

    #[test]
    fn folding_appends_and_folds_messages_by_the_runtime_reducer() {
        let serde = Serde::default();
        // Plain values concatenate, ids or not.
        let seed = serde.dumps(&json!([{"id": "1", "t": "a"}])).unwrap();
        let w1 = serde.dumps(&json!([{"id": "1", "t": "b"}, "x"])).unwrap();
        assert_eq!(
            fold(Some(&seed), &[&w1]),
            Decoded::Value(json!([{"id": "1", "t": "a"}, {"id": "1", "t": "b"}, "x"]))
        );
        // Text is text, though `Message` would read a string as a human message.
        let words = serde.dumps(&json!(["start"])).unwrap();
        assert_eq!(
            fold(Some(&words), &[&words]),
            Decoded::Value(json!(["start", "start"]))
        );
        // Messages: replace by id, then remove by id.
        let hi = Message::human("hi").with_id("1");
        let seed = serde
            .dumps(&vec![hi, Message::ai("yo").with_id("2")])
            .unwrap();
        let edit = serde
            .dumps(&vec![Message::human("hello").with_id("1")])
            .unwrap();
        let remove = serde.dumps(&vec![Message::remove("2")]).unwrap();
        let Decoded::Value(folded) = fold(Some(&seed), &[&edit, &remove]) else {
            panic!("messages fold");
        };
        assert_eq!(folded.as_array().map(Vec::len), Some(1), "{folded}");
        assert_eq!(folded[0]["content"], "hello");
        assert_eq!(folded[0]["id"], "1");
        // Python's messages (LangGraph's encoding) fold with Waypoint's.
        let python = Serde::new(waypoint_checkpoint::Format::LangGraph)
            .dumps(&vec![Message::human("bye").with_id("1")])
            .unwrap();
        let Decoded::Value(folded) = fold(Some(&seed), &[&python]) else {
            panic!("messages fold");
        };
        assert_eq!(folded.as_array().map(Vec::len), Some(2), "{folded}");
        assert_eq!(folded[0]["content"], "bye");
        assert!(is_internal("branch:to:a") && is_internal("__pregel_tasks"));
        assert!(!is_internal("__root__") && !is_internal("messages"));
    }
}
