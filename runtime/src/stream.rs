//! Streaming a run: state values, per-node updates, custom data and debug events.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::config::{deserialize_by_name, parse_name};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::messages::{AiMessageChunk, Message};
use crate::names::NS_SEP;
use crate::state::State;

/// Where `write_custom` values go: the node name and the value.
pub(crate) type CustomSink = Arc<dyn Fn(&str, Value) + Send + Sync>;

/// Where `stream_message` chunks, and the events a node reports for an events stream, go.
pub(crate) type MessageSink = Arc<dyn Fn(Streamed, MessageMetadata) + Send + Sync>;

/// What a node sends to its [`MessageSink`].
pub(crate) enum Streamed {
    /// A piece of a message, for the `messages` stream.
    Chunk(AiMessageChunk),
    /// An event for an events stream ([`crate::CompiledGraph::stream_events`]), dropped by
    /// other streams: `{"event", "name", "run_id"?, "data"}`.
    Event(Value),
}

/// The debug event type carrying a node's [`Streamed::Event`] to an events stream.
pub(crate) const RUN_EVENT: &str = "run_event";

/// What a stream carries (LangGraph's `stream_mode`).
///
/// Written and parsed by LangGraph's names (`"values"`, `"updates"`, `"custom"`, `"debug"`,
/// `"messages"`), in JSON as in [`FromStr`] and [`Display`](fmt::Display). `"messages-tuple"`,
/// the LangGraph API's name for the mode that streams `[chunk, metadata]` pairs (the Python
/// library's `"messages"`), also reads as [`StreamMode::Messages`]. LangGraph's other modes
/// (`"checkpoints"`, `"tasks"`, `"events"`) are not modes here and are an error; its
/// `"events"` (`astream_events`) is [`crate::CompiledGraph::stream_events`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamMode {
    /// The whole state after every super-step.
    Values,
    /// Each node's update, as the node returned it.
    Updates,
    /// Values nodes send with [`crate::Context::write_custom`].
    Custom,
    /// Checkpoint and task events as JSON.
    Debug,
    /// Message chunks nodes stream with [`crate::Context::stream_message`] (an LLM's
    /// tokens), and the messages nodes return that were not streamed (AI, tool, human and
    /// system messages, each once), each with where it came from.
    Messages,
}

impl StreamMode {
    /// Every mode.
    pub const ALL: [StreamMode; 5] = [
        StreamMode::Values,
        StreamMode::Updates,
        StreamMode::Custom,
        StreamMode::Debug,
        StreamMode::Messages,
    ];

    /// LangGraph's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamMode::Values => "values",
            StreamMode::Updates => "updates",
            StreamMode::Custom => "custom",
            StreamMode::Debug => "debug",
            StreamMode::Messages => "messages",
        }
    }

    fn bit(self) -> u8 {
        match self {
            StreamMode::Values => 1,
            StreamMode::Updates => 2,
            StreamMode::Custom => 4,
            StreamMode::Debug => 8,
            StreamMode::Messages => 16,
        }
    }
}

impl fmt::Display for StreamMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StreamMode {
    type Err = Error;

    /// A mode by LangGraph's name; anything else is [`Error::InvalidConfig`] naming the
    /// valid ones.
    fn from_str(name: &str) -> Result<Self> {
        let aliases = [("messages-tuple", StreamMode::Messages)];
        parse_name(
            "stream mode",
            &StreamMode::ALL,
            StreamMode::as_str,
            &aliases,
            name,
        )
    }
}

impl Serialize for StreamMode {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StreamMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserialize_by_name(deserializer)
    }
}

