//! What a thread looks like at one checkpoint: [`StateSnapshot`], built from a decoded frame,
//! one checkpoint at a time or a whole history at once.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

use waypoint_checkpoint::{
    CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointTuple, PendingWrite, channels,
    metadata,
};

use crate::config::RunConfig;
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::pregel::frame::{Frame, extend_from};
use crate::pregel::graph::Graph;
use crate::pregel::step::{self, TaskKind};
use crate::state::State;
use crate::stored::{self, Decoded};

/// The parts of a checkpoint tuple a snapshot shows besides its values.
pub(crate) struct Head {
    config: RunConfig,
    parent_config: Option<RunConfig>,
    /// As users see it ([`stored::shown_metadata`]).
    metadata: CheckpointMetadata,
    created_at: String,
}

impl Head {
    /// The head of `tuple`, whose parent checkpoint holds `parent_writes` (needed where the
    /// metadata's `writes` is rebuilt from them).
    fn of(tuple: &CheckpointTuple, parent_writes: Option<&[PendingWrite]>) -> Self {
        Head {
            config: RunConfig::from(&tuple.config),
            parent_config: tuple.parent_config.as_ref().map(RunConfig::from),
            metadata: stored::shown_metadata(tuple, parent_writes),
            created_at: tuple.checkpoint.ts.clone(),
        }
    }

    /// The head of `tuple`, reading its parent's writes from `saver` where needed.
    pub(crate) async fn read(saver: &dyn CheckpointSaver, tuple: &CheckpointTuple) -> Result<Self> {
        let metadata = stored::metadata_of(saver, tuple).await?;
        Ok(Head {
            metadata,
            ..Head::of(tuple, None)
        })
    }
}

/// A task a checkpoint will run next, and its error if it already failed.
///
/// Its JSON is the LangGraph API's `ThreadTask`: `{"id", "name", "error", "interrupts",
/// "checkpoint", "state", "result"}`. `checkpoint` is the subgraph's checkpoint [`Self::state`]
/// points at (or `null`), `state` the subgraph's snapshot [`Self::subgraph`] (or `null`);
/// Waypoint attaches no partial result to a task, so `result` is `null`.
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
    /// The latest checkpoint of the subgraph the task ran (its namespace is the task's), as
    /// LangGraph's `PregelTask.state` config: give it to that subgraph's `get_state` for its
    /// snapshot. Set by [`get_state_subgraphs`](crate::CompiledGraph::get_state_subgraphs)
    /// when the task ran one; `None` otherwise.
    pub state: Option<RunConfig>,
    /// The snapshot of that subgraph checkpoint, as LangGraph's `PregelTask.state` snapshot,
    /// with its values as JSON (read from the checkpoint alone, as [`crate::stored`] does:
    /// the subgraph's state type is not the graph's) and its own tasks' subgraphs, down to
    /// the last. Set by `get_state_subgraphs` with [`Self::state`]; `None` otherwise.
    pub subgraph: Option<Box<StateSnapshot<Map<String, Value>>>>,
}

/// The state of a thread at one checkpoint (LangGraph's `StateSnapshot`).
///
/// Its JSON is the LangGraph API's `ThreadState` (what `GET /threads/{id}/state` returns):
///
/// ```json
/// {"values": {...}, "next": ["tools"],
///  "checkpoint": {"thread_id": "1", "checkpoint_ns": "", "checkpoint_id": "..."},
///  "metadata": {"source": "loop", "step": 1, ...}, "created_at": "2025-...",
///  "parent_checkpoint": {...}, "tasks": [...], "interrupts": [...]}
/// ```
///
/// `checkpoint` and `parent_checkpoint` are `null` when there is none (a thread without
/// checkpoints, the first checkpoint), as is `created_at` for a thread without checkpoints.
#[derive(Clone, Debug, PartialEq)]
pub struct StateSnapshot<S> {
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

impl<S: Serialize> Serialize for StateSnapshot<S> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        let mut map = serializer.serialize_map(Some(8))?;
        map.serialize_entry("values", &self.values)?;
        map.serialize_entry("next", &self.next)?;
        map.serialize_entry("checkpoint", &CheckpointRef::of(&self.config))?;
        map.serialize_entry("metadata", &self.metadata)?;
        let created_at = Some(&self.created_at).filter(|at| !at.is_empty());
        map.serialize_entry("created_at", &created_at)?;
        let parent = self.parent_config.as_ref().and_then(CheckpointRef::of);
        map.serialize_entry("parent_checkpoint", &parent)?;
        map.serialize_entry("tasks", &self.tasks)?;
        map.serialize_entry("interrupts", &self.interrupts)?;
        map.end()
    }
}

impl Serialize for TaskInfo {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        let mut map = serializer.serialize_map(Some(7))?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("error", &self.error)?;
        map.serialize_entry("interrupts", &self.interrupts)?;
        let checkpoint = self.state.as_ref().and_then(CheckpointRef::of);
        map.serialize_entry("checkpoint", &checkpoint)?;
        map.serialize_entry("state", &self.subgraph)?;
        map.serialize_entry("result", &())?;
        map.end()
    }
}

