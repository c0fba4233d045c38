//! Streaming a run: state values, per-node updates, custom data and debug events.

use std::sync::Arc;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use serde_json::Value;

use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::messages::AiMessageChunk;
use crate::state::State;

/// Where `write_custom` values go: the node name and the value.
pub(crate) type CustomSink = Arc<dyn Fn(&str, Value) + Send + Sync>;

/// Where `stream_message` chunks go.
pub(crate) type MessageSink = Arc<dyn Fn(AiMessageChunk, MessageMetadata) + Send + Sync>;

/// What a stream carries (LangGraph's `stream_mode`).
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
    /// tokens), each with where it came from.
    Messages,
}

impl StreamMode {
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

/// One item of a stream; [`StreamPart::mode`] says which mode produced it.
#[derive(Clone, Debug)]
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
    /// The run paused: LangGraph's `__interrupt__` event, with the pending interrupts
    /// (empty for a static breakpoint). Sent with the `updates` or `values` modes.
    Interrupt(Vec<Interrupt>),
}

impl<S: State> StreamPart<S> {
    /// The mode that produced this item.
    pub fn mode(&self) -> StreamMode {
        match self {
            StreamPart::Values(_) => StreamMode::Values,
            StreamPart::Updates { .. } => StreamMode::Updates,
            StreamPart::Custom { .. } => StreamMode::Custom,
            StreamPart::Debug(_) => StreamMode::Debug,
            StreamPart::Messages { .. } => StreamMode::Messages,
            StreamPart::Interrupt(_) => StreamMode::Updates,
        }
    }
}

/// Where a streamed message chunk came from (LangGraph's `langgraph_*` metadata keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageMetadata {
    /// The node streaming it.
    pub node: String,
    /// The super-step it runs in.
    pub step: i64,
    /// The checkpoint namespace of the node's graph (empty at the root).
    pub namespace: String,
    /// The message's id, shared by all its chunks.
    pub id: Option<String>,
}

/// Where a run sends stream items; a no-op for `invoke`.
pub(crate) struct Emitter<S: State> {
    modes: u8,
    tx: Option<UnboundedSender<Result<StreamPart<S>>>>,
}

impl<S: State> Emitter<S> {
    /// An emitter that sends nothing (`invoke`, subgraphs).
    pub(crate) fn none() -> Self {
        Emitter { modes: 0, tx: None }
    }

    /// An emitter of `modes`, and the stream that receives its items.
    pub(crate) fn channel(
        modes: &[StreamMode],
    ) -> (Self, UnboundedReceiver<Result<StreamPart<S>>>) {
        let (tx, rx) = unbounded();
        let emitter = Emitter {
            modes: modes.iter().fold(0, |bits, m| bits | m.bit()),
            tx: Some(tx),
        };
        (emitter, rx)
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
        if let Some(tx) = &self.tx {
            // A dropped stream only means the consumer stopped reading; the run goes on.
            let _ = tx.unbounded_send(Ok(part));
        }
    }

    pub(crate) fn values(&self, state: &S) {
        if self.wants(StreamMode::Values) {
            self.send(StreamPart::Values(state.clone()));
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
        let tx = self.tx.clone()?;
        Some(Arc::new(
            move |chunk: AiMessageChunk, metadata: MessageMetadata| {
                let _ = tx.unbounded_send(Ok(StreamPart::Messages { chunk, metadata }));
            },
        ))
    }

    pub(crate) fn custom_sink(&self) -> Option<CustomSink> {
        if !self.wants(StreamMode::Custom) {
            return None;
        }
        let tx = self.tx.clone()?;
        Some(Arc::new(move |node: &str, value: Value| {
            let _ = tx.unbounded_send(Ok(StreamPart::Custom {
                node: node.to_owned(),
                value,
            }));
        }))
    }
}