/// One item of a stream; [`StreamPart::mode`] says which mode produced it.
///
/// Its JSON is an event of the LangGraph API's stream, `{"event": mode, "data": ...}` (the
/// SDK's `StreamPart`; a server sends it as an SSE `event:` and `data:`):
///
/// | part        | `event`     | `data`                                   |
/// |-------------|-------------|------------------------------------------|
/// | `Values`    | `values`    | the state                                |
/// | `Updates`   | `updates`   | `{node: update}` (`null` for no update)  |
/// | `Custom`    | `custom`    | the value (LangGraph does not name the node) |
/// | `Debug`     | `debug`     | the event                                |
/// | `Messages`  | `messages`  | `[chunk, metadata]`                      |
/// | `Returned`  | `messages`  | `[message, metadata]`                    |
/// | `Interrupt` | `updates`   | `{"__interrupt__": [interrupt, ...]}`    |
/// | `Subgraph`  | `{mode}\|{namespace levels joined by \|}` | the subgraph part's `data` |
#[derive(Clone, Debug)]
// Message chunks are the common item (one per token): boxing them would add an allocation each.
#[allow(clippy::large_enum_variant)]
pub enum StreamPart<S: State> {
    /// The state after a super-step.
    Values(S),
    /// A node's update (`None` when it returned no update).
    Updates {
        /// The node.
        node: String,
        /// Its update.
        update: Option<S::Update>,
    },
    /// A value a node wrote to the custom stream.
    Custom {
        /// The node that wrote it.
        node: String,
        /// The value.
        value: Value,
    },
    /// A debug event: `{"type": "checkpoint" | "task" | "task_result", "step", "payload"}`.
    Debug(Value),
    /// A piece of a message a node is streaming.
    Messages {
        /// The piece; pieces with one id add up (`+`) to one message.
        chunk: AiMessageChunk,
        /// Where it came from.
        metadata: MessageMetadata,
    },
    /// A whole message other than an AI one that a node returned without streaming it (a
    /// tool's answer, a human or system message), sent once by the `messages` mode as
    /// LangGraph's does.
    Returned {
        /// The message.
        message: Message,
        /// Where it came from.
        metadata: MessageMetadata,
    },
    /// The run paused: LangGraph's `__interrupt__` event, with the pending interrupts
    /// (empty for a static breakpoint). Sent with the `updates` or `values` modes.
    Interrupt(Vec<Interrupt>),
    /// A part a subgraph emitted, when streaming with subgraphs
    /// ([`crate::CompiledGraph::stream_subgraphs`]); its data is the JSON `data` the same
    /// part of the subgraph's own stream has.
    Subgraph {
        /// Where it came from: the subgraph's checkpoint namespace split into levels, as
        /// LangGraph's namespace tuple (`["node:<task id>"]` for a subgraph of the root).
        namespace: Vec<String>,
        /// The mode that produced it.
        mode: StreamMode,
        /// The part's data (for `messages`, `[chunk, metadata]`).
        data: Value,
    },
}

impl<S: State> StreamPart<S> {
    /// The mode that produced this item.
    pub fn mode(&self) -> StreamMode {
        match self {
            StreamPart::Values(_) => StreamMode::Values,
            StreamPart::Updates { .. } => StreamMode::Updates,
            StreamPart::Custom { .. } => StreamMode::Custom,
            StreamPart::Debug(_) => StreamMode::Debug,
            StreamPart::Messages { .. } | StreamPart::Returned { .. } => StreamMode::Messages,
            StreamPart::Interrupt(_) => StreamMode::Updates,
            StreamPart::Subgraph { mode, .. } => *mode,
        }
    }

    /// The JSON `data` of the item's event (an unserializable value gives its error text).
    pub(crate) fn data(&self) -> Value {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut event)) => event.remove("data").unwrap_or_default(),
            Ok(_) => Value::Null,
            Err(err) => Value::String(err.to_string()),
        }
    }

    /// Where this item came from: empty for the streamed graph itself, a subgraph's
    /// namespace otherwise (LangGraph's first element of a `subgraphs=True` item).
    pub fn namespace(&self) -> &[String] {
        match self {
            StreamPart::Subgraph { namespace, .. } => namespace,
            _ => &[],
        }
    }
}

