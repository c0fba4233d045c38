//! Tools: what a model may call, what a call may reach, what it returns and how it fails.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use waypoint_checkpoint::BoxError;
use waypoint_store::Store;

use crate::command::Command;
use crate::context::Context;
use crate::messages::{Content, ToolMessage};
use crate::state::State;

/// A tool a model can call: a name, a description and the JSON schema of its arguments for
/// the model, and an async call.
///
/// A call returns what the tool message answering it says ([`ToolOutput::Content`]), a whole
/// [`ToolMessage`], or a [`Command`] updating the graph's state and routing. An error becomes
/// an error tool message or fails the node, as the [`ToolNode`](super::ToolNode)'s
/// [`HandleToolErrors`](super::HandleToolErrors) says; an
/// [`Interrupt`](crate::Interrupt) (from [`Context::interrupt`]) always pauses the run.
#[async_trait::async_trait]
pub trait Tool<S: State>: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What it does, for the model.
    fn description(&self) -> &str;

    /// The JSON schema of its arguments (an object schema).
    fn args_schema(&self) -> Value;

    /// Runs one call with its arguments (a JSON object) and what the call may reach.
    async fn call(&self, args: Value, ctx: ToolContext<S>) -> Result<ToolOutput<S>, BoxError>;

    /// Whether a ReAct agent ends its run once this tool answered, without another model
    /// call (LangChain's `return_direct`); `false` unless wrapped by [`return_direct`].
    fn return_direct(&self) -> bool {
        false
    }

    /// What a model is told about the tool.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            parameters: self.args_schema(),
        }
    }
}

/// What a model is told about a tool: its name, description and argument schema.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON schema of its arguments.
    pub parameters: Value,
}

impl ToolSpec {
    /// The spec as an OpenAI Chat Completions `tools` entry.
    pub fn to_openai(&self) -> Value {
        json!({"type": "function", "function": self})
    }
}

/// What one tool call can reach besides its arguments: the graph's state (LangGraph's
/// `InjectedState`), the store (`InjectedStore`), the call's id (`InjectedToolCallId`) and
/// the node's [`Context`] (config, custom stream, `interrupt`).
#[derive(Clone, Debug)]
pub struct ToolContext<S> {
    pub(crate) state: Arc<S>,
    pub(crate) tool_call_id: String,
    pub(crate) ctx: Context,
}

impl<S> ToolContext<S> {
    /// The graph's state as the tool node received it.
    pub fn state(&self) -> &Arc<S> {
        &self.state
    }

    /// The id of the call being answered; a [`Command`]'s tool message must repeat it.
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The long-term store the graph was compiled with.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.ctx.store()
    }

    /// The store, or an error saying the graph was compiled without one.
    pub fn require_store(&self) -> crate::Result<&Arc<dyn Store>> {
        self.ctx.require_store()
    }

    /// The tool node's context (run config, custom stream, `interrupt`).
    pub fn context(&self) -> &Context {
        &self.ctx
    }
}

/// What a tool call returns.
#[derive(Clone, Debug)]
pub enum ToolOutput<S: State> {
    /// The content of the tool message answering the call.
    Content(Content),
    /// The tool message itself (say, with an `artifact`); its call id and name are filled in.
    Message(ToolMessage),
    /// A state update and destinations; its update must answer the call with a tool message
    /// carrying the call's id (LangGraph's rule: every tool call gets its tool message).
    Command(Command<S>),
}

/// Content block types a tool may return as a list (LangChain's `TOOL_MESSAGE_BLOCK_TYPES`).
const BLOCK_TYPES: [&str; 8] = [
    "text",
    "image_url",
    "image",
    "json",
    "search_result",
    "custom_tool_call_output",
    "document",
    "file",
];

impl<S: State> From<Value> for ToolOutput<S> {
    /// A string as it is, a list of content blocks as blocks, any other JSON as its text
    /// (as LangGraph's `msg_content_output`).
    fn from(value: Value) -> Self {
        let is_blocks = |items: &[Value]| {
            items.iter().all(|item| {
                item.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|kind| BLOCK_TYPES.contains(&kind))
            })
        };
        ToolOutput::Content(match value {
            Value::String(text) => Content::Text(text),
            Value::Array(items) if is_blocks(&items) => Content::Blocks(items),
            other => Content::Text(other.to_string()),
        })
    }
}

