//! What a node returns: a state update and where to go next.

use crate::State;

/// A task for `node` with its own input state (LangGraph's `Send`, for map-reduce).
#[derive(Clone, Debug)]
pub struct Send<S: State> {
    /// The node to run.
    pub node: String,
    /// The state the node receives instead of the graph's.
    pub arg: S,
}

impl<S: State> Send<S> {
    /// A task for `node` receiving `arg`.
    pub fn new(node: impl Into<String>, arg: S) -> Self {
        Send {
            node: node.into(),
            arg,
        }
    }
}

/// One destination: a node by name, or a [`Send`].
#[derive(Clone, Debug)]
pub enum Goto<S: State> {
    /// Run this node in the next step (or end the branch for [`crate::END`]).
    Node(String),
    /// Run a node with its own input.
    Send(Send<S>),
}

impl<S: State> From<&str> for Goto<S> {
    fn from(node: &str) -> Self {
        Goto::Node(node.to_owned())
    }
}

impl<S: State> From<String> for Goto<S> {
    fn from(node: String) -> Self {
        Goto::Node(node)
    }
}

impl<S: State> From<Send<S>> for Goto<S> {
    fn from(send: Send<S>) -> Self {
        Goto::Send(send)
    }
}

/// A node's result: an optional update and optional destinations (LangGraph's `Command`).
///
/// A node returning a plain update converts into `Command { update: Some(..), goto: [] }`,
/// so the graph's edges decide what runs next; a non-empty `goto` adds destinations.
#[derive(Clone, Debug)]
pub struct Command<S: State> {
    /// The update folded into the state through the reducers.
    pub update: Option<S::Update>,
    /// Where to go next, in addition to the node's static edges.
    pub goto: Vec<Goto<S>>,
}

impl<S: State> Default for Command<S> {
    fn default() -> Self {
        Command {
            update: None,
            goto: Vec::new(),
        }
    }
}

impl<S: State> Command<S> {
    /// A command that only updates the state.
    pub fn update(update: S::Update) -> Self {
        Command {
            update: Some(update),
            goto: Vec::new(),
        }
    }

    /// A command that only routes.
    pub fn goto(goto: impl Into<Goto<S>>) -> Self {
        Command {
            update: None,
            goto: vec![goto.into()],
        }
    }

    /// The same command with `update`.
    pub fn with_update(mut self, update: S::Update) -> Self {
        self.update = Some(update);
        self
    }

    /// The same command with one more destination.
    pub fn and_goto(mut self, goto: impl Into<Goto<S>>) -> Self {
        self.goto.push(goto.into());
        self
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for Command<crate::JsonState> {
    fn from(update: serde_json::Map<String, serde_json::Value>) -> Self {
        Command::update(update)
    }
}