impl<S: State> Serialize for StreamPart<S> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        match self.namespace() {
            [] => map.serialize_entry("event", self.mode().as_str())?,
            namespace => map.serialize_entry(
                "event",
                &format!("{}{NS_SEP}{}", self.mode(), namespace.join(NS_SEP)),
            )?,
        }
        match self {
            StreamPart::Values(state) => map.serialize_entry("data", state)?,
            StreamPart::Updates { node, update } => {
                map.serialize_entry("data", &std::collections::BTreeMap::from([(node, update)]))?
            }
            StreamPart::Custom { value, .. } => map.serialize_entry("data", value)?,
            StreamPart::Debug(event) => map.serialize_entry("data", event)?,
            StreamPart::Messages { chunk, metadata } => {
                map.serialize_entry("data", &(chunk, metadata))?
            }
            StreamPart::Returned { message, metadata } => {
                map.serialize_entry("data", &(message, metadata))?
            }
            StreamPart::Interrupt(interrupts) => map.serialize_entry(
                "data",
                &std::collections::BTreeMap::from([("__interrupt__", interrupts)]),
            )?,
            StreamPart::Subgraph { data, .. } => map.serialize_entry("data", data)?,
        }
        map.end()
    }
}

/// Where a streamed message chunk came from (LangGraph's `langgraph_*` metadata keys).
///
/// Its JSON has LangGraph's keys for what Waypoint knows, and the message id:
/// `{"langgraph_node": node, "langgraph_step": step, "langgraph_checkpoint_ns": checkpoint_ns,
/// "id": id}`. (LangGraph's `langgraph_triggers`, `langgraph_path` and the model's `ls_*`
/// keys are not known to the runtime; the graph's namespace is `checkpoint_ns` without its
/// last level.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageMetadata {
    /// The node streaming it.
    pub node: String,
    /// The super-step it runs in.
    pub step: i64,
    /// The checkpoint namespace of the node's graph (empty at the root).
    pub namespace: String,
    /// The streaming task's own checkpoint namespace, `{graph ns}|{node}:{task id}`
    /// (`{node}:{task id}` at the root): LangGraph's `langgraph_checkpoint_ns`.
    pub checkpoint_ns: String,
    /// The message's id, shared by all its chunks.
    pub id: Option<String>,
}

impl Serialize for MessageMetadata {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("langgraph_node", &self.node)?;
        map.serialize_entry("langgraph_step", &self.step)?;
        map.serialize_entry("langgraph_checkpoint_ns", &self.checkpoint_ns)?;
        map.serialize_entry("id", &self.id)?;
        map.end()
    }
}

/// Where a subgraph's parts go when its root streams with subgraphs: the part's namespace,
/// mode and JSON data.
pub(crate) type NestedSink = Arc<dyn Fn(Vec<String>, StreamMode, Value) + Send + Sync>;

/// Where a run's stream items go.
type PartSink<S> = Arc<dyn Fn(StreamPart<S>) + Send + Sync>;

/// Ids of the messages already in the `messages` stream, shared by a run and its subgraphs.
type Seen = Arc<Mutex<HashSet<String>>>;

/// What a subgraph's run streams into: its root's stream (LangGraph's `subgraphs=True`).
#[derive(Clone)]
pub(crate) struct SubgraphStream {
    modes: u8,
    sink: NestedSink,
    seen: Seen,
    events: bool,
}

/// An emitter and the stream receiving its items.
pub(crate) type PartChannel<S> = (Emitter<S>, UnboundedReceiver<Result<StreamPart<S>>>);

/// Where a run sends stream items; a no-op for `invoke`.
pub(crate) struct Emitter<S: State> {
    modes: u8,
    send: Option<PartSink<S>>,
    /// The root stream, to end with a failed run's error.
    tx: Option<UnboundedSender<Result<StreamPart<S>>>>,
    /// Where the run's subgraphs stream, when they do.
    subgraphs: Option<SubgraphStream>,
    seen: Seen,
    /// Whether the run feeds an events stream (which takes nodes' [`Streamed::Event`]s).
    events: bool,
}

