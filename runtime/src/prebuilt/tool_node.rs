//! `ToolNode`: runs the tool calls of the last AI message in parallel and answers each with
//! a tool message, as LangGraph's prebuilt `ToolNode` does.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use waypoint_checkpoint::BoxError;

use crate::command::{Command, CommandGraph, ParentCommand};
use crate::context::Context;
use crate::error::{Error, Result, panic_message};
use crate::interrupt::Interrupt;
use crate::messages::{Content, Message, ToolCall, ToolMessage, ToolStatus};
use crate::prebuilt::HasMessages;
use crate::prebuilt::tool::{Tool, ToolContext, ToolError, ToolOutput};
use crate::pregel::graph::NodeResult;
use crate::state::State;

/// What a [`ToolNode`] does with a failed tool call (LangGraph's `handle_tool_errors`).
///
/// A call of an unknown tool is always answered with an error tool message, whatever this
/// says, as in LangGraph.
#[derive(Clone, Default)]
pub enum HandleToolErrors {
    /// Answer with an error tool message (status `error`): the arguments' error for
    /// [`ToolError::InvalidArgs`], `Error: {error}\n Please fix your mistakes.` for a tool
    /// that failed or panicked (default, as `handle_tool_errors=True`).
    #[default]
    All,
    /// Fail the node with the [`ToolError`] (a panic, too, is an error, never a crash).
    Off,
    /// Answer with this text.
    Message(String),
    /// Answer with what this function says of the error.
    With(Arc<dyn Fn(&ToolError) -> String + Send + Sync>),
}

impl std::fmt::Debug for HandleToolErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandleToolErrors::All => f.write_str("All"),
            HandleToolErrors::Off => f.write_str("Off"),
            HandleToolErrors::Message(text) => f.debug_tuple("Message").field(text).finish(),
            HandleToolErrors::With(_) => f.write_str("With(..)"),
        }
    }
}

impl From<bool> for HandleToolErrors {
    fn from(handle: bool) -> Self {
        if handle {
            HandleToolErrors::All
        } else {
            HandleToolErrors::Off
        }
    }
}

impl From<&str> for HandleToolErrors {
    fn from(text: &str) -> Self {
        HandleToolErrors::Message(text.to_owned())
    }
}

impl HandleToolErrors {
    /// The error tool message's text, or `None` when the error fails the node.
    fn content(&self, error: &ToolError) -> Option<String> {
        let is_unknown = matches!(error, ToolError::UnknownTool { .. });
        match self {
            _ if is_unknown => Some(error.to_string()),
            HandleToolErrors::Off => None,
            HandleToolErrors::All => Some(match error {
                ToolError::InvalidArgs { .. } => error.to_string(),
                _ => format!("Error: {error}\n Please fix your mistakes."),
            }),
            HandleToolErrors::Message(text) => Some(text.clone()),
            HandleToolErrors::With(handler) => Some(handler(error)),
        }
    }
}

/// A node running the tool calls of the conversation's last AI message (LangGraph's
/// `ToolNode`).
///
/// The calls run in parallel, each in its own task. The node answers them with one
/// [`ToolMessage`] each, in the calls' order, each carrying its call's id and the tool's
/// name. A failed call (an error, arguments that do not fit, an unknown tool, a panic) is
/// answered with a tool message of status `error`, or fails the node, as
/// [`HandleToolErrors`] says; a panicking tool never takes the process down. An
/// [`Interrupt`] raised by a tool (or by a subgraph it runs) pauses the run, and the node
/// runs every call again on resume, as in LangGraph.
///
/// Tools returning a [`Command`] have their updates applied in the calls' order, with the
/// other calls' tool messages between them, and their destinations added. Several
/// updates may write the same channel only if it appends (`append`, `add_messages`);
/// otherwise the node fails naming the channel. A command for the parent graph
/// ([`Command::to_parent`], a handoff) needs no tool message of its own; it ends this
/// graph, so when one is returned, the node sends the parent commands (merged) and the
/// other calls' answers are not written, as in LangGraph.
///
/// Add it with `graph.add_node("tools", tool_node.as_node())`.
pub struct ToolNode<S: State> {
    tools: Arc<HashMap<String, Arc<dyn Tool<S>>>>,
    /// Tool names in the order given, for the unknown-tool message.
    names: Arc<[String]>,
    handle_errors: HandleToolErrors,
}

