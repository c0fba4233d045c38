//! An events stream: LangGraph's `astream_events(version="v2")` for a run.
//!
//! [`CompiledGraph::stream_events`] turns a run's stream (its values, updates, debug task
//! events and message chunks, the subgraphs' included) into start, stream and end events of
//! nested runs: the graph, each node task, each subgraph a task calls, the chat-model calls
//! a node makes with [`Context::invoke_model`] (and tokens it streams) and the custom events
//! it dispatches with [`Context::dispatch_custom_event`].

use std::collections::{HashMap, VecDeque};

use futures::{Stream, StreamExt, stream};
use serde::Serialize;
use serde_json::{Map, Value, json};
use waypoint_checkpoint::BoxError;

use crate::config::RunConfig;
use crate::context::Context;
use crate::error::Result;
use crate::interrupt::Input;
use crate::messages::{AiMessage, AiMessageChunk, Message};
use crate::names::NS_SEP;
use crate::prebuilt::{ChatModel, ToolSpec};
use crate::pregel::CompiledGraph;
use crate::state::State;
use crate::stream::{Emitter, RUN_EVENT, StreamMode, Streamed};

/// The name of a graph's runs, LangGraph's default graph name.
pub const GRAPH_NAME: &str = "LangGraph";

/// What happened to a run (LangGraph's `event` key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum EventKind {
    /// A graph or node run started; `data` has its `input`.
    #[serde(rename = "on_chain_start")]
    ChainStart,
    /// A run produced a chunk of output; `data` has the `chunk`.
    #[serde(rename = "on_chain_stream")]
    ChainStream,
    /// A run finished; `data` has its `output`.
    #[serde(rename = "on_chain_end")]
    ChainEnd,
    /// A chat-model call started; `data` has its `input` (`{"messages": [[...]]}`).
    #[serde(rename = "on_chat_model_start")]
    ChatModelStart,
    /// A node streamed a message chunk (an LLM token); `data` has the `chunk`.
    #[serde(rename = "on_chat_model_stream")]
    ChatModelStream,
    /// A chat-model call finished; `data` has its `input` and its `output` (the AI message).
    #[serde(rename = "on_chat_model_end")]
    ChatModelEnd,
    /// A node dispatched a custom event; `name` is the event's, `data` the data it sent.
    #[serde(rename = "on_custom_event")]
    CustomEvent,
}

/// The run name of chat-model calls (LangChain names them by the model's class).
pub const CHAT_MODEL_NAME: &str = "ChatModel";

/// One event of [`CompiledGraph::stream_events`], serialized as LangGraph's v2 `StreamEvent`:
/// `{"event", "name", "run_id", "parent_ids", "tags", "metadata", "data"}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// What happened.
    pub event: EventKind,
    /// The run's name: [`GRAPH_NAME`] for a graph, the node's name for a node task and the
    /// tokens it streams outside a model call, [`CHAT_MODEL_NAME`] for a chat-model call, the
    /// event's name for a custom event.
    pub name: String,
    /// The run's id (a UUID; the root graph's is `config.run_id` when set; a custom event's
    /// is the id of the node task that dispatched it).
    pub run_id: String,
    /// The ids of the runs it is nested in, outermost first (empty for the root graph).
    pub parent_ids: Vec<String>,
    /// The run's tags: `graph:step:<step>` for a node task (and the subgraphs it calls),
    /// plus `langsmith:hidden` for the `__start__` task.
    pub tags: Vec<String>,
    /// `thread_id` (when the run has one) and, for a node task and what it calls,
    /// `langgraph_step`, `langgraph_node`, `langgraph_triggers`, `langgraph_path` and
    /// `langgraph_checkpoint_ns`.
    pub metadata: Map<String, Value>,
    /// `{"input"}`, `{"chunk"}` or `{"output"}` (`{"output", "input"}` for a chat model's
    /// end) by [`Event::event`]; a custom event's data as dispatched.
    pub data: Value,
}

