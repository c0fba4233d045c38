//! Human in the loop: `interrupt()` inside nodes, resuming with `Command::resume`, static
//! breakpoints, and what a run returns.
//!
//! A node that calls [`crate::Context::interrupt`] stops with an [`Interrupt`]; the runtime
//! saves it as the task's `__interrupt__` write (with the resume values the task already
//! consumed as its `__resume__` write) and ends the run without a new checkpoint. Resuming
//! runs the interrupted task again from its beginning: its k-th `interrupt` call returns the
//! k-th resume value.
//!
//! The writes have LangGraph's shapes, so either of Waypoint and Python LangGraph resumes
//! what the other paused:
//!
//! - `__interrupt__` (a task's write): the list of its [`Interrupt`]s; in LangGraph's
//!   encoding each is a `langgraph.types.Interrupt` (`lc: 2`, ext 2, kwargs `{value, id}`).
//! - `__resume__` of a task: the list of answers it consumed, in order.
//! - `__resume__` of no task (`00000000-0000-0000-0000-000000000000`): the value of a
//!   [`Command::resume`], for the next interrupt that has no answer. Answers by id
//!   ([`Command::resume_by_id`]) are not stored, as in LangGraph: the run hands them to the
//!   tasks, and each task stores what it consumed in its own `__resume__`.
//! - Interrupt ids are LangGraph's: the xxh3-128 hex digest of the task's checkpoint
//!   namespace (`{graph ns}|{node}:{task id}`), or of `{that}|{n}` when the task has already
//!   consumed `n > 0` answers.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Command, State};

/// A pause requested by a node: the value shown to the human and a stable id.
///
/// Stored as LangGraph's `langgraph.types.Interrupt` when writing LangGraph's encoding, as a
/// `{value, id}` map in JSON and a `[value, id]` tuple in binary formats otherwise. Reads
/// any of these, and the fields older LangGraph versions wrote (`ns`, `when`, `resumable`).
///
/// The JSON map is the LangGraph API's (`langgraph_sdk.schema.Interrupt`), so a service can
/// return it as is: `{"value": ..., "id": "..."}`, followed by the [`extra`](Self::extra)
/// fields of an interrupt read from an older LangGraph, as those versions' API showed them.
///
/// LangGraph 0.x's fields are methods: [`ns`](Self::ns), [`when`](Self::when) and
/// [`resumable`](Self::resumable). Like LangGraph 0.6 and later, Waypoint stores only `value`
/// and `id` for the interrupts it raises (`id` hashes the namespace), so their `ns` is
/// `None`; `when` and `resumable` are `"during"` and `true`, as LangGraph always wrote them.
#[derive(Clone, Debug, PartialEq)]
pub struct Interrupt {
    /// What the node asked (any JSON).
    pub value: Value,
    /// Stable for a task and its k-th `interrupt` call; resume by id with it.
    pub id: String,
    /// Fields of a LangGraph interrupt Waypoint does not model (`response_schema`, or older
    /// versions' `ns`, `when`, `resumable`), kept so that writing it back loses nothing.
    pub extra: Map<String, Value>,
}

impl Interrupt {
    /// An interrupt with `value` and `id`, and no other field.
    pub fn new(value: Value, id: impl Into<String>) -> Self {
        Interrupt {
            value,
            id: id.into(),
            extra: Map::new(),
        }
    }

    /// The checkpoint namespace path of the task that raised it (outer graphs first, each
    /// `node:task_id`), as LangGraph before 0.6 stored it in `ns`. `None` for interrupts
    /// raised by Waypoint or by LangGraph 0.6 and later, which keep only its hash, the
    /// [`id`](Self::id).
    pub fn ns(&self) -> Option<Vec<&str>> {
        self.extra
            .get("ns")?
            .as_array()?
            .iter()
            .map(Value::as_str)
            .collect()
    }

    /// When it was raised, LangGraph 0.x's `when`: `"during"` (a node's `interrupt()` call),
    /// the only value LangGraph ever wrote, unless the stored interrupt says otherwise.
    pub fn when(&self) -> &str {
        self.extra
            .get("when")
            .and_then(Value::as_str)
            .unwrap_or("during")
    }

    /// Whether resuming answers it, LangGraph 0.x's `resumable`: `true` (every interrupt
    /// raised by `interrupt()` is), unless the stored interrupt says otherwise.
    pub fn resumable(&self) -> bool {
        self.extra
            .get("resumable")
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }

    /// The [`id`](Self::id), under the name LangGraph 0.x used.
    #[deprecated(note = "use `id`, as LangGraph 1.0 does")]
    pub fn interrupt_id(&self) -> &str {
        &self.id
    }

