//! The one error type of the runtime crate.

use waypoint_checkpoint::BoxError;

/// Result alias used across the runtime crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything building or running a graph can report; callers match on the variant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The graph is malformed: an unknown node, a reserved name, a missing entry point.
    #[error("invalid graph: {0}")]
    InvalidGraph(String),

    /// A config lacks what the call needs (e.g. `thread_id` with a checkpointer).
    #[error("invalid config: {0}")]
    InvalidConfig(String),

    /// An update cannot be applied: two writes to a last-value channel in one step, an
    /// unknown key, a reducer that refused it, an ambiguous `as_node`.
    #[error("invalid update: {0}")]
    InvalidUpdate(String),

    /// A node failed; its error is the source. The step's other writes were saved.
    #[error("node `{node}` failed: {source}")]
    Node {
        /// The node that failed.
        node: String,
        /// What the node returned.
        #[source]
        source: BoxError,
    },

    /// A node panicked: its function, a router of its conditional edges, or a reducer
    /// folding its update. The panic was caught and the run failed as when a node returns an
    /// error: the step's other writes were saved, and resuming runs the node again.
    #[error("node `{node}` panicked: {message}")]
    Panicked {
        /// The node whose code panicked.
        node: String,
        /// The panic's message, and where it happened when not in the node's function.
        message: String,
    },

    /// Another run (or `update_state`) is writing the thread: two writers never interleave.
    #[error("conflict: {0}")]
    Conflict(String),

    /// The run took more super-steps than `recursion_limit` allows.
    #[error(
        "recursion limit of {limit} reached without hitting a stop condition; \
         raise `recursion_limit` in the run config if the graph is meant to run longer"
    )]
    Recursion {
        /// The limit in force.
        limit: usize,
    },

    /// A channel value could not be encoded or decoded.
    #[error("channel `{channel}`: {source}")]
    Serialization {
        /// The channel whose value failed.
        channel: String,
        /// The codec's error.
        #[source]
        source: waypoint_checkpoint::Error,
    },

    /// The checkpointer failed.
    #[error(transparent)]
    Checkpoint(#[from] waypoint_checkpoint::Error),

    /// The store failed.
    #[error(transparent)]
    Store(#[from] waypoint_store::Error),

    /// A URL could not be opened: the server is unreachable, refused the connection or the
    /// setup, or did not answer in time. `url` is shown without its password.
    #[error("cannot open {url}: {source}")]
    Connect {
        /// The URL, password hidden.
        url: String,
        /// Why.
        #[source]
        source: BoxError,
    },
}

impl Error {
    /// A node failure carrying any error.
    pub fn node(node: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Node {
            node: node.into(),
            source: source.into(),
        }
    }
}

/// The text of a caught panic's payload.
pub(crate) fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => payload.downcast_ref::<&str>().map_or_else(
            || "a panic without a message".to_owned(),
            |t| (*t).to_owned(),
        ),
    }
}