/// A run events are reported for: a graph or a node task.
#[derive(Clone)]
struct RunInfo {
    name: String,
    run_id: String,
    parent_ids: Vec<String>,
    tags: Vec<String>,
    metadata: Map<String, Value>,
}

impl RunInfo {
    /// A root graph run, with `run_id` or a new one.
    fn root(run_id: Option<String>, metadata: Map<String, Value>) -> RunInfo {
        RunInfo {
            name: GRAPH_NAME.into(),
            run_id: run_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            parent_ids: Vec::new(),
            tags: Vec::new(),
            metadata,
        }
    }

    fn event(&self, event: EventKind, key: &str, value: Value) -> Event {
        Event {
            event,
            name: self.name.clone(),
            run_id: self.run_id.clone(),
            parent_ids: self.parent_ids.clone(),
            tags: self.tags.clone(),
            metadata: self.metadata.clone(),
            data: json!({ key: value }),
        }
    }

    /// A run nested in this one.
    fn child(&self, name: &str, tags: Vec<String>, metadata: Map<String, Value>) -> RunInfo {
        let mut parent_ids = self.parent_ids.clone();
        parent_ids.push(self.run_id.clone());
        RunInfo {
            name: name.to_owned(),
            run_id: uuid::Uuid::new_v4().to_string(),
            parent_ids,
            tags,
            metadata,
        }
    }
}

/// A graph run: the root graph, or a subgraph in the namespace of the task calling it.
struct GraphRun {
    info: RunInfo,
    /// Its state after its last step: its output.
    values: Value,
}

/// Turns a run's stream parts into events.
struct Events {
    /// Graph runs by checkpoint namespace (`""` for the root, a subgraph's otherwise, which
    /// is the namespace of the task that called it).
    graphs: HashMap<String, GraphRun>,
    /// Node tasks by their own checkpoint namespace.
    tasks: HashMap<String, RunInfo>,
    /// The run ids of chat-model streams outside model calls, by message id.
    models: HashMap<String, String>,
    /// The chat-model call under way in a task, by the task's checkpoint namespace.
    calls: HashMap<String, RunInfo>,
}

/// The trigger of a `Send`'s task and the first level of its path (LangGraph's `PUSH`).
const PUSH: &str = "__pregel_push";

/// The modes an events stream reads from its run.
const MODES: [StreamMode; 4] = [
    StreamMode::Values,
    StreamMode::Updates,
    StreamMode::Debug,
    StreamMode::Messages,
];

impl Events {
    /// The translator of a run on `config`, and the root graph's start event.
    fn new(config: &RunConfig, input: Value) -> (Self, Event) {
        let mut metadata = Map::new();
        if let Some(thread) = &config.thread_id {
            metadata.insert("thread_id".into(), json!(thread));
        }
        let info = RunInfo::root(config.run_id.clone(), metadata);
        let start = info.event(EventKind::ChainStart, "input", input);
        let root = GraphRun {
            info,
            values: Value::Null,
        };
        let events = Events {
            graphs: HashMap::from([(String::new(), root)]),
            tasks: HashMap::new(),
            models: HashMap::new(),
            calls: HashMap::new(),
        };
        (events, start)
    }

    /// The events one stream part of namespace `ns` gives.
    fn part(&mut self, ns: String, mode: StreamMode, data: Value, out: &mut Vec<Event>) {
        match mode {
            StreamMode::Debug => self.debug(ns, data, out),
            StreamMode::Values => self.graph(ns, Value::Null, out).values = data,
            StreamMode::Updates => {
                let graph = self.graph(ns, Value::Null, out);
                out.push(graph.info.event(EventKind::ChainStream, "chunk", data));
            }
            StreamMode::Messages => self.message(data, out),
            StreamMode::Custom => {}
        }
    }

