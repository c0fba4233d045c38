//! The options of a graph and of each call: the checkpointer, store and codec a graph is
//! compiled with; which thread and checkpoint a call reads, its limits, durability and user
//! keys.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, Serde};
use waypoint_store::Store;

use crate::error::{Error, Result};

/// Default cap on super-steps per run (LangGraph's `recursion_limit`).
pub const DEFAULT_RECURSION_LIMIT: usize = 25;

/// When checkpoints reach the checkpointer.
///
/// Written and parsed as LangGraph names the modes (`"sync"`, `"async"`, `"exit"`), in JSON
/// as in [`FromStr`] and [`Display`](fmt::Display).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// A checkpoint after every super-step, and each task's writes as it finishes; each
    /// save completes before the run goes on (default).
    #[default]
    Sync,
    /// The same saves, made in the background while the next step runs (LangGraph's default):
    /// checkpoints stay in order, and the run waits for all of them before it returns. A
    /// saver that saves in process (`InMemorySaver`) is written in line, as in `Sync`.
    Async,
    /// Only when the run ends (finished, failed or interrupted): one checkpoint and its writes.
    Exit,
}

impl Durability {
    /// Every mode.
    pub const ALL: [Durability; 3] = [Durability::Sync, Durability::Async, Durability::Exit];

    /// LangGraph's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Async => "async",
            Durability::Exit => "exit",
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Durability {
    type Err = Error;

    /// A mode by LangGraph's name; anything else is [`Error::InvalidConfig`] naming the
    /// valid ones.
    fn from_str(name: &str) -> Result<Self> {
        parse_name(
            "durability",
            &Durability::ALL,
            Durability::as_str,
            &[],
            name,
        )
    }
}

impl Serialize for Durability {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Durability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserialize_by_name(deserializer)
    }
}

/// The value of `all` whose name is `name` (or that `aliases` gives it), or an error naming
/// what `kind` accepts.
pub(crate) fn parse_name<T: Copy>(
    kind: &str,
    all: &[T],
    name_of: impl Fn(T) -> &'static str,
    aliases: &[(&str, T)],
    name: &str,
) -> Result<T> {
    all.iter()
        .map(|&value| (name_of(value), value))
        .chain(aliases.iter().copied())
        .find(|(known, _)| *known == name)
        .map(|(_, value)| value)
        .ok_or_else(|| {
            let known: Vec<&str> = all
                .iter()
                .map(|&value| name_of(value))
                .chain(aliases.iter().map(|(alias, _)| *alias))
                .collect();
            Error::InvalidConfig(format!(
                "unknown {kind} `{name}`: expected one of {}",
                known.join(", ")
            ))
        })
}

/// Reads a value from its name with its [`FromStr`], whose error becomes the deserializer's.
pub(crate) fn deserialize_by_name<'de, T, D>(deserializer: D) -> std::result::Result<T, D::Error>
where
    T: FromStr<Err = Error>,
    D: Deserializer<'de>,
{
    let name = Cow::<'de, str>::deserialize(deserializer)?;
    name.parse().map_err(|e: Error| match e {
        Error::InvalidConfig(message) => serde::de::Error::custom(message),
        other => serde::de::Error::custom(other),
    })
}