impl<S: State> From<String> for ToolOutput<S> {
    fn from(text: String) -> Self {
        ToolOutput::Content(Content::Text(text))
    }
}

impl<S: State> From<&str> for ToolOutput<S> {
    fn from(text: &str) -> Self {
        ToolOutput::Content(Content::Text(text.to_owned()))
    }
}

impl<S: State> From<Content> for ToolOutput<S> {
    fn from(content: Content) -> Self {
        ToolOutput::Content(content)
    }
}

impl<S: State> From<ToolMessage> for ToolOutput<S> {
    fn from(message: ToolMessage) -> Self {
        ToolOutput::Message(message)
    }
}

impl<S: State> From<Command<S>> for ToolOutput<S> {
    fn from(command: Command<S>) -> Self {
        ToolOutput::Command(command)
    }
}

/// Why a tool call failed; its `Display` is the text of the error tool message LangGraph
/// writes for it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The model called a tool the node does not have.
    #[error("Error: {name} is not a valid tool, try one of [{}].", available.join(", "))]
    UnknownTool {
        /// The name called.
        name: String,
        /// The node's tools.
        available: Vec<String>,
    },
    /// The arguments do not fit the tool.
    #[error(
        "Error invoking tool '{tool}' with kwargs {args} with error:\n {error}\n Please fix the error and try again."
    )]
    InvalidArgs {
        /// The tool called.
        tool: String,
        /// The arguments it got.
        args: Value,
        /// What is wrong with them.
        error: String,
    },
    /// The tool returned an error (or a [`Command`] that does not answer the call).
    #[error("{0}")]
    Failed(BoxError),
    /// The tool panicked; the panic was caught and the process goes on.
    #[error("tool `{tool}` panicked: {message}")]
    Panicked {
        /// The tool called.
        tool: String,
        /// The panic's message.
        message: String,
    },
}

/// A [`Tool`] made from an async closure by [`tool`].
pub struct FnTool<S, A, F> {
    name: String,
    description: String,
    args_schema: Value,
    func: F,
    _types: PhantomData<fn(A, S)>,
}

/// A tool from an async closure of its arguments (any `Deserialize` type, or `Value`) and a
/// [`ToolContext`]; arguments that do not deserialize are [`ToolError::InvalidArgs`].
pub fn tool<S, A, F, Fut, O>(
    name: impl Into<String>,
    description: impl Into<String>,
    args_schema: Value,
    func: F,
) -> Arc<dyn Tool<S>>
where
    S: State,
    A: DeserializeOwned + Send + 'static,
    F: Fn(A, ToolContext<S>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, BoxError>> + Send + 'static,
    O: Into<ToolOutput<S>>,
{
    Arc::new(FnTool {
        name: name.into(),
        description: description.into(),
        args_schema,
        func,
        _types: PhantomData,
    })
}

#[async_trait::async_trait]
impl<S, A, F, Fut, O> Tool<S> for FnTool<S, A, F>
where
    S: State,
    A: DeserializeOwned + Send + 'static,
    F: Fn(A, ToolContext<S>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, BoxError>> + Send + 'static,
    O: Into<ToolOutput<S>>,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn args_schema(&self) -> Value {
        self.args_schema.clone()
    }

    async fn call(&self, args: Value, ctx: ToolContext<S>) -> Result<ToolOutput<S>, BoxError> {
        let typed =
            serde_json::from_value::<A>(args.clone()).map_err(|e| ToolError::InvalidArgs {
                tool: self.name.clone(),
                args,
                error: e.to_string(),
            })?;
        Ok((self.func)(typed, ctx).await?.into())
    }
}

/// `tool` made to [return directly](Tool::return_direct): the agent's run ends with its answer.
pub fn return_direct<S: State>(tool: Arc<dyn Tool<S>>) -> Arc<dyn Tool<S>> {
    Arc::new(ReturnDirect(tool))
}

/// A tool that returns directly, made by [`return_direct`].
struct ReturnDirect<S>(Arc<dyn Tool<S>>);

#[async_trait::async_trait]
impl<S: State> Tool<S> for ReturnDirect<S> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn description(&self) -> &str {
        self.0.description()
    }

    fn args_schema(&self) -> Value {
        self.0.args_schema()
    }

    async fn call(&self, args: Value, ctx: ToolContext<S>) -> Result<ToolOutput<S>, BoxError> {
        self.0.call(args, ctx).await
    }

    fn return_direct(&self) -> bool {
        true
    }
}
