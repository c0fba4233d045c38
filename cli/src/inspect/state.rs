//! What a checkpoint says without its graph: values, next nodes, interrupts, changes.
//!
//! The runtime writes LangGraph's channel layout, so the rules are LangGraph's
//! (`prepare_next_tasks`): node `N` runs next when `branch:to:N` holds a value whose version
//! is newer than the one `N` last saw (`versions_seen[N]`), `__start__` likewise for the
//! input, and every `Send` waiting in `__pregel_tasks` is a task of its node.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};
use waypoint_checkpoint::{
    CheckpointSaver, CheckpointTuple, DELTA_COUNTERS_KEY, Serde, SerializedValue, channels,
};
use waypoint_runtime::{Message, add_messages};

use super::decode::Decoded;

/// The input channel, which is also the START node's trigger.
const START: &str = "__start__";
/// The prefix of a node's trigger channel.
const BRANCH_PREFIX: &str = "branch:to:";
/// LangGraph's channel naming the node that raised an error.
const ERROR_SOURCE: &str = "__error_source_node__";

/// Whether `channel` is bookkeeping (triggers, input, sends) rather than graph state.
pub(crate) fn is_internal(channel: &str) -> bool {
    channel.starts_with("branch:")
        || channel.starts_with("start:")
        || (channel.starts_with("__") && channel != "__root__")
}

/// Every channel value of `tuple`, decoded; appending channels the checkpoint stores as
/// deltas are rebuilt from their history (see [`fold`]).
pub(crate) async fn channel_values(
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
    let missing: Vec<String> = match tuple.metadata.extra.get(DELTA_COUNTERS_KEY) {
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
    let history = saver
        .delta_channel_history(&tuple.config, &missing)
        .await
        .context("cannot read the history of the delta-stored channels")?;
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
    let parts: Vec<&SerializedValue> = seed.into_iter().chain(writes.iter().copied()).collect();
    if let Some(messages) = fold_messages(&parts) {
        return messages;
    }
    let mut items = Vec::new();
    for stored in parts {
        let decoded = Decoded::of(stored);
        match decoded.value() {
            Some(Value::Array(list)) => items.extend(list.iter().cloned()),
            Some(Value::Null) => {}
            Some(other) => items.push(other.clone()),
            None => return decoded,
        }
    }
    Decoded::Value(Value::Array(items))
}

/// The parts folded by `add_messages`, or `None` unless every part is a list of messages.
fn fold_messages(parts: &[&SerializedValue]) -> Option<Decoded> {
    let serde = Serde::default();
    let mut messages: Vec<Message> = Vec::new();
    for stored in parts {
        let update = serde.loads::<Vec<Message>>(stored).ok()?;
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
pub(crate) fn next_nodes(tuple: &CheckpointTuple) -> Vec<String> {
    let checkpoint = &tuple.checkpoint;
    let mut out = Vec::new();
    if let Some(stored) = checkpoint.channel_values.get(channels::TASKS)
        && let Decoded::Value(Value::Array(sends)) = Decoded::of(stored)
    {
        for send in &sends {
            // LangGraph's `Send` objects decode to {node, arg}; the runtime's to [node, arg].
            let node = send.get("node").or_else(|| send.get(0));
            if let Some(node) = node.and_then(Value::as_str) {
                out.push(node.to_owned());
            }
        }
    }
    let mut pulled = BTreeSet::new();
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
            pulled.insert(node.to_owned());
        }
    }
    out.extend(pulled);
    out
}

/// The interrupts written against `tuple`, as `{task_id, id, value}`. With `pending_only`,
/// those of tasks that have since finished (they have output writes) are left out, as
/// LangGraph's `get_state` does for a thread's current checkpoint.
pub(crate) fn interrupts(tuple: &CheckpointTuple, pending_only: bool) -> Vec<Value> {
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
            None => vec![json!({"id": null, "value": decoded.to_json()})],
        };
        for item in items {
            out.push(json!({
                "task_id": write.task_id,
                "id": item.get("id").cloned().unwrap_or(Value::Null),
                "value": item.get("value").cloned().unwrap_or(item),
            }));
        }
    }
    out
}

/// The channels the step that wrote `tuple` changed: as the checkpoint records them, or else
/// by comparing versions with its `parent` when that is at hand.
pub(crate) fn changed_channels(
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
    use waypoint_checkpoint::{Checkpoint, CheckpointConfig, CheckpointMetadata, Serde};

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
        assert!(is_internal("branch:to:a") && is_internal("__pregel_tasks"));
        assert!(!is_internal("__root__") && !is_internal("messages"));
    }
}