/// The config of one call: LangGraph's `{"configurable": {...}}` plus run options.
///
/// Its JSON is LangGraph's `RunnableConfig`, with the run options of the LangGraph API's run
/// body beside it, so a service can take it as input:
///
/// ```json
/// {"configurable": {"thread_id": "1", "checkpoint_ns": "", "checkpoint_id": "...", "user_id": "u"},
///  "recursion_limit": 25, "run_id": "...", "durability": "sync",
///  "interrupt_before": ["tools"], "interrupt_after": [], "wait_for_thread": 2.5, "lease_ttl": 30.0}
/// ```
///
/// `thread_id`, `checkpoint_ns` and `checkpoint_id` are read from `configurable`, every other
/// key there is a user key ([`RunConfig::configurable`]). Durations are seconds. Missing keys
/// take their defaults, absent options (`None`) are left out when writing, and keys Waypoint
/// does not model (LangGraph's `tags`, `metadata`, `run_name`, `callbacks`, ...) are ignored.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// The thread; required when the graph has a checkpointer.
    pub thread_id: Option<String>,
    /// The checkpoint namespace (`""` for the root graph).
    pub checkpoint_ns: String,
    /// A past checkpoint to read, replay or fork from; the latest when `None`.
    pub checkpoint_id: Option<String>,
    /// Maximum super-steps in one run.
    pub recursion_limit: usize,
    /// When checkpoints are written.
    pub durability: Durability,
    /// Stored in each checkpoint's metadata as `run_id`.
    pub run_id: Option<String>,
    /// User keys nodes can read (`user_id`, model names, ...).
    pub configurable: Map<String, Value>,
    /// Static breakpoints before these nodes for this run (instead of the compiled ones).
    pub interrupt_before: Option<Vec<String>>,
    /// Static breakpoints after these nodes for this run (instead of the compiled ones).
    pub interrupt_after: Option<Vec<String>>,
    /// How long to wait for another run on the thread to finish; `None` fails at once with
    /// `Error::Conflict`.
    pub wait_for_thread: Option<std::time::Duration>,
    /// How long the run's claim on its thread lasts without renewal (default
    /// [`LEASE_TTL`](crate::lease::LEASE_TTL)); a run paused longer than this may lose the thread,
    /// and then fails with `Error::Conflict` at its next write instead of writing.
    pub lease_ttl: std::time::Duration,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            thread_id: None,
            checkpoint_ns: String::new(),
            checkpoint_id: None,
            recursion_limit: DEFAULT_RECURSION_LIMIT,
            durability: Durability::default(),
            run_id: None,
            configurable: Map::new(),
            interrupt_before: None,
            interrupt_after: None,
            wait_for_thread: None,
            lease_ttl: crate::lease::LEASE_TTL,
        }
    }
}

impl RunConfig {
    /// A config for `thread_id`, at its latest checkpoint.
    pub fn thread(thread_id: impl Into<String>) -> Self {
        RunConfig {
            thread_id: Some(thread_id.into()),
            ..RunConfig::default()
        }
    }

    /// The same config on thread `thread_id`.
    pub fn thread_id(mut self, thread_id: impl Into<String>) -> Self {
        self.thread_id = Some(thread_id.into());
        self
    }

    /// The same config in checkpoint namespace `checkpoint_ns` (a subgraph's).
    pub fn checkpoint_ns(mut self, checkpoint_ns: impl Into<String>) -> Self {
        self.checkpoint_ns = checkpoint_ns.into();
        self
    }

    /// The same config pointing at checkpoint `checkpoint_id`.
    pub fn at(mut self, checkpoint_id: impl Into<String>) -> Self {
        self.checkpoint_id = Some(checkpoint_id.into());
        self
    }

    /// The same config with a user key.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.configurable.insert(key.into(), value.into());
        self
    }

    /// The same config with another recursion limit.
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = limit;
        self
    }

    /// The same config with another durability.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The same config with a run id.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// The same config pausing before `nodes` in this run.
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// The same config pausing after `nodes` in this run.
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// The same config waiting up to `wait` for another run on the thread to finish.
    pub fn wait_for_thread(mut self, wait: std::time::Duration) -> Self {
        self.wait_for_thread = Some(wait);
        self
    }

    /// The same config claiming its thread for `ttl` at a time (renewed while the run goes).
    pub fn lease_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// A user key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.configurable.get(key)
    }

    /// The checkpointer's view: thread, namespace, id.
    pub(crate) fn checkpoint_config(&self, thread_id: &str) -> CheckpointConfig {
        CheckpointConfig {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: Some(self.checkpoint_ns.clone()),
            checkpoint_id: self.checkpoint_id.clone(),
        }
    }
}

impl From<&CheckpointConfig> for RunConfig {
    fn from(config: &CheckpointConfig) -> Self {
        RunConfig {
            thread_id: Some(config.thread_id.clone()),
            checkpoint_ns: config.checkpoint_ns.clone().unwrap_or_default(),
            checkpoint_id: config.checkpoint_id.clone(),
            ..RunConfig::default()
        }
    }
}