impl<S: State> Emitter<S> {
    /// An emitter that sends nothing (`invoke`, subgraphs not streamed).
    pub(crate) fn none() -> Self {
        Emitter {
            modes: 0,
            send: None,
            tx: None,
            subgraphs: None,
            seen: Seen::default(),
            events: false,
        }
    }

    /// An emitter of `modes`, and the stream that receives its items; with `subgraphs`, the
    /// parts of every subgraph the run calls too.
    pub(crate) fn channel(modes: &[StreamMode], subgraphs: bool) -> PartChannel<S> {
        let (tx, rx) = unbounded();
        let modes = modes.iter().fold(0, |bits, m| bits | m.bit());
        let seen = Seen::default();
        let root = tx.clone();
        // A dropped stream only means the consumer stopped reading; the run goes on.
        let send: PartSink<S> = Arc::new(move |part| {
            let _ = root.unbounded_send(Ok(part));
        });
        let subgraphs = subgraphs.then(|| {
            let send = Arc::clone(&send);
            SubgraphStream {
                modes,
                sink: Arc::new(move |namespace, mode, data| {
                    send(StreamPart::Subgraph {
                        namespace,
                        mode,
                        data,
                    })
                }),
                seen: Arc::clone(&seen),
                events: false,
            }
        });
        let emitter = Emitter {
            modes,
            send: Some(send),
            tx: Some(tx),
            subgraphs,
            seen,
            events: false,
        };
        (emitter, rx)
    }

    /// The same emitter feeding an events stream: nodes' [`Streamed::Event`]s (and their
    /// subgraphs') go to it as debug parts of type [`RUN_EVENT`].
    pub(crate) fn for_events(mut self) -> Self {
        self.events = true;
        if let Some(subgraphs) = &mut self.subgraphs {
            subgraphs.events = true;
        }
        self
    }

    /// The emitter of a subgraph run in checkpoint namespace `ns`: its parts go to `stream`
    /// with the namespace split into levels, or nowhere.
    pub(crate) fn nested(stream: Option<&SubgraphStream>, ns: &str) -> Self {
        let Some(stream) = stream else {
            return Emitter::none();
        };
        let namespace: Vec<String> = ns.split(NS_SEP).map(str::to_owned).collect();
        let sink = Arc::clone(&stream.sink);
        Emitter {
            modes: stream.modes,
            send: Some(Arc::new(move |part: StreamPart<S>| {
                sink(namespace.clone(), part.mode(), part.data())
            })),
            tx: None,
            subgraphs: Some(stream.clone()),
            seen: Arc::clone(&stream.seen),
            events: stream.events,
        }
    }

    /// This emitter, sending also to `stream` (the root's, streaming with subgraphs) as the
    /// subgraph run in namespace `ns`: a graph a node streams reaches the node's own stream
    /// and its root's, each in the modes it asked for (LangGraph's `subgraphs=True`).
    pub(crate) fn also(&self, stream: Option<&SubgraphStream>, ns: &str) -> Self {
        let root = Emitter::nested(stream, ns);
        let (Some(own), Some(theirs)) = (self.send.clone(), root.send.clone()) else {
            return Emitter {
                send: self.send.clone(),
                tx: self.tx.clone(),
                subgraphs: self.subgraphs.clone(),
                seen: Arc::clone(&self.seen),
                ..*self
            };
        };
        let (own_modes, root_modes) = (self.modes, root.modes);
        let send: PartSink<S> = Arc::new(move |part: StreamPart<S>| {
            let interrupt = matches!(part, StreamPart::Interrupt(_));
            if takes(root_modes, part.mode(), interrupt) {
                theirs(part.clone());
            }
            if takes(own_modes, part.mode(), interrupt) {
                own(part);
            }
        });
        let subgraphs = match (self.subgraphs.clone(), root.subgraphs) {
            (Some(own), Some(theirs)) => Some(SubgraphStream {
                modes: own.modes | theirs.modes,
                sink: Arc::new(
                    move |namespace: Vec<String>, mode: StreamMode, data: Value| {
                        let interrupt = data.get("__interrupt__").is_some();
                        if takes(theirs.modes, mode, interrupt) {
                            (theirs.sink)(namespace.clone(), mode, data.clone());
                        }
                        if takes(own.modes, mode, interrupt) {
                            (own.sink)(namespace, mode, data);
                        }
                    },
                ),
                seen: theirs.seen,
                events: own.events || theirs.events,
            }),
            (own, theirs) => own.or(theirs),
        };
        Emitter {
            modes: own_modes | root_modes,
            send: Some(send),
            tx: self.tx.clone(),
            subgraphs,
            seen: root.seen,
            events: self.events || root.events,
        }
    }

