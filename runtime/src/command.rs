//! What a node returns: a state update and where to go next.

use serde_json::Value;

use crate::interrupt::Resume;
use crate::state::State;

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

/// Which graph a node's [`Command`] is for (LangGraph's `Command.graph`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommandGraph {
    /// The graph the node belongs to.
    #[default]
    Current,
    /// The graph that called the node's graph as a subgraph (LangGraph's
    /// `Command.PARENT`): the subgraph stops, and the parent applies the update (through
    /// its reducers, as the update of the node that ran the subgraph) and goes to `goto`.
    Parent,
}

/// A [`Command`] for the parent graph on its way up: the error a subgraph's run ends with
/// when one of its nodes returns [`CommandGraph::Parent`] (LangGraph's `ParentCommand`).
/// The node that called the subgraph propagates it with `?` and its graph applies it.
#[derive(Clone, Debug, PartialEq)]
pub struct ParentCommand {
    /// The subgraph node that returned it.
    pub node: String,
    /// The update, as JSON, read as the parent's update type.
    pub update: Option<Value>,
    /// The parent's nodes to go to.
    pub goto: Vec<String>,
}

impl std::fmt::Display for ParentCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node `{}` sent a command to the parent graph (goto {:?}); the node that called \
             the subgraph must propagate it with `?`",
            self.node, self.goto
        )
    }
}

impl std::error::Error for ParentCommand {}

/// An update, destinations and resume values (LangGraph's `Command`): what a node returns,
/// or the input that resumes an interrupted thread.
///
/// A node returning a plain update converts into `Command { update: Some(..), .. }`, so the
/// graph's edges decide what runs next; a non-empty `goto` adds destinations. As an input,
/// `resume` answers pending interrupts and `update` is applied before the run goes on.
/// With `graph: CommandGraph::Parent`, a node of a subgraph sends the update and `goto`
/// to the parent graph instead (see [`Command::to_parent`]).
#[derive(Clone, Debug)]
pub struct Command<S: State> {
    /// The update folded into the state through the reducers.
    pub update: Option<S::Update>,
    /// Where to go next, in addition to the node's static edges.
    pub goto: Vec<Goto<S>>,
    /// Answers to pending interrupts (input only).
    pub resume: Option<Resume>,
    /// The graph the update and `goto` are for.
    pub graph: CommandGraph,
}

impl<S: State> Default for Command<S> {
    fn default() -> Self {
        Command {
            update: None,
            goto: Vec::new(),
            resume: None,
            graph: CommandGraph::Current,
        }
    }
}

impl<S: State> Command<S> {
    /// A command that only updates the state.
    pub fn update(update: S::Update) -> Self {
        Command {
            update: Some(update),
            ..Command::default()
        }
    }

    /// A command that only routes.
    pub fn goto(goto: impl Into<Goto<S>>) -> Self {
        Command {
            goto: vec![goto.into()],
            ..Command::default()
        }
    }

    /// A command for the parent graph (LangGraph's `Command(graph=Command.PARENT, ...)`):
    /// go to `goto`, a node of the parent, with no update yet (add one with
    /// [`Command::with_update`]; the parent reads it through JSON as its own update type).
    pub fn to_parent(goto: impl Into<String>) -> Self {
        Command {
            goto: vec![Goto::Node(goto.into())],
            graph: CommandGraph::Parent,
            ..Command::default()
        }
    }

    /// An input answering the one pending interrupt with `value`.
    pub fn resume(value: impl Into<Value>) -> Self {
        Command {
            resume: Some(Resume::One(value.into())),
            ..Command::default()
        }
    }

    /// An input answering several pending interrupts, by interrupt id.
    pub fn resume_by_id<K: Into<String>, V: Into<Value>>(
        answers: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Command {
            resume: Some(Resume::ById(
                answers
                    .into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            )),
            ..Command::default()
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