impl From<CheckpointConfig> for RunConfig {
    fn from(config: CheckpointConfig) -> Self {
        RunConfig::from(&config)
    }
}

/// The keys of `configurable` that are fields of [`RunConfig`], not user keys.
const CHECKPOINT_KEYS: [&str; 3] = ["thread_id", "checkpoint_ns", "checkpoint_id"];

impl Serialize for RunConfig {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("configurable", &Configurable(self))?;
        map.serialize_entry("recursion_limit", &self.recursion_limit)?;
        if let Some(run_id) = &self.run_id {
            map.serialize_entry("run_id", run_id)?;
        }
        map.serialize_entry("durability", &self.durability)?;
        if let Some(nodes) = &self.interrupt_before {
            map.serialize_entry("interrupt_before", nodes)?;
        }
        if let Some(nodes) = &self.interrupt_after {
            map.serialize_entry("interrupt_after", nodes)?;
        }
        if let Some(wait) = self.wait_for_thread {
            map.serialize_entry("wait_for_thread", &wait.as_secs_f64())?;
        }
        map.serialize_entry("lease_ttl", &self.lease_ttl.as_secs_f64())?;
        map.end()
    }
}

/// A config's `configurable`: the thread, namespace and checkpoint, then the user keys.
struct Configurable<'a>(&'a RunConfig);

impl Serialize for Configurable<'_> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        let config = self.0;
        let mut map = serializer.serialize_map(None)?;
        if let Some(thread_id) = &config.thread_id {
            map.serialize_entry("thread_id", thread_id)?;
        }
        map.serialize_entry("checkpoint_ns", &config.checkpoint_ns)?;
        if let Some(checkpoint_id) = &config.checkpoint_id {
            map.serialize_entry("checkpoint_id", checkpoint_id)?;
        }
        for (key, value) in &config.configurable {
            // The fields above stand for these keys; a user key of the same name is shadowed.
            if !CHECKPOINT_KEYS.contains(&key.as_str()) {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RunConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        /// The JSON form, before `configurable` is split and durations are checked.
        #[derive(Deserialize)]
        struct Wire {
            configurable: Option<Map<String, Value>>,
            recursion_limit: Option<usize>,
            run_id: Option<String>,
            durability: Option<Durability>,
            interrupt_before: Option<Vec<String>>,
            interrupt_after: Option<Vec<String>>,
            wait_for_thread: Option<f64>,
            lease_ttl: Option<f64>,
        }

        fn text<E: serde::de::Error>(
            configurable: &mut Map<String, Value>,
            key: &str,
        ) -> std::result::Result<Option<String>, E> {
            match configurable.remove(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => Ok(Some(text)),
                Some(other) => Err(E::custom(format!(
                    "configurable.{key} must be a string, found {other}"
                ))),
            }
        }

        fn seconds<E: serde::de::Error>(
            key: &str,
            value: Option<f64>,
        ) -> std::result::Result<Option<Duration>, E> {
            value
                .map(|secs| {
                    Duration::try_from_secs_f64(secs)
                        .map_err(|e| E::custom(format!("{key} must be seconds, {secs}: {e}")))
                })
                .transpose()
        }

        let wire = Wire::deserialize(deserializer)?;
        let mut configurable = wire.configurable.unwrap_or_default();
        let defaults = RunConfig::default();
        Ok(RunConfig {
            thread_id: text(&mut configurable, "thread_id")?,
            checkpoint_ns: text(&mut configurable, "checkpoint_ns")?.unwrap_or_default(),
            checkpoint_id: text(&mut configurable, "checkpoint_id")?,
            recursion_limit: wire.recursion_limit.unwrap_or(defaults.recursion_limit),
            durability: wire.durability.unwrap_or(defaults.durability),
            run_id: wire.run_id,
            configurable,
            interrupt_before: wire.interrupt_before,
            interrupt_after: wire.interrupt_after,
            wait_for_thread: seconds::<D::Error>("wait_for_thread", wire.wait_for_thread)?,
            lease_ttl: seconds::<D::Error>("lease_ttl", wire.lease_ttl)?
                .unwrap_or(defaults.lease_ttl),
        })
    }
}