    /// Where the run's subgraphs stream: `None` unless streaming with subgraphs.
    pub(crate) fn subgraph_stream(&self) -> Option<SubgraphStream> {
        self.subgraphs.clone()
    }

    /// Ends the stream with a failed run's error.
    pub(crate) fn fail(&self, err: crate::error::Error) {
        if let Some(tx) = &self.tx {
            let _ = tx.unbounded_send(Err(err));
        }
    }

    pub(crate) fn wants(&self, mode: StreamMode) -> bool {
        self.modes & mode.bit() != 0
    }

    fn send(&self, part: StreamPart<S>) {
        if let Some(send) = &self.send {
            send(part);
        }
    }

    pub(crate) fn values(&self, state: &S) {
        if self.wants(StreamMode::Values) {
            let values = state.output().unwrap_or_else(|| state.clone());
            self.send(StreamPart::Values(values));
        }
    }

    pub(crate) fn update(&self, node: &str, update: Option<S::Update>) {
        self.send(StreamPart::Updates {
            node: node.to_owned(),
            update,
        });
    }

    pub(crate) fn interrupts(&self, interrupts: &[Interrupt]) {
        if self.wants(StreamMode::Updates) || self.wants(StreamMode::Values) {
            self.send(StreamPart::Interrupt(interrupts.to_vec()));
        }
    }

    pub(crate) fn debug(&self, event: impl FnOnce() -> Value) {
        if self.wants(StreamMode::Debug) {
            self.send(StreamPart::Debug(event()));
        }
    }

    pub(crate) fn message_sink(&self) -> Option<MessageSink> {
        if !self.wants(StreamMode::Messages) {
            return None;
        }
        let send = self.send.clone()?;
        let seen = Arc::clone(&self.seen);
        let events = self.events;
        Some(Arc::new(
            move |streamed: Streamed, metadata: MessageMetadata| match streamed {
                Streamed::Chunk(chunk) => {
                    if let Some(id) = &chunk.id {
                        seen.lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .insert(id.clone());
                    }
                    send(StreamPart::Messages { chunk, metadata });
                }
                Streamed::Event(event) if events => send(StreamPart::Debug(serde_json::json!({
                    "type": RUN_EVENT,
                    "step": metadata.step,
                    "payload": {"checkpoint_ns": metadata.checkpoint_ns, "event": event},
                }))),
                Streamed::Event(_) => {}
            },
        ))
    }

