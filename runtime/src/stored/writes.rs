//! LangGraph's `writes` metadata where a checkpoint does not store it
//! ([`metadata::WRITES_FROM`]): rebuilt from what the thread stores anyway.
//!
//! A step's checkpoint records what its node returned (`{node: update}`), and the same
//! values are its parent's pending writes, which the thread keeps (appending channels are
//! stored as those writes); an input checkpoint records the input, which it stores as its
//! `__start__` channel. When saving, the runtime stores only where to rebuild `writes` from
//! (a node's name, or `__start__`) where [`rebuild`] (or the input's decoded value) gives
//! back the very value it would have stored; otherwise the value is stored as it is. Reading
//! rebuilds it the same way, for any saver and without the graph.

use std::collections::HashMap;

use serde_json::{Map, Value};
use waypoint_checkpoint::raw::json_contains;
use waypoint_checkpoint::{
    CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointTuple, ListOptions,
    PendingWrite, SerializedValue, channels, metadata,
};

use super::decode::runtime_json;
use super::{START, is_internal};
use crate::error::Result;

/// The `writes` of a step whose only node `node` wrote the state channels in `writes`
/// (`(task id, channel, value)`, as the parent checkpoint stores them): `{node: {channel:
/// value}}`. Writes of no task (a resume command's update) and to internal channels
/// (triggers, sends, markers) are not the node's update and are passed over. `None` unless
/// one task wrote state channels, each once, in values the runtime wrote (JSON or
/// MessagePack).
pub fn rebuild<'w>(
    node: &str,
    writes: impl IntoIterator<Item = (&'w str, &'w str, &'w SerializedValue)>,
) -> Option<Value> {
    let mut task = None;
    let mut update = Map::new();
    for (task_id, channel, value) in writes {
        if task_id == channels::NULL_TASK_ID || is_internal(channel) {
            continue;
        }
        if *task.get_or_insert(task_id) != task_id || update.contains_key(channel) {
            return None;
        }
        update.insert(channel.to_owned(), runtime_json(value)?);
    }
    task?;
    Some(Value::Object(Map::from_iter([(
        node.to_owned(),
        Value::Object(update),
    )])))
}

/// The `writes` of an input checkpoint that stores `input` as its `__start__` channel.
pub fn rebuild_input(input: &SerializedValue) -> Option<Value> {
    runtime_json(input)
}

/// The metadata of `tuple` as users see it: without Waypoint's bookkeeping keys
/// ([`metadata::BOOKKEEPING`]), and with `writes` rebuilt where the checkpoint does not
/// store it, from `parent_writes` (the parent checkpoint's pending writes) or its own input.
/// Without those writes (a parent pruned since) such a checkpoint shows no `writes`.
pub fn shown_metadata(
    tuple: &CheckpointTuple,
    parent_writes: Option<&[PendingWrite]>,
) -> CheckpointMetadata {
    let mut shown = tuple.metadata.clone();
    for key in metadata::BOOKKEEPING {
        shown.extra.remove(key);
    }
    let rebuilt = match (writes_from(&tuple.metadata), parent_writes) {
        (Some(START), _) => tuple
            .checkpoint
            .channel_values
            .get(START)
            .and_then(rebuild_input),
        (Some(node), Some(writes)) => rebuild(
            node,
            writes
                .iter()
                .map(|w| (w.task_id.as_str(), w.channel.as_str(), &w.value)),
        ),
        _ => None,
    };
    if let Some(writes) = rebuilt {
        shown.extra.insert(metadata::WRITES.to_owned(), writes);
    }
    shown
}

/// Where a checkpoint's `writes` is rebuilt from ([`metadata::WRITES_FROM`]): a node whose
/// update is the parent's writes, or `__start__`; `None` where it is stored (or absent).
pub fn writes_from(metadata: &CheckpointMetadata) -> Option<&str> {
    metadata
        .extra
        .get(metadata::WRITES_FROM)
        .and_then(Value::as_str)
}

/// [`shown_metadata`] of `tuple`, reading its parent's pending writes from `saver` when it
/// needs them.
pub async fn metadata_of(
    saver: &dyn CheckpointSaver,
    tuple: &CheckpointTuple,
) -> Result<CheckpointMetadata> {
    let from_parent = metadata::writes_from_parent(tuple.metadata.extra.get(metadata::WRITES_FROM));
    let parent = match (from_parent, &tuple.parent_config) {
        (true, Some(parent)) => saver.get_tuple(parent).await?,
        _ => None,
    };
    let parent_writes = parent.as_ref().map(|p| p.pending_writes.as_slice());
    Ok(shown_metadata(tuple, parent_writes))
}