    /// Reads an interrupt from any of its stored forms, decoded as JSON: a `{value, id, ..}`
    /// map, LangGraph's `lc: 2` constructor map, or a `[value, id]` / `[value, id, extra]`
    /// tuple.
    pub fn from_value(raw: Value) -> Result<Self, String> {
        let mut fields = match raw {
            Value::Object(map) => match map.get("lc") {
                Some(lc) if lc == 2 => {
                    let class = map
                        .get("id")
                        .and_then(Value::as_array)
                        .and_then(|id| id.last())
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    if class != "Interrupt" {
                        return Err(format!(
                            "expected langgraph.types.Interrupt, found {}",
                            map.get("id").map(Value::to_string).unwrap_or_default()
                        ));
                    }
                    match map.get("kwargs") {
                        Some(Value::Object(kwargs)) if !kwargs.is_empty() => kwargs.clone(),
                        // A constructor called with positional arguments: `(value, id)`.
                        _ => {
                            let args = map.get("args").and_then(Value::as_array);
                            let mut kwargs = Map::new();
                            if let Some(args) = args {
                                for (key, arg) in ["value", "id"].into_iter().zip(args) {
                                    kwargs.insert(key.to_owned(), arg.clone());
                                }
                            }
                            kwargs
                        }
                    }
                }
                _ => map,
            },
            Value::Array(items) => {
                let mut items = items.into_iter();
                let mut fields = Map::new();
                fields.insert("value".into(), items.next().unwrap_or(Value::Null));
                match items.next() {
                    Some(id) => fields.insert("id".into(), id),
                    None => return Err("an interrupt tuple needs a value and an id".into()),
                };
                match items.next() {
                    Some(Value::Object(extra)) => fields.extend(extra),
                    Some(Value::Null) | None => {}
                    Some(other) => {
                        return Err(format!(
                            "an interrupt's third field must be a map, not {other}"
                        ));
                    }
                }
                fields
            }
            other => return Err(format!("expected an interrupt, found {other}")),
        };
        let value = fields.remove("value").unwrap_or(Value::Null);
        let id = match fields.remove("id") {
            Some(Value::String(id)) => id,
            // Versions before 0.6 derived the id from the namespace.
            Some(Value::Null) | None => match fields.get("ns") {
                Some(Value::Array(ns)) => {
                    let parts: Vec<&str> = ns.iter().filter_map(Value::as_str).collect();
                    xxh3_hex(&parts.join("|"))
                }
                _ => String::new(),
            },
            Some(other) => return Err(format!("an interrupt id must be a string, not {other}")),
        };
        Ok(Interrupt {
            value,
            id,
            extra: fields,
        })
    }
}

impl Serialize for Interrupt {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeTuple};
        if waypoint_checkpoint::serde::writing_langgraph() {
            let mut kwargs = Map::new();
            kwargs.insert("value".into(), self.value.clone());
            kwargs.insert("id".into(), Value::String(self.id.clone()));
            for (key, value) in &self.extra {
                kwargs.entry(key.clone()).or_insert_with(|| value.clone());
            }
            let mut map = serializer.serialize_map(Some(7))?;
            map.serialize_entry("lc", &2)?;
            map.serialize_entry("type", "constructor")?;
            map.serialize_entry("id", &["langgraph", "types", "Interrupt"])?;
            map.serialize_entry("ext", &2)?;
            map.serialize_entry("method", &())?;
            map.serialize_entry("args", &[(); 0])?;
            map.serialize_entry("kwargs", &kwargs)?;
            map.end()
        } else if serializer.is_human_readable() {
            let mut map = serializer.serialize_map(Some(2 + self.extra.len()))?;
            map.serialize_entry("value", &self.value)?;
            map.serialize_entry("id", &self.id)?;
            for (key, value) in self
                .extra
                .iter()
                .filter(|(k, _)| *k != "value" && *k != "id")
            {
                map.serialize_entry(key, value)?;
            }
            map.end()
        } else if self.extra.is_empty() {
            let mut tuple = serializer.serialize_tuple(2)?;
            tuple.serialize_element(&self.value)?;
            tuple.serialize_element(&self.id)?;
            tuple.end()
        } else {
            let mut tuple = serializer.serialize_tuple(3)?;
            tuple.serialize_element(&self.value)?;
            tuple.serialize_element(&self.id)?;
            tuple.serialize_element(&self.extra)?;
            tuple.end()
        }
    }
}