impl<S: State> Clone for ToolNode<S> {
    fn clone(&self) -> Self {
        ToolNode {
            tools: Arc::clone(&self.tools),
            names: Arc::clone(&self.names),
            handle_errors: self.handle_errors.clone(),
        }
    }
}

impl<S: State> std::fmt::Debug for ToolNode<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolNode")
            .field("tools", &self.names)
            .field("handle_errors", &self.handle_errors)
            .finish()
    }
}

/// One call's answer: a tool message or a tool's command.
enum Answer<S: State> {
    Message(ToolMessage),
    Command(Command<S>),
}

impl<S: HasMessages> ToolNode<S> {
    /// A node running `tools`; two tools with one name are an [`Error::InvalidGraph`].
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool<S>>>) -> Result<Self> {
        let mut by_name = HashMap::new();
        let mut names = Vec::new();
        for tool in tools {
            let name = tool.name().to_owned();
            if by_name.insert(name.clone(), tool).is_some() {
                return Err(Error::InvalidGraph(format!(
                    "two tools are named `{name}`: a tool node calls tools by name"
                )));
            }
            names.push(name);
        }
        Ok(ToolNode {
            tools: Arc::new(by_name),
            names: names.into(),
            handle_errors: HandleToolErrors::default(),
        })
    }

    /// The same node handling failed calls as `handle` says.
    pub fn handle_tool_errors(mut self, handle: impl Into<HandleToolErrors>) -> Self {
        self.handle_errors = handle.into();
        self
    }

    /// The tools, in the order given.
    pub fn tools(&self) -> Vec<Arc<dyn Tool<S>>> {
        self.names
            .iter()
            .filter_map(|name| self.tools.get(name).cloned())
            .collect()
    }

    /// The node function for [`StateGraph::add_node`](crate::StateGraph::add_node).
    pub fn as_node(
        &self,
    ) -> impl Fn(Arc<S>, Context) -> BoxFuture<'static, NodeResult<Command<S>>> + Send + Sync + 'static
    {
        let node = self.clone();
        move |state, ctx| {
            let node = node.clone();
            Box::pin(async move { node.run(state, ctx).await })
        }
    }

    /// Runs the tool calls of the last AI message of `state`'s conversation and returns the
    /// node's command.
    pub async fn run(&self, state: Arc<S>, ctx: Context) -> NodeResult<Command<S>> {
        let calls = state
            .messages()?
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Ai(ai) => Some(ai.tool_calls.clone()),
                _ => None,
            })
            .ok_or("the tool node found no AI message in the conversation")?;
        let mut answers: Vec<Option<Answer<S>>> = Vec::with_capacity(calls.len());
        // Each call in its own task, so that tools run in parallel and a panic stays in
        // its task (the join reports it); dropping the set aborts calls still running.
        let mut tasks = tokio::task::JoinSet::new();
        let mut task_calls = HashMap::new();
        for (index, call) in calls.iter().enumerate() {
            answers.push(None);
            let Some(tool) = self.tools.get(&call.name).cloned() else {
                let error = ToolError::UnknownTool {
                    name: call.name.clone(),
                    available: self.names.to_vec(),
                };
                answers[index] = Some(self.answer_error(call, error)?);
                continue;
            };
            let tool_ctx = ToolContext {
                state: Arc::clone(&state),
                tool_call_id: call.id.clone().unwrap_or_default(),
                ctx: ctx.clone(),
            };
            let args = match &call.args {
                Value::Object(_) => call.args.clone(),
                Value::Null => Value::Object(Map::new()),
                other => {
                    let error = ToolError::InvalidArgs {
                        tool: call.name.clone(),
                        args: other.clone(),
                        error: "the arguments must be a JSON object".into(),
                    };
                    answers[index] = Some(self.answer_error(call, error)?);
                    continue;
                }
            };
            // In the node's context, so that a graph the tool runs is the node's subgraph.
            let node_ctx = ctx.clone();
            let task = tasks.spawn(async move {
                crate::context::scope(node_ctx, tool.call(args, tool_ctx)).await
            });
            task_calls.insert(task.id(), index);
        }
        while let Some(joined) = tasks.join_next_with_id().await {
            let (id, result) = match joined {
                Ok((id, result)) => (id, result),
                Err(error) if error.is_panic() => {
                    let id = error.id();
                    let index = task_calls[&id];
                    let panicked = ToolError::Panicked {
                        tool: calls[index].name.clone(),
                        message: panic_message(error.into_panic()),
                    };
                    answers[index] = Some(self.answer_error(&calls[index], panicked)?);
                    continue;
                }
                Err(error) => return Err(Box::new(error)),
            };
            let index = task_calls[&id];
            answers[index] = Some(self.answer(&calls[index], result)?);
        }
        let answers = answers.into_iter().flatten().collect();
        combine(&state, answers)
    }

    /// The answer to `call` from its tool's `result`.
    fn answer(
        &self,
        call: &ToolCall,
        result: std::result::Result<ToolOutput<S>, BoxError>,
    ) -> NodeResult<Answer<S>> {
        let output = match result {
            Ok(output) => output,
            Err(error) => {
                // A pause, or a subgraph's command for this graph, goes up as it is (as
                // LangGraph re-raises `GraphBubbleUp`).
                let error = crate::context::bubbled(error);
                if error.is::<Interrupt>() || error.is::<ParentCommand>() {
                    return Err(error);
                }
                let error = match error.downcast::<ToolError>() {
                    Ok(error) => *error,
                    Err(error) => ToolError::Failed(error),
                };
                return self.answer_error(call, error);
            }
        };
        let call_id = call.id.clone().unwrap_or_default();
        match output {
            ToolOutput::Content(content) => Ok(Answer::Message(ToolMessage {
                content,
                name: Some(call.name.clone()),
                tool_call_id: call_id,
                ..ToolMessage::default()
            })),
            ToolOutput::Message(mut message) => {
                message.tool_call_id = call_id;
                message.name.get_or_insert_with(|| call.name.clone());
                Ok(Answer::Message(message))
            }
            ToolOutput::Command(command) => match checked_command(command, call) {
                Ok(command) => Ok(Answer::Command(command)),
                Err(error) => self.answer_error(call, ToolError::Failed(error.into())),
            },
        }
    }

    /// The error tool message answering `call`, or the error failing the node.
    fn answer_error(&self, call: &ToolCall, error: ToolError) -> NodeResult<Answer<S>> {
        match self.handle_errors.content(&error) {
            Some(text) => Ok(Answer::Message(ToolMessage {
                content: Content::Text(text),
                name: Some(call.name.clone()),
                tool_call_id: call.id.clone().unwrap_or_default(),
                status: ToolStatus::Error,
                ..ToolMessage::default()
            })),
            None => Err(Box::new(error)),
        }
    }
}