/// The checkpoints [`CheckpointSaver::list`] gives for `config` and `options`, with a filter
/// on `writes` matched against the `writes` users see: rebuilt where the checkpoint stores
/// where to rebuild it from instead of the value ([`shown_metadata`]), which the saver's own
/// filter cannot match.
///
/// Such a filter lists the checkpoints matching the rest of it, unlimited, and keeps those
/// whose shown `writes` contain the filter's, up to the limit; any other filter is the
/// saver's alone.
pub async fn list(
    saver: &dyn CheckpointSaver,
    config: Option<&CheckpointConfig>,
    options: &ListOptions,
) -> Result<Vec<CheckpointTuple>> {
    let mut rest = options.clone();
    let wanted = match &mut rest.filter {
        Some(Value::Object(filter)) => filter.remove(metadata::WRITES),
        _ => None,
    };
    let Some(wanted) = wanted else {
        return Ok(saver.list(config, options).await?);
    };
    let wanted = Value::Object(Map::from_iter([(metadata::WRITES.to_owned(), wanted)]));
    rest.limit = None;
    let tuples = saver.list(config, &rest).await?;
    // A checkpoint's parent is most often the next one listed: its writes are at hand.
    // Keyed by thread and namespace too: a copied thread keeps its checkpoints' ids.
    fn key(c: &CheckpointConfig) -> (&str, &str, &str) {
        let id = c.checkpoint_id.as_deref().unwrap_or_default();
        (c.thread_id.as_str(), c.ns(), id)
    }
    let writes_of: HashMap<(&str, &str, &str), &[PendingWrite]> = tuples
        .iter()
        .map(|t| (key(&t.config), t.pending_writes.as_slice()))
        .collect();
    let (mut keep, mut found) = (Vec::with_capacity(tuples.len()), 0);
    for tuple in &tuples {
        if options.limit.is_some_and(|limit| found >= limit) {
            break;
        }
        let parent = tuple.parent_config.as_ref();
        let listed = parent.and_then(|p| writes_of.get(&key(p)).copied());
        let shown = match (writes_from(&tuple.metadata), listed) {
            (Some(_), None) => metadata_of(saver, tuple).await?,
            _ => shown_metadata(tuple, listed),
        };
        let matches = json_contains(&Value::Object(shown.to_json()), &wanted);
        found += usize::from(matches);
        keep.push(matches);
    }
    Ok(tuples
        .into_iter()
        .zip(keep)
        .filter_map(|(tuple, keep)| keep.then_some(tuple))
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use waypoint_checkpoint::{Checkpoint, CheckpointConfig, CheckpointSource, Serde};

    use super::*;

    fn write(task: &str, channel: &str, value: Value) -> PendingWrite {
        PendingWrite {
            task_id: task.into(),
            channel: channel.into(),
            value: Serde::default().dumps(&value).expect("encodes"),
        }
    }

    fn rebuilt(writes: &[PendingWrite]) -> Option<Value> {
        rebuild(
            "n",
            writes
                .iter()
                .map(|w| (w.task_id.as_str(), w.channel.as_str(), &w.value)),
        )
    }

    #[test]
    fn one_task_s_state_writes_rebuild_its_update() {
        let writes = [
            write(channels::NULL_TASK_ID, "a", json!(0)),
            write("t1", "a", json!([{"role": "ai", "content": "x"}])),
            write("t1", "b", json!({"k": 1})),
            write("t1", "branch:to:m", Value::Null),
            write("t2", channels::ERROR, json!("boom")),
        ];
        assert_eq!(
            rebuilt(&writes),
            Some(json!({"n": {"a": [{"role": "ai", "content": "x"}], "b": {"k": 1}}}))
        );
        // Two tasks with updates, a channel written twice, nothing written, undecodable.
        let two = [write("t1", "a", json!(1)), write("t2", "b", json!(2))];
        assert_eq!(rebuilt(&two), None);
        let twice = [write("t1", "a", json!(1)), write("t1", "a", json!(2))];
        assert_eq!(rebuilt(&twice), None);
        assert_eq!(rebuilt(&writes[3..]), None);
        let sealed = PendingWrite {
            value: SerializedValue::new("msgpack+aes-gcm:k1", vec![1, 2]),
            ..write("t1", "a", Value::Null)
        };
        assert_eq!(rebuilt(&[sealed]), None);
    }

    fn tuple(metadata: CheckpointMetadata) -> CheckpointTuple {
        let checkpoint = Checkpoint::new(1);
        CheckpointTuple {
            config: CheckpointConfig::of("t", "", &checkpoint.id),
            checkpoint,
            metadata,
            parent_config: None,
            pending_writes: Vec::new(),
        }
    }

    #[test]
    fn shown_metadata_hides_the_marker_and_rebuilds_writes() {
        let loop_step = || CheckpointMetadata::new(CheckpointSource::Loop, 1);
        let mut marked = tuple(
            loop_step()
                .with(metadata::WRITES_FROM, "n")
                .with(metadata::DELTA_COUNTERS, json!({"a": 1})),
        );
        let writes = [write("t1", "a", json!(["x"]))];
        let shown = shown_metadata(&marked, Some(&writes)).to_json();
        let expected = loop_step().with(metadata::WRITES, json!({"n": {"a": ["x"]}}));
        assert_eq!(shown, expected.to_json());
        // Without the parent's writes (pruned): no `writes`, and no marker either.
        let shown = shown_metadata(&marked, None).to_json();
        assert_eq!(shown, loop_step().to_json());
        // A checkpoint that stores its `writes` shows it as stored.
        marked.metadata = loop_step().with(metadata::WRITES, json!({"m": null}));
        let shown = shown_metadata(&marked, Some(&writes)).to_json();
        assert_eq!(shown.get(metadata::WRITES), Some(&json!({"m": null})));
        // An input checkpoint's `writes` is its input.
        let input = CheckpointMetadata::new(CheckpointSource::Input, -1);
        let mut marked = tuple(input.clone().with(metadata::WRITES_FROM, START));
        let value = json!({"a": ["hi"]});
        let stored = Serde::default().dumps(&value).expect("encodes");
        marked
            .checkpoint
            .channel_values
            .insert(START.into(), stored);
        let shown = shown_metadata(&marked, None).to_json();
        assert_eq!(shown, input.with(metadata::WRITES, value).to_json());
    }
}