    /// The graph run of namespace `ns`, started (with `input`) if this is its first part.
    fn graph(&mut self, ns: String, input: Value, out: &mut Vec<Event>) -> &mut GraphRun {
        let caller = match self.graphs.contains_key(&ns) {
            true => None,
            false => (self.tasks.get(&ns)).or(self.graphs.get("").map(|root| &root.info)),
        }
        .cloned();
        self.graphs.entry(ns).or_insert_with(|| {
            let info = match caller {
                Some(caller) => {
                    caller.child(GRAPH_NAME, caller.tags.clone(), caller.metadata.clone())
                }
                None => RunInfo::root(None, Map::new()),
            };
            out.push(info.event(EventKind::ChainStart, "input", input));
            GraphRun {
                info,
                values: Value::Null,
            }
        })
    }

    /// A debug event: a task starts, or a step's task ends.
    fn debug(&mut self, ns: String, data: Value, out: &mut Vec<Event>) {
        let step = data.get("step").cloned().unwrap_or_default();
        let payload = data.get("payload").cloned().unwrap_or_default();
        let name = payload["name"].as_str().unwrap_or_default().to_owned();
        let id = payload["id"].as_str().unwrap_or_default();
        let level = format!("{name}:{id}");
        let task_ns = match ns.as_str() {
            "" => level,
            ns => format!("{ns}{NS_SEP}{level}"),
        };
        match data.get("type").and_then(Value::as_str) {
            Some(RUN_EVENT) => self.run_event(payload, out),
            Some("task") => {
                let input = payload.get("input").cloned().unwrap_or_default();
                let start = name == crate::START;
                let graph = self.graph(ns, if start { input.clone() } else { Value::Null }, out);
                let triggers = payload.get("triggers").cloned().unwrap_or(json!([]));
                let path = match triggers[0].as_str() {
                    Some(PUSH) => json!([PUSH]),
                    _ => json!(["__pregel_pull", name]),
                };
                let mut metadata = graph.info.metadata.clone();
                metadata.extend([
                    ("langgraph_step".to_owned(), step.clone()),
                    ("langgraph_node".to_owned(), json!(name)),
                    ("langgraph_triggers".to_owned(), triggers),
                    ("langgraph_path".to_owned(), path),
                    ("langgraph_checkpoint_ns".to_owned(), json!(task_ns)),
                ]);
                let mut tags = vec![format!("graph:step:{step}")];
                if start {
                    tags.push("langsmith:hidden".into());
                }
                let task = graph.info.child(&name, tags, metadata);
                out.push(task.event(EventKind::ChainStart, "input", input));
                self.tasks.insert(task_ns, task);
            }
            Some("task_result") => {
                let Some(task) = self.tasks.remove(&task_ns) else {
                    return;
                };
                // The subgraphs the task called end before it, innermost first.
                let prefix = format!("{task_ns}{NS_SEP}");
                let mut nested: Vec<String> = (self.graphs.keys())
                    .filter(|ns| **ns == task_ns || ns.starts_with(&prefix))
                    .cloned()
                    .collect();
                nested.sort_by_key(|ns| std::cmp::Reverse(ns.len()));
                for ns in nested {
                    if let Some(graph) = self.graphs.remove(&ns) {
                        out.push(
                            graph
                                .info
                                .event(EventKind::ChainEnd, "output", graph.values),
                        );
                    }
                }
                let result = payload.get("result").cloned().unwrap_or_default();
                out.push(task.event(EventKind::ChainStream, "chunk", result.clone()));
                out.push(task.event(EventKind::ChainEnd, "output", result));
            }
            _ => {}
        }
    }