/// Options of [`StateGraph::compile`](crate::StateGraph::compile).
#[derive(Clone, Default)]
pub struct CompileOptions {
    /// Where checkpoints go; without one, runs keep no history and threads are not resumable.
    pub checkpointer: Option<Arc<dyn CheckpointSaver>>,
    /// The long-term store nodes reach through [`Context::store`](crate::Context::store).
    pub store: Option<Arc<dyn Store>>,
    /// How channel values are encoded (MessagePack by default; sealed when keyed). Left at
    /// its default format on a checkpointer shared with Python LangGraph
    /// ([`CheckpointSaver::langgraph_values`], PostgreSQL's default), LangGraph's encoding
    /// (`Format::LangGraph`) is used instead.
    pub serde: Serde,
    /// Nodes to pause before (static breakpoints; see the human-in-the-loop issue).
    pub interrupt_before: Vec<String>,
    /// Nodes to pause after.
    pub interrupt_after: Vec<String>,
    /// How appending channels (`append`, `add_messages`) are stored. Left at its default on
    /// a checkpointer shared with Python LangGraph, they are stored whole
    /// ([`DeltaPolicy::off`](crate::DeltaPolicy::off)): Python reads no Waypoint deltas.
    pub delta: crate::delta::DeltaPolicy,
}

impl std::fmt::Debug for CompileOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileOptions")
            .field("checkpointer", &self.checkpointer)
            .field("store", &self.store.is_some())
            .field("serde", &self.serde)
            .finish()
    }
}

impl CompileOptions {
    /// Options with `checkpointer`.
    pub fn with_checkpointer(checkpointer: impl CheckpointSaver + 'static) -> Self {
        CompileOptions {
            checkpointer: Some(Arc::new(checkpointer)),
            ..CompileOptions::default()
        }
    }