    /// Sends the messages a node returned whole in `update` to the `messages` stream, each as
    /// one part (an AI message as one chunk, any other as [`StreamPart::Returned`]), unless
    /// already there (streamed chunk by chunk, or sent before) or in the node's `input`
    /// (LangGraph's `StreamMessagesHandler` on a node's end).
    pub(crate) fn whole_messages(&self, input: &S, update: &S::Update, metadata: &MessageMetadata) {
        if !self.wants(StreamMode::Messages) {
            return;
        }
        let Ok(update) = serde_json::to_value(update) else {
            return;
        };
        let input = serde_json::to_value(input).unwrap_or_default();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let known: HashSet<&str> = message_objects(&input)
            .filter_map(|m| m.get("id").and_then(Value::as_str))
            .collect();
        for object in message_objects(&update) {
            let message = match Message::from_json(object.clone()) {
                Ok(Message::Remove(_)) | Err(_) => continue,
                Ok(message) => message,
            };
            if let Some(id) = message.id()
                && (known.contains(id) || !seen.insert(id.to_owned()))
            {
                continue;
            }
            let metadata = MessageMetadata {
                id: message.id().map(str::to_owned),
                ..metadata.clone()
            };
            self.send(match message {
                Message::Ai(message) => StreamPart::Messages {
                    chunk: AiMessageChunk::from(message),
                    metadata,
                },
                message => StreamPart::Returned { message, metadata },
            });
        }
    }

    pub(crate) fn custom_sink(&self) -> Option<CustomSink> {
        if !self.wants(StreamMode::Custom) {
            return None;
        }
        let send = self.send.clone()?;
        Some(Arc::new(move |node: &str, value: Value| {
            send(StreamPart::Custom {
                node: node.to_owned(),
                value,
            });
        }))
    }
}

/// Whether a stream of `modes` takes a part of `mode` (interrupts come in `updates` and
/// `values` alike, as [`Emitter::interrupts`] sends them).
fn takes(modes: u8, mode: StreamMode, interrupt: bool) -> bool {
    let wanted = if interrupt {
        StreamMode::Updates.bit() | StreamMode::Values.bit()
    } else {
        mode.bit()
    };
    modes & wanted != 0
}