    /// A message chunk a node streamed, or a message it returned: `[message, metadata]`.
    fn message(&mut self, data: Value, out: &mut Vec<Event>) {
        let [chunk, metadata] = <[Value; 2]>::try_from(match data {
            Value::Array(pair) => pair,
            _ => return,
        })
        .unwrap_or_default();
        // Other messages a node returns (a tool's answer) are no model's output.
        if chunk["type"] != "AIMessageChunk" {
            return;
        }
        let task_ns = metadata["langgraph_checkpoint_ns"]
            .as_str()
            .unwrap_or_default();
        if let Some(call) = self.calls.get(task_ns) {
            out.push(call.event(EventKind::ChatModelStream, "chunk", chunk));
            return;
        }
        let Some(task) = self.tasks.get(task_ns) else {
            return;
        };
        let mut model = task.child(&task.name, task.tags.clone(), task.metadata.clone());
        if let Some(id) = chunk.get("id").and_then(Value::as_str) {
            model.run_id = (self.models.entry(id.to_owned()))
                .or_insert(model.run_id)
                .clone();
        }
        out.push(model.event(EventKind::ChatModelStream, "chunk", chunk));
    }

    /// An event a node reported (`{"checkpoint_ns", "event": {"event", "name", "run_id"?,
    /// "data"}}`): a chat-model call's start or end, or a custom event.
    fn run_event(&mut self, payload: Value, out: &mut Vec<Event>) {
        let task_ns = payload["checkpoint_ns"].as_str().unwrap_or_default();
        let Some(task) = self.tasks.get(task_ns) else {
            return;
        };
        let event = &payload["event"];
        let name = event["name"].as_str().unwrap_or_default();
        let data = event["data"].clone();
        match event["event"].as_str() {
            Some("on_chat_model_start") => {
                let mut call = task.child(name, task.tags.clone(), task.metadata.clone());
                if let Some(run_id) = event["run_id"].as_str() {
                    call.run_id = run_id.to_owned();
                }
                out.push(Event {
                    data,
                    ..call.event(EventKind::ChatModelStart, "input", Value::Null)
                });
                self.calls.insert(task_ns.to_owned(), call);
            }
            Some("on_chat_model_end") => {
                if let Some(call) = self.calls.remove(task_ns) {
                    out.push(Event {
                        data,
                        ..call.event(EventKind::ChatModelEnd, "output", Value::Null)
                    });
                }
            }
            Some("on_custom_event") => out.push(Event {
                name: name.to_owned(),
                data,
                ..task.event(EventKind::CustomEvent, "data", Value::Null)
            }),
            _ => {}
        }
    }

    /// The root graph's end (and that of any subgraph still open, innermost first).
    fn finish(mut self) -> Vec<Event> {
        let mut open: Vec<(String, GraphRun)> = self.graphs.drain().collect();
        open.sort_by_key(|(ns, _)| std::cmp::Reverse(ns.len()));
        open.into_iter()
            .map(|(_, graph)| {
                graph
                    .info
                    .event(EventKind::ChainEnd, "output", graph.values)
            })
            .collect()
    }
}

