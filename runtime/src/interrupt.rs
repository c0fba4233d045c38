//! Human in the loop: `interrupt()` inside nodes, resuming with `Command::resume`, static
//! breakpoints, and what a run returns.
//!
//! A node that calls [`crate::Context::interrupt`] stops with an [`Interrupt`]; the runtime
//! saves it as the task's `__interrupt__` write (with the resume values the task already
//! consumed as its `__resume__` write) and ends the run without a new checkpoint. Resuming
//! stores the new value as a `__resume__` write of no task, then runs the interrupted task
//! again from its beginning: its k-th `interrupt` call returns the k-th resume value.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Command, State};

/// A pause requested by a node: the value shown to the human and a stable id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interrupt {
    /// What the node asked (any JSON).
    pub value: Value,
    /// Stable for a task and its k-th `interrupt` call; resume by id with it.
    pub id: String,
}

impl std::fmt::Display for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted ({}): {}", self.id, self.value)
    }
}

impl std::error::Error for Interrupt {}

/// Resume values: one for the single pending interrupt, or one per interrupt id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Resume {
    /// The value for the one pending interrupt.
    One(Value),
    /// Values by interrupt id, when several are pending.
    ById(BTreeMap<String, Value>),
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

/// The id of a task's `index`-th interrupt.
pub(crate) fn interrupt_id(task_id: &str, index: usize) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("{task_id}\u{0}interrupt\u{0}{index}").as_bytes(),
    )
    .simple()
    .to_string()
}

/// One task's resume bookkeeping, shared with its `Context`.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    task_id: String,
    /// `interrupt` calls so far in this attempt.
    calls: usize,
    /// Values of the task's earlier interrupts, in order (its `__resume__` write).
    pub(crate) answered: Vec<Value>,
    /// The resume given to this run, not yet consumed.
    fresh: Option<Resume>,
}

/// A task's scratch, as the context holds it.
pub(crate) type SharedScratch = Arc<Mutex<Scratch>>;

impl Scratch {
    pub(crate) fn new(task_id: &str, answered: Vec<Value>, fresh: Option<Resume>) -> SharedScratch {
        Arc::new(Mutex::new(Scratch {
            task_id: task_id.to_owned(),
            calls: 0,
            answered,
            fresh,
        }))
    }

    /// Takes the resume this run brought for the task, to pass on to a subgraph.
    pub(crate) fn take_fresh(&mut self) -> Option<Resume> {
        self.fresh.take()
    }

    /// The answer to the next `interrupt(value)` call, or the interrupt to raise.
    pub(crate) fn next(&mut self, value: Value) -> Result<Value, Interrupt> {
        let index = self.calls;
        self.calls += 1;
        if let Some(answer) = self.answered.get(index) {
            return Ok(answer.clone());
        }
        let id = interrupt_id(&self.task_id, index);
        let answer = match self.fresh.take() {
            Some(Resume::One(answer)) => Some(answer),
            Some(Resume::ById(mut answers)) => {
                let answer = answers.remove(&id);
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
            None => Err(Interrupt { value, id }),
        }
    }
}