impl<'de> Deserialize<'de> for Interrupt {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Interrupt::from_value(Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted ({}): {}", self.id, self.value)
    }
}

impl std::error::Error for Interrupt {}

/// Resume values: one for the single pending interrupt, or one per interrupt id.
///
/// Its serde form is the `resume` of LangGraph's `Command` (and of the LangGraph API's
/// `command`): `One` is the value itself, `ById` the map from interrupt ids to values. Reading
/// follows LangGraph's rule: an object whose keys are all interrupt ids (32 lowercase hex
/// digits) answers by id, anything else is one value. Unlike LangGraph, which reads `{}` as a
/// map that answers nothing (the run pauses again), an empty object is the value `{}`. So a
/// `One` holding an object keyed by ids, or an empty `ById`, reads back as the other variant.
#[derive(Clone, Debug, PartialEq)]
pub enum Resume {
    /// The value for the one pending interrupt.
    One(Value),
    /// Values by interrupt id, when several are pending.
    ById(BTreeMap<String, Value>),
}

impl Serialize for Resume {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Resume::One(value) => value.serialize(serializer),
            Resume::ById(answers) => answers.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Resume {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::Object(answers)
                if !answers.is_empty() && answers.keys().all(|key| is_interrupt_id(key)) =>
            {
                Resume::ById(answers.into_iter().collect())
            }
            value => Resume::One(value),
        })
    }
}

/// Whether `key` has the form of an interrupt id (LangGraph's `is_xxh3_128_hexdigest`).
fn is_interrupt_id(key: &str) -> bool {
    key.len() == 32 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What `invoke` and `stream` take: an update, a command, or nothing (resume or replay).
#[derive(Clone, Debug)]
pub enum Input<S: State> {
    /// Continue the thread from its checkpoint: resume after a failure or a static
    /// breakpoint, or replay from `checkpoint_id`.
    Continue,
    /// Start a new run with this input.
    Update(S::Update),
    /// Resume interrupts, update the state and/or route, then continue.
    Command(Command<S>),
}

impl<S: State> From<Option<S::Update>> for Input<S> {
    fn from(update: Option<S::Update>) -> Self {
        match update {
            Some(update) => Input::Update(update),
            None => Input::Continue,
        }
    }
}

impl<S: State> From<Command<S>> for Input<S> {
    fn from(command: Command<S>) -> Self {
        Input::Command(command)
    }
}

/// How a run ended: its state and, when it paused, why.
#[derive(Clone, Debug)]
pub struct Outcome<S: State> {
    /// The state when the run stopped (shared: the graph keeps it to start the thread's
    /// next run from).
    pub values: Arc<S>,
    /// Whether the run paused (an `interrupt()` or a static breakpoint) rather than finished.
    pub interrupted: bool,
    /// The pending interrupts (empty for static breakpoints).
    pub interrupts: Vec<Interrupt>,
}

impl<S: State> Outcome<S> {
    /// The final state, dropping the rest.
    pub fn into_values(self) -> S {
        Arc::unwrap_or_clone(self.values)
    }
}

impl<S: State> Deref for Outcome<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.values
    }
}

/// The 128-bit xxh3 of `text`, as 32 lowercase hex digits (Python's `xxh3_128_hexdigest`).
pub(crate) fn xxh3_hex(text: &str) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
}

/// The id of the interrupt a task raises after consuming `answered` answers, as LangGraph
/// derives it from the task's checkpoint namespace `task_ns`: its hash alone for the first
/// (what every version gives), of `{task_ns}|{answered}` after that.
pub(crate) fn interrupt_id(task_ns: &str, answered: usize) -> String {
    if answered == 0 {
        xxh3_hex(task_ns)
    } else {
        xxh3_hex(&format!("{task_ns}|{answered}"))
    }
}

/// One task's resume bookkeeping, shared with its `Context`.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The task's checkpoint namespace, which its interrupt ids hash.
    task_ns: String,
    /// `interrupt` calls so far in this attempt.
    calls: usize,
    /// Values of the task's earlier interrupts, in order (its `__resume__` write).
    pub(crate) answered: Vec<Value>,
    /// The resume given to this run, not yet consumed.
    fresh: Option<Resume>,
    /// The interrupts of the subgraph the task called last, when it paused: the task's
    /// `__interrupt__` write holds them all.
    pub(crate) bubbled: Vec<Interrupt>,
}

/// A task's scratch, as the context holds it.
pub(crate) type SharedScratch = Arc<Mutex<Scratch>>;