/// A tool's command as the node applies it: its update must answer `call` with a tool
/// message carrying the call's id (which gets the tool's name), unless it removes every
/// message; a command without an update only routes. A resume is for inputs only.
fn checked_command<S: HasMessages>(
    mut command: Command<S>,
    call: &ToolCall,
) -> std::result::Result<Command<S>, String> {
    if command.resume.is_some() {
        return Err(format!(
            "tool `{}` returned a Command with `resume`, which only an input can carry",
            call.name
        ));
    }
    let Some(update) = command.update.as_mut() else {
        return Ok(command);
    };
    let call_id = call.id.as_deref().unwrap_or_default();
    let taken = S::take_update_messages(update).map_err(|e| e.to_string())?;
    let writes_messages = taken.is_some();
    let messages = taken.unwrap_or_default();
    let removes_all = matches!(messages.as_slice(),
        [Message::Remove(r)] if r.id == crate::messages::REMOVE_ALL_MESSAGES);
    let mut answered = false;
    let messages: Vec<Message> = messages
        .into_iter()
        .map(|mut message| {
            if let Message::Tool(tool) = &mut message
                && tool.tool_call_id == call_id
            {
                tool.name = Some(call.name.clone());
                answered = true;
            }
            message
        })
        .collect();
    if !answered && !removes_all && command.graph == CommandGraph::Current {
        return Err(format!(
            "Expected to have a matching ToolMessage in Command.update for tool '{}'. Every \
             tool call (LLM requesting to call a tool) in the message history MUST have a \
             corresponding ToolMessage: return a Command whose update's messages include a \
             tool message with tool_call_id `{call_id}`.",
            call.name
        ));
    }
    if writes_messages {
        S::set_update_messages(update, messages);
    }
    Ok(command)
}