impl<S: State> CompiledGraph<S> {
    /// Runs the graph like [`CompiledGraph::stream`], yielding LangGraph's v2 events
    /// (`astream_events(version="v2")`) as the run goes.
    ///
    /// The graph run starts first (`on_chain_start`, `data.input` the input) and ends last
    /// (`on_chain_end`, `data.output` the final state). Between them, each step's tasks start
    /// (with their input state: the run's input for `__start__`), each subgraph a task calls
    /// starts and ends inside it, and once the step's tasks all finished each sends its update
    /// (`on_chain_stream`) and ends with it (`on_chain_end`), then the graph sends
    /// `{node: update}` (`on_chain_stream`; `{"__interrupt__": [...]}` when it pauses). A
    /// chat-model call a node makes with [`Context::invoke_model`] is a run nested in the
    /// node's task (`on_chat_model_start`, `on_chat_model_stream` for each chunk the node
    /// streams during the call, its reply included, `on_chat_model_end`); message chunks a
    /// node streams outside such a call are `on_chat_model_stream` events, one run per message
    /// id, nested in the task. A custom event a node dispatches
    /// ([`Context::dispatch_custom_event`]) is `on_custom_event`, with the task's run id. `parent_ids` nest every run in the graph runs and tasks around
    /// it.
    ///
    /// A failed run ends the stream with its error, as LangGraph's `astream_events` raises
    /// it: the failed task and the graphs around it get no end event. A task that pauses
    /// (an interrupt) gets none either; the graph still ends.
    pub fn stream_events(
        &self,
        input: impl Into<Input<S>>,
        config: &RunConfig,
    ) -> impl Stream<Item = Result<Event>> + Send + 'static {
        let input = input.into();
        let input_json = match &input {
            Input::Update(update) => serde_json::to_value(update).unwrap_or_default(),
            // LangGraph's `Command` input as JSON: its update and resume.
            Input::Command(command) => json!({
                "update": serde_json::to_value(&command.update).unwrap_or_default(),
                "resume": serde_json::to_value(&command.resume).unwrap_or_default(),
            }),
            Input::Continue => Value::Null,
        };
        let (events, start) = Events::new(config, input_json);
        let (emitter, rx) = Emitter::channel(&MODES, true);
        let parts = self
            .spawn_stream(input, config, (emitter.for_events(), rx))
            .boxed();
        let queue = VecDeque::from([Ok(start)]);
        stream::unfold(
            (parts, Some(events), queue),
            |(mut parts, mut events, mut queue)| async move {
                loop {
                    if let Some(event) = queue.pop_front() {
                        return Some((event, (parts, events, queue)));
                    }
                    let translator = events.as_mut()?;
                    let mut out = Vec::new();
                    match parts.next().await {
                        Some(Ok(part)) => {
                            let ns = part.namespace().join(NS_SEP);
                            translator.part(ns, part.mode(), part.data(), &mut out);
                        }
                        Some(Err(err)) => {
                            queue.push_back(Err(err));
                            events = None;
                        }
                        None => out = events.take().map(Events::finish).unwrap_or_default(),
                    }
                    queue.extend(out.into_iter().map(Ok));
                }
            },
        )
    }
}

impl Context {
    /// Sends a custom event named `name` with `data` (LangChain's `adispatch_custom_event`):
    /// an events stream ([`CompiledGraph::stream_events`]) shows it as `on_custom_event`, with
    /// this node's task as its run; other streams drop it.
    pub fn dispatch_custom_event(&self, name: &str, data: impl Serialize) {
        let data = serde_json::to_value(data).unwrap_or_else(|e| Value::String(e.to_string()));
        self.report(json!({"event": "on_custom_event", "name": name, "data": data}));
    }

    /// Calls `model` as a chat-model run of this node (what every prebuilt caller of a model
    /// uses): an events stream shows `on_chat_model_start`, the reply as one
    /// `on_chat_model_stream` chunk and `on_chat_model_end`, and the `messages` stream gets
    /// the reply when it comes, before the node ends. A reply without an id gets LangChain's
    /// `run-<call's run id>`, so it is streamed once.
    pub async fn invoke_model(
        &self,
        model: &dyn ChatModel,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> std::result::Result<AiMessage, BoxError> {
        let run_id = uuid::Uuid::new_v4().to_string();
        let input = json!({ "messages": [messages] });
        self.report(json!({
            "event": "on_chat_model_start", "name": CHAT_MODEL_NAME, "run_id": run_id,
            "data": {"input": input},
        }));
        let mut reply = model.invoke(messages, tools).await?;
        reply.id.get_or_insert_with(|| format!("run-{run_id}"));
        self.stream_message(AiMessageChunk::from(reply.clone()));
        self.report(json!({
            "event": "on_chat_model_end", "name": CHAT_MODEL_NAME, "run_id": run_id,
            "data": {"output": Message::Ai(reply.clone()), "input": input},
        }));
        Ok(reply)
    }

    /// Sends `event` to the run's events stream, if it feeds one.
    fn report(&self, event: Value) {
        self.to_message_sink(Streamed::Event(event), None);
    }
}
