//! What a running node can reach: its run's config, the store, the custom stream.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use waypoint_store::Store;

use crate::RunConfig;
use crate::interrupt::{Interrupt, SharedScratch};

/// Where `write_custom` values go: the node name and the value.
pub(crate) type CustomSink = Arc<dyn Fn(&str, Value) + Send + Sync>;

/// The context passed to every node call.
#[derive(Clone)]
pub struct Context {
    pub(crate) config: Arc<RunConfig>,
    pub(crate) store: Option<Arc<dyn Store>>,
    pub(crate) custom: Option<CustomSink>,
    pub(crate) node: Arc<str>,
    pub(crate) step: i64,
    pub(crate) scratch: Option<SharedScratch>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("node", &self.node)
            .field("step", &self.step)
            .field("config", &self.config)
            .finish()
    }
}

impl Context {
    /// The run's config (thread id, user keys such as `user_id`).
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The thread this run belongs to, if any.
    pub fn thread_id(&self) -> Option<&str> {
        self.config.thread_id.as_deref()
    }

    /// The long-term store given at compile time.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The store, or an error saying the graph was compiled without one.
    pub fn require_store(&self) -> crate::Result<&Arc<dyn Store>> {
        self.store.as_ref().ok_or_else(|| {
            crate::Error::InvalidConfig(format!(
                "node `{}` needs a store: compile the graph with CompileOptions::store",
                self.node
            ))
        })
    }

    /// The name of the running node.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The super-step being run.
    pub fn step(&self) -> i64 {
        self.step
    }

    /// Pauses the run for a human: the first time, returns `Err(Interrupt)` (propagate it
    /// with `?`) and the run ends with the interrupt pending; once resumed, the node runs
    /// again from its start and this call returns the resume value. The k-th call of a
    /// node returns the k-th resume value.
    pub fn interrupt(&self, value: impl Serialize) -> Result<Value, Interrupt> {
        let value = serde_json::to_value(value).unwrap_or_else(|e| Value::String(e.to_string()));
        match &self.scratch {
            Some(scratch) => scratch
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .next(value),
            None => Err(Interrupt {
                value,
                id: String::new(),
            }),
        }
    }

    /// Sends `value` to the `custom` stream (dropped when nobody streams that mode).
    pub fn write_custom(&self, value: impl Serialize) {
        if let Some(sink) = &self.custom {
            let value =
                serde_json::to_value(value).unwrap_or_else(|e| Value::String(e.to_string()));
            sink(&self.node, value);
        }
    }
}
