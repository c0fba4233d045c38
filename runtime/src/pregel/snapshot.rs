//! What a thread looks like at one checkpoint: [`StateSnapshot`], built from a decoded frame,
//! one checkpoint at a time or a whole history at once.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use waypoint_checkpoint::{
    CheckpointMetadata, CheckpointSaver, CheckpointTuple, PendingWrite, channels, metadata,
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
///
/// Its JSON is the LangGraph API's `ThreadTask`: `{"id", "name", "error", "interrupts",
/// "checkpoint", "state", "result"}`. `checkpoint` is the subgraph's checkpoint [`Self::state`]
/// points at (or `null`); Waypoint attaches neither a subgraph's decoded state (its type is
/// the subgraph's) nor a partial result to a task, so the last two are `null`.
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

impl<S: State> Serialize for StateSnapshot<S> {
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
        map.serialize_entry("state", &())?;
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
        mut metadata,
        created_at,
    } = head;
    for key in metadata::BOOKKEEPING {
        metadata.extra.remove(key);
    }
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