/// A checkpoint as the LangGraph API names one: `{thread_id, checkpoint_ns, checkpoint_id}`.
#[derive(Serialize)]
struct CheckpointRef<'a> {
    thread_id: &'a str,
    checkpoint_ns: &'a str,
    checkpoint_id: &'a str,
}

impl<'a> CheckpointRef<'a> {
    /// The checkpoint `config` points at; `None` without a thread or a checkpoint id.
    fn of(config: &'a RunConfig) -> Option<Self> {
        Some(CheckpointRef {
            thread_id: config.thread_id.as_deref()?,
            checkpoint_ns: &config.checkpoint_ns,
            checkpoint_id: config.checkpoint_id.as_deref()?,
        })
    }
}

/// The snapshot of a decoded checkpoint; its metadata leaves out Waypoint's bookkeeping
/// keys ([`metadata::BOOKKEEPING`]), which are the saver's business, not the user's.
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
                state: None,
                subgraph: None,
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

/// A subgraph checkpoint [`subgraph`] found: its config and its snapshot.
type Found = (RunConfig, StateSnapshot<Map<String, Value>>);

/// The latest checkpoint of the subgraph a task ran in namespace `ns` of `thread`, as a
/// config (keeping the caller's `configurable`) and as a snapshot; `None` when it ran none.
pub(crate) fn subgraph<'a>(
    saver: &'a Arc<dyn CheckpointSaver>,
    thread: &'a str,
    ns: String,
    configurable: &'a Map<String, Value>,
) -> BoxFuture<'a, Result<Option<Found>>> {
    Box::pin(async move {
        let at = CheckpointConfig {
            thread_id: thread.to_owned(),
            checkpoint_ns: Some(ns),
            checkpoint_id: None,
        };
        let Some(tuple) = saver.get_tuple(&at).await? else {
            return Ok(None);
        };
        let config = RunConfig {
            configurable: configurable.clone(),
            ..RunConfig::from(&tuple.config)
        };
        let snapshot = stored_snapshot(saver, thread, tuple, configurable).await?;
        Ok(Some((config, snapshot)))
    })
}