/// The objects among a state's or an update's top-level values, or in its top-level lists,
/// that look like messages (have a `type`): where LangGraph looks for a node's messages.
fn message_objects(value: &Value) -> impl Iterator<Item = &Value> {
    let values = value.as_object().into_iter().flat_map(|map| map.values());
    values
        .flat_map(|value| match value {
            Value::Array(items) => items.iter().collect::<Vec<_>>(),
            other => vec![other],
        })
        .filter(|item| item.get("type").is_some_and(Value::is_string))
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use serde_json::{Map, json};
    use waypoint_checkpoint::InMemorySaver;

    use super::*;
    use crate::{
        CompileOptions, Context, JsonSchema, JsonState, NodeResult, RunConfig, StateGraph,
    };

    #[test]
    fn stream_modes_read_and_write_langgraph_names() {
        let names = ["values", "updates", "custom", "debug", "messages"];
        for (mode, name) in StreamMode::ALL.into_iter().zip(names) {
            assert_eq!(mode.to_string(), name);
            assert_eq!(name.parse::<StreamMode>().expect("a mode"), mode);
            assert_eq!(serde_json::to_value(mode).expect("json"), json!(name));
            let read: StreamMode = serde_json::from_value(json!(name)).expect("json");
            assert_eq!(read, mode);
        }
        let tuple: StreamMode = serde_json::from_value(json!("messages-tuple")).expect("alias");
        assert_eq!(tuple, StreamMode::Messages);
    }

    #[test]
    fn unsupported_stream_modes_are_errors_naming_the_modes() {
        for name in ["checkpoints", "tasks", "events", "Values", ""] {
            let err = name.parse::<StreamMode>().expect_err("not a mode");
            assert!(matches!(&err, Error::InvalidConfig(message)
                if message.contains("values, updates, custom, debug, messages, messages-tuple")));
        }
        let err = serde_json::from_value::<Vec<StreamMode>>(json!(["values", "tasks"]))
            .expect_err("tasks is not supported");
        assert!(
            err.to_string().contains("unknown stream mode `tasks`"),
            "{err}"
        );
    }

    fn obj(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn stream_parts_are_langgraph_api_events() {
        let state = JsonState::new(JsonSchema::new().last_value("a"))
            .with_values(obj(json!({"a": 1})))
            .expect("a known key");
        let metadata = MessageMetadata {
            node: "agent".into(),
            step: 2,
            namespace: String::new(),
            checkpoint_ns: "agent:t1".into(),
            id: Some("m1".into()),
        };
        let parts: Vec<(StreamPart<JsonState>, Value)> = vec![
            (
                StreamPart::Values(state),
                json!({"event": "values", "data": {"a": 1}}),
            ),
            (
                StreamPart::Updates {
                    node: "n".into(),
                    update: Some(obj(json!({"a": 2}))),
                },
                json!({"event": "updates", "data": {"n": {"a": 2}}}),
            ),
            (
                StreamPart::Updates {
                    node: "n".into(),
                    update: None,
                },
                json!({"event": "updates", "data": {"n": null}}),
            ),
            (
                StreamPart::Custom {
                    node: "n".into(),
                    value: json!({"progress": 0.5}),
                },
                json!({"event": "custom", "data": {"progress": 0.5}}),
            ),
            (
                StreamPart::Debug(json!({"type": "task", "step": 1})),
                json!({"event": "debug", "data": {"type": "task", "step": 1}}),
            ),
            (
                StreamPart::Messages {
                    chunk: AiMessageChunk::new("Hel").with_id("m1"),
                    metadata,
                },
                json!({"event": "messages", "data": [
                    serde_json::to_value(AiMessageChunk::new("Hel").with_id("m1")).expect("json"),
                    {"langgraph_node": "agent", "langgraph_step": 2,
                     "langgraph_checkpoint_ns": "agent:t1", "id": "m1"},
                ]}),
            ),
            (
                StreamPart::Interrupt(vec![Interrupt::new(json!("ok?"), "i1")]),
                json!({"event": "updates", "data": {"__interrupt__": [{"value": "ok?", "id": "i1"}]}}),
            ),
        ];
        for (part, expected) in parts {
            assert_eq!(
                serde_json::to_value(&part).expect("json"),
                expected,
                "{part:?}"
            );
        }
    }

    #[test]
    fn message_metadata_has_langgraph_keys_in_order() {
        let metadata = MessageMetadata {
            node: "agent".into(),
            step: 1,
            namespace: String::new(),
            checkpoint_ns: "agent:t1".into(),
            id: None,
        };
        assert_eq!(
            serde_json::to_string(&metadata).expect("json"),
            r#"{"langgraph_node":"agent","langgraph_step":1,"langgraph_checkpoint_ns":"agent:t1","id":null}"#
        );
    }

    async fn speak(_: JsonState, ctx: Context) -> NodeResult<Map<String, Value>> {
        ctx.stream_message(AiMessageChunk::new("hi").with_id("m1"));
        ctx.interrupt("go on?")?;
        Ok(Map::new())
    }

    #[tokio::test]
    async fn streamed_messages_name_their_task_namespace() -> Result<()> {
        let mut graph = StateGraph::json(JsonSchema::new().last_value("a"));
        graph
            .add_node("speak", speak)
            .add_edge(crate::START, "speak");
        let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;
        let config = RunConfig::thread("t");
        let input = Some(obj(json!({"a": 1})));
        let parts: Vec<_> = graph
            .stream(input, &config, &[StreamMode::Messages])
            .collect()
            .await;
        let metadata = parts
            .into_iter()
            .find_map(|part| match part {
                Ok(StreamPart::Messages { metadata, .. }) => Some(metadata),
                _ => None,
            })
            .expect("a streamed message");
        let paused = graph.get_state(&config).await?;
        assert_eq!(
            metadata.checkpoint_ns,
            format!("speak:{}", paused.tasks[0].id)
        );
        assert_eq!(
            (metadata.namespace.as_str(), metadata.node.as_str()),
            ("", "speak")
        );
        Ok(())
    }
}