    /// The same options with `checkpointer`.
    pub fn checkpointer(mut self, checkpointer: Arc<dyn CheckpointSaver>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// The same options with `store`.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The same options with `serde`.
    pub fn serde(mut self, serde: Serde) -> Self {
        self.serde = serde;
        self
    }

    /// The same options pausing before `nodes` (static breakpoints).
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// The same options pausing after `nodes`.
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// The same options storing appending channels as `delta` says.
    pub fn delta(mut self, delta: crate::delta::DeltaPolicy) -> Self {
        self.delta = delta;
        self
    }

    /// The options with the defaults a checkpointer shared with Python LangGraph asks for:
    /// LangGraph's encoding instead of the default format, appending channels stored whole
    /// instead of the default delta policy. Settings changed from their defaults are kept.
    pub(crate) fn for_checkpointer(mut self) -> Self {
        if self
            .checkpointer
            .as_ref()
            .is_some_and(|c| c.langgraph_values())
        {
            if self.serde.format() == waypoint_checkpoint::Format::default() {
                self.serde = self
                    .serde
                    .with_format(waypoint_checkpoint::Format::LangGraph);
            }
            if self.delta == crate::delta::DeltaPolicy::default() {
                self.delta = crate::delta::DeltaPolicy::off();
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn durability_reads_and_writes_langgraph_names() {
        for (mode, name) in Durability::ALL.into_iter().zip(["sync", "async", "exit"]) {
            assert_eq!(mode.to_string(), name);
            assert_eq!(name.parse::<Durability>().expect("a mode"), mode);
            assert_eq!(serde_json::to_value(mode).expect("json"), json!(name));
            let read: Durability = serde_json::from_value(json!(name)).expect("json");
            assert_eq!(read, mode);
        }
    }

    #[test]
    fn unknown_durability_is_an_error_naming_the_modes() {
        let err = "later".parse::<Durability>().expect_err("not a mode");
        assert!(matches!(&err, Error::InvalidConfig(message)
            if message.contains("`later`") && message.contains("sync, async, exit")));
        let err =
            serde_json::from_value::<Durability>(json!("Sync")).expect_err("names are lowercase");
        assert!(err.to_string().contains("sync, async, exit"), "{err}");
        assert!(serde_json::from_value::<Durability>(json!(1)).is_err());
    }

    #[test]
    fn run_config_has_langgraph_shape() {
        let config = RunConfig::thread("t1")
            .at("c1")
            .checkpoint_ns("sub:1")
            .with("user_id", "u1")
            .recursion_limit(7)
            .durability(Durability::Exit)
            .run_id("r1")
            .interrupt_before(["a"])
            .interrupt_after(Vec::<String>::new())
            .wait_for_thread(Duration::from_millis(2500))
            .lease_ttl(Duration::from_secs(10));
        let text = serde_json::to_string(&config).expect("json");
        assert_eq!(
            text,
            r#"{"configurable":{"thread_id":"t1","checkpoint_ns":"sub:1","checkpoint_id":"c1","user_id":"u1"},"recursion_limit":7,"run_id":"r1","durability":"exit","interrupt_before":["a"],"interrupt_after":[],"wait_for_thread":2.5,"lease_ttl":10.0}"#
        );
        let read: RunConfig = serde_json::from_str(&text).expect("json");
        assert_eq!(read, config);
    }

    #[test]
    fn run_config_leaves_out_what_is_not_set() {
        let config = RunConfig::default();
        let value = serde_json::to_value(&config).expect("json");
        assert_eq!(
            value,
            json!({"configurable": {"checkpoint_ns": ""}, "recursion_limit": 25,
                   "durability": "sync", "lease_ttl": 30.0})
        );
        let read: RunConfig = serde_json::from_value(value).expect("json");
        assert_eq!(read, config);
    }

    #[test]
    fn run_config_reads_a_langgraph_config() {
        let read: RunConfig = serde_json::from_value(json!({
            "configurable": {"thread_id": "t1", "checkpoint_id": null, "model": "m"},
            "tags": ["x"], "metadata": {"a": 1}, "run_name": "n",
        }))
        .expect("json");
        assert_eq!(read, RunConfig::thread("t1").with("model", "m"));
        let empty: RunConfig = serde_json::from_value(json!({})).expect("json");
        assert_eq!(empty, RunConfig::default());
    }

    #[test]
    fn a_user_key_named_like_a_field_does_not_shadow_it() {
        let config = RunConfig::thread("t1").with("thread_id", "t2");
        let value = serde_json::to_value(&config).expect("json");
        assert_eq!(value["configurable"]["thread_id"], json!("t1"));
    }

    #[test]
    fn bad_run_configs_are_errors() {
        for bad in [
            json!({"configurable": {"thread_id": 1}}),
            json!({"configurable": {"checkpoint_ns": ["a"]}}),
            json!({"configurable": []}),
            json!({"recursion_limit": -1}),
            json!({"durability": "never"}),
            json!({"interrupt_before": "*"}),
            json!({"wait_for_thread": -1.0}),
            json!({"lease_ttl": 1e300}),
            json!([]),
        ] {
            assert!(
                serde_json::from_value::<RunConfig>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        let err = serde_json::from_value::<RunConfig>(json!({"configurable": {"thread_id": 1}}))
            .expect_err("a number is no thread id");
        assert!(err.to_string().contains("configurable.thread_id"), "{err}");
    }

    #[test]
    fn compile_options_have_a_builder_for_every_field() {
        let saver: Arc<dyn CheckpointSaver> = Arc::new(waypoint_checkpoint::InMemorySaver::new());
        let store: Arc<dyn Store> = Arc::new(waypoint_store::InMemoryStore::new());
        let options = CompileOptions::default()
            .checkpointer(Arc::clone(&saver))
            .store(store)
            .serde(Serde::default())
            .interrupt_before(["a"])
            .interrupt_after(vec![String::from("b")])
            .delta(crate::delta::DeltaPolicy::off());
        assert!(options.checkpointer.is_some() && options.store.is_some());
        assert_eq!(options.interrupt_before, ["a"]);
        assert_eq!(options.interrupt_after, ["b"]);
        assert_eq!(options.delta, crate::delta::DeltaPolicy::off());
    }
}