impl Scratch {
    pub(crate) fn new(task_ns: &str, answered: Vec<Value>, fresh: Option<Resume>) -> SharedScratch {
        Arc::new(Mutex::new(Scratch {
            task_ns: task_ns.to_owned(),
            calls: 0,
            answered,
            fresh,
            bubbled: Vec::new(),
        }))
    }

    /// Takes the resume this run brought for the task, to pass on to a subgraph: a single
    /// value is the subgraph's to consume; answers by id stay for the task's own interrupts
    /// too.
    pub(crate) fn fresh_for_subgraph(&mut self) -> Option<Resume> {
        match &self.fresh {
            Some(Resume::ById(answers)) => Some(Resume::ById(answers.clone())),
            _ => self.fresh.take(),
        }
    }

    /// The answer to the next `interrupt(value)` call, or the interrupt to raise.
    pub(crate) fn next(&mut self, value: Value) -> Result<Value, Interrupt> {
        let index = self.calls;
        self.calls += 1;
        if let Some(answer) = self.answered.get(index) {
            return Ok(answer.clone());
        }
        let id = interrupt_id(&self.task_ns, index);
        let answer = match self.fresh.take() {
            Some(Resume::One(answer)) => Some(answer),
            Some(Resume::ById(mut answers)) => {
                // LangGraph before 1.0 gave all of a task's interrupts the first one's id.
                let answer = answers
                    .remove(&id)
                    .or_else(|| answers.remove(&interrupt_id(&self.task_ns, 0)));
                self.fresh = Some(Resume::ById(answers));
                answer
            }
            None => None,
        };
        match answer {
            Some(answer) => {
                self.answered.push(answer.clone());
                Ok(answer)
            }
            None => Err(Interrupt::new(value, id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef";

    type TestResult = Result<(), serde_json::Error>;

    #[test]
    fn interrupt_json_is_the_langgraph_api_shape() -> TestResult {
        let interrupt = Interrupt::new(json!({"question": "name?"}), ID);
        let text = serde_json::to_string(&interrupt)?;
        assert_eq!(
            text,
            r#"{"value":{"question":"name?"},"id":"0123456789abcdef0123456789abcdef"}"#
        );
        assert_eq!(serde_json::from_str::<Interrupt>(&text)?, interrupt);
        Ok(())
    }

    #[test]
    fn interrupt_json_keeps_older_langgraph_fields_after_value_and_id() -> TestResult {
        let text = r#"{"value":"ok?","resumable":true,"ns":["gate:abc"],"when":"during"}"#;
        let interrupt: Interrupt = serde_json::from_str(text)?;
        assert_eq!(interrupt.id, xxh3_hex("gate:abc"));
        let written = serde_json::to_string(&interrupt)?;
        assert_eq!(
            written,
            format!(
                r#"{{"value":"ok?","id":"{}","ns":["gate:abc"],"resumable":true,"when":"during"}}"#,
                interrupt.id
            )
        );
        assert_eq!(serde_json::from_str::<Interrupt>(&written)?, interrupt);
        Ok(())
    }

    #[test]
    fn resume_json_is_langgraph_command_resume() -> TestResult {
        let one = Resume::One(json!({"approved": true}));
        assert_eq!(serde_json::to_string(&one)?, r#"{"approved":true}"#);
        let by_id = Resume::ById(BTreeMap::from([(ID.to_owned(), json!("yes"))]));
        let text = serde_json::to_string(&by_id)?;
        assert_eq!(text, format!(r#"{{"{ID}":"yes"}}"#));
        for resume in [
            one,
            by_id,
            Resume::One(json!("plain")),
            Resume::One(json!(null)),
        ] {
            let text = serde_json::to_string(&resume)?;
            assert_eq!(serde_json::from_str::<Resume>(&text)?, resume);
        }
        Ok(())
    }

    #[test]
    fn resume_reads_by_id_only_when_every_key_is_an_interrupt_id() -> TestResult {
        let read = serde_json::from_value::<Resume>;
        let other = xxh3_hex("other");
        assert_eq!(
            read(json!({ID: 1, &other: 2}))?,
            Resume::ById(BTreeMap::from([
                (ID.to_owned(), json!(1)),
                (other.clone(), json!(2))
            ]))
        );
        // One key that is not an id (too short, upper case, or a word) makes it one value.
        for value in [
            json!({ID: 1, "approved": true}),
            json!({"0123456789abcdef": 1}),
            json!({"0123456789ABCDEF0123456789ABCDEF": 1}),
            json!({}),
            json!([ID]),
            json!(ID),
        ] {
            assert_eq!(read(value.clone())?, Resume::One(value));
        }
        Ok(())
    }
}