/// The node's command from the calls' answers, in the calls' order: the tool messages as
/// one update when no tool returned a command; else every answer's update folded into one,
/// and the commands' destinations.
fn combine<S: HasMessages>(state: &S, answers: Vec<Answer<S>>) -> NodeResult<Command<S>> {
    if answers.iter().all(|a| matches!(a, Answer::Message(_))) {
        let messages = answers
            .into_iter()
            .filter_map(|a| match a {
                Answer::Message(m) => Some(Message::Tool(m)),
                Answer::Command(_) => None,
            })
            .collect();
        return Ok(Command::update(S::messages_update(messages)));
    }
    let to_parent = answers
        .iter()
        .any(|a| matches!(a, Answer::Command(c) if c.graph == CommandGraph::Parent));
    let mut updates = Vec::new();
    let mut command = Command::default();
    for answer in answers {
        match answer {
            Answer::Command(c) if !to_parent || c.graph == CommandGraph::Parent => {
                updates.extend(c.update);
                command.goto.extend(c.goto);
            }
            Answer::Message(m) if !to_parent => {
                updates.push(S::messages_update(vec![Message::Tool(m)]));
            }
            // A command for the parent ends this graph: only such commands are sent up.
            _ => {}
        }
    }
    if to_parent {
        command.graph = CommandGraph::Parent;
    }
    if !updates.is_empty() {
        command.update = Some(merge_updates(state, updates)?);
    }
    Ok(command)
}

/// One update with the effect of applying `updates` in order: a channel written by several
/// must append (`append`, `add_messages`), and gets their lists joined; any other channel
/// written twice is an [`Error::InvalidUpdate`] naming it (LangGraph refuses two writes to a
/// last-value channel in one step too).
fn merge_updates<S: State>(state: &S, updates: Vec<S::Update>) -> Result<S::Update> {
    let mut merged = Map::new();
    for update in updates {
        let Value::Object(fields) = serde_json::to_value(&update)
            .map_err(|e| Error::InvalidUpdate(format!("a tool's update: {e}")))?
        else {
            return Err(Error::InvalidUpdate(
                "a tool's update is not a JSON object".into(),
            ));
        };
        for (key, value) in fields {
            let appends = state
                .channel_index(&key)
                .is_some_and(|i| state.channels()[i].appending);
            match (merged.get_mut(&key), value) {
                (None, value) => {
                    merged.insert(key, value);
                }
                (Some(Value::Array(items)), Value::Array(more)) if appends => items.extend(more),
                _ => {
                    return Err(Error::InvalidUpdate(format!(
                        "tools of one step wrote `{key}` more than once, and only an appending \
                         channel (append, add_messages) takes several writes"
                    )));
                }
            }
        }
    }
    serde_json::from_value(Value::Object(merged))
        .map_err(|e| Error::InvalidUpdate(format!("the tools' merged update: {e}")))
}