/// The snapshot of a checkpoint read without its graph ([`crate::stored`]): values as JSON
/// (undecodable ones as the inspector shows them), next tasks (sends, then triggered nodes
/// by name) with their ids, errors, interrupts and subgraphs.
async fn stored_snapshot(
    saver: &Arc<dyn CheckpointSaver>,
    thread: &str,
    tuple: CheckpointTuple,
    configurable: &Map<String, Value>,
) -> Result<StateSnapshot<Map<String, Value>>> {
    let values = stored::channel_values(saver.as_ref(), &tuple)
        .await?
        .into_iter()
        .filter(|(name, _)| !stored::is_internal(name))
        .map(|(name, value)| (name, value.to_json()))
        .collect();
    let head = Head::read(saver.as_ref(), &tuple).await?;
    let metadata = head.metadata;
    let ns = head.config.checkpoint_ns.clone();
    let step = metadata.step.unwrap_or(-1) + 1;
    let base = metadata
        .extra
        .get(metadata::FORKED_FROM)
        .and_then(Value::as_str)
        .unwrap_or(&tuple.checkpoint.id);
    let base = step::checkpoint_id_bytes(base);
    let legacy = tuple.checkpoint.v <= 1;
    let pending = stored::interrupts(&tuple, true);
    let mut tasks = Vec::new();
    for next in stored::next_tasks(&tuple) {
        let kind = next.send.map_or(TaskKind::Pull, TaskKind::Push);
        let id = step::task_id(&base, legacy, &ns, step, &next.name, &kind, &next.trigger);
        let error = tuple
            .pending_writes
            .iter()
            .find(|w| w.task_id == id && w.channel == channels::ERROR)
            .map(|w| match Decoded::of(&w.value) {
                Decoded::Value(Value::String(error)) => error,
                other => other.display(),
            });
        let interrupts = pending
            .iter()
            .filter(|i| i["task_id"] == id.as_str())
            .map(|i| {
                let id = i["id"].as_str().unwrap_or_default();
                Interrupt::new(i["value"].clone(), id)
            })
            .collect();
        let task_ns = step::task_ns(&ns, &next.name, &id);
        let (state, subgraph) = match subgraph(saver, thread, task_ns, configurable).await? {
            Some((config, snapshot)) => (Some(config), Some(Box::new(snapshot))),
            None => (None, None),
        };
        tasks.push(TaskInfo {
            id,
            name: next.name,
            error,
            interrupts,
            state,
            subgraph,
        });
    }
    Ok(StateSnapshot {
        values,
        next: tasks.iter().map(|t| t.name.clone()).collect(),
        interrupts: tasks.iter().flat_map(|t| t.interrupts.clone()).collect(),
        config: head.config,
        metadata,
        created_at: head.created_at,
        parent_config: head.parent_config,
        tasks,
    })
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
        let id = tuple.checkpoint.id.clone();
        let parent = tuple
            .parent_config
            .as_ref()
            .and_then(|p| p.checkpoint_id.clone());
        // The parent's writes, for `writes` metadata rebuilt from them: the listing's own
        // (its next-older checkpoint, usually), else read.
        let head = match parent.as_ref().and_then(|p| writes_of.get(p)) {
            Some(writes) => Head::of(&tuple, Some(writes)),
            None => Head::read(saver.as_ref(), &tuple).await?,
        };
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

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};
    use waypoint_checkpoint::{CheckpointSource, InMemorySaver};

    use super::*;
    use crate::{CompileOptions, Context, JsonSchema, JsonState, NodeResult, START, StateGraph};

    fn state(values: Value) -> JsonState {
        let Value::Object(values) = values else {
            return JsonState::default();
        };
        JsonState::new(JsonSchema::new().last_value("a"))
            .with_values(values)
            .expect("known keys")
    }

    #[test]
    fn a_snapshot_is_the_langgraph_api_thread_state() {
        let snapshot = StateSnapshot {
            values: state(json!({"a": 1})),
            next: vec!["ask".into()],
            config: RunConfig::thread("t1").at("c2"),
            metadata: CheckpointMetadata::new(CheckpointSource::Loop, 1),
            created_at: "2025-01-01T00:00:00+00:00".into(),
            parent_config: Some(RunConfig::thread("t1").at("c1")),
            tasks: vec![TaskInfo {
                id: "task1".into(),
                name: "ask".into(),
                error: None,
                interrupts: vec![Interrupt::new(json!("ok?"), "i1")],
                state: None,
                subgraph: None,
            }],
            interrupts: vec![Interrupt::new(json!("ok?"), "i1")],
        };
        assert_eq!(
            serde_json::to_string(&snapshot).expect("json"),
            concat!(
                r#"{"values":{"a":1},"next":["ask"],"#,
                r#""checkpoint":{"thread_id":"t1","checkpoint_ns":"","checkpoint_id":"c2"},"#,
                r#""metadata":{"parents":{},"source":"loop","step":1},"#,
                r#""created_at":"2025-01-01T00:00:00+00:00","#,
                r#""parent_checkpoint":{"thread_id":"t1","checkpoint_ns":"","checkpoint_id":"c1"},"#,
                r#""tasks":[{"id":"task1","name":"ask","error":null,"#,
                r#""interrupts":[{"value":"ok?","id":"i1"}],"checkpoint":null,"state":null,"result":null}],"#,
                r#""interrupts":[{"value":"ok?","id":"i1"}]}"#,
            )
        );
    }

    #[test]
    fn a_snapshot_without_checkpoint_has_nulls() {
        let snapshot = StateSnapshot {
            values: state(json!({})),
            next: Vec::new(),
            config: RunConfig::thread("t1"),
            metadata: CheckpointMetadata::default(),
            created_at: String::new(),
            parent_config: None,
            tasks: Vec::new(),
            interrupts: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&snapshot).expect("json"),
            json!({"values": {}, "next": [], "checkpoint": null, "metadata": {},
                   "created_at": null, "parent_checkpoint": null, "tasks": [], "interrupts": []})
        );
    }

    async fn ask(_: JsonState, ctx: Context) -> NodeResult<Map<String, Value>> {
        let answer = ctx.interrupt("ok?")?;
        Ok(Map::from_iter([("a".to_owned(), answer)]))
    }

    #[tokio::test]
    async fn a_paused_thread_serializes_its_checkpoint_task_and_interrupt() -> Result<()> {
        let mut graph = StateGraph::json(JsonSchema::new().last_value("a"));
        graph.add_node("ask", ask).add_edge(START, "ask");
        let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;
        let config = RunConfig::thread("t1");
        let input = Map::from_iter([("a".to_owned(), json!(0))]);
        graph.invoke(Some(input), &config).await?;
        let snapshot = graph.get_state(&config).await?;
        let json = serde_json::to_value(&snapshot).expect("json");
        let checkpoint_id = snapshot.config.checkpoint_id.clone().expect("a checkpoint");
        let parent_id = snapshot
            .parent_config
            .as_ref()
            .and_then(|c| c.checkpoint_id.clone());
        let interrupt = json!({"value": "ok?", "id": snapshot.interrupts[0].id});
        assert_eq!(json["values"], json!({"a": 0}));
        assert_eq!(json["next"], json!(["ask"]));
        assert_eq!(
            json["checkpoint"],
            json!({"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": checkpoint_id})
        );
        assert_eq!(json["parent_checkpoint"]["checkpoint_id"], json!(parent_id));
        assert_eq!(json["metadata"]["source"], json!("loop"));
        assert_eq!(json["created_at"], json!(snapshot.created_at));
        assert_eq!(json["tasks"][0]["id"], json!(snapshot.tasks[0].id));
        assert_eq!(json["tasks"][0]["interrupts"], json!([interrupt]));
        assert_eq!(json["interrupts"], json!([interrupt]));
        Ok(())
    }
}
