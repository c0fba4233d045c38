//! The ReAct agent: a chat model and its tools in a loop (LangGraph's `create_react_agent`).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::Value;
use waypoint_checkpoint::{BoxError, CheckpointSaver};
use waypoint_store::Store;

use crate::builder::StateGraph;
use crate::config::CompileOptions;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::messages::{AiMessage, Message};
use crate::prebuilt::tool::{Tool, ToolSpec};
use crate::prebuilt::tool_node::{HandleToolErrors, ToolNode};
use crate::prebuilt::{HasMessages, tools_condition};
use crate::pregel::CompiledGraph;
use crate::pregel::graph::{END, NodeResult, START};

/// A chat model as the agent calls it: the conversation and the tools it may call in, one
/// AI message (with or without tool calls) out.
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync {
    /// The model's reply to `messages`, offered `tools`.
    async fn invoke(&self, messages: &[Message], tools: &[ToolSpec])
    -> Result<AiMessage, BoxError>;

    /// The model's reply to `messages` as a JSON value fitting `schema` (LangChain's
    /// `with_structured_output`), for an agent's [`ResponseFormat`]; by default an error
    /// saying the model cannot.
    async fn invoke_structured(
        &self,
        _messages: &[Message],
        _schema: &Value,
    ) -> Result<Value, BoxError> {
        Err("this chat model gives no structured output: implement \
             `ChatModel::invoke_structured` to use an agent's `response_format`"
            .into())
    }
}

#[async_trait::async_trait]
impl<M: ChatModel + ?Sized> ChatModel for Arc<M> {
    async fn invoke(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<AiMessage, BoxError> {
        (**self).invoke(messages, tools).await
    }

    async fn invoke_structured(
        &self,
        messages: &[Message],
        schema: &Value,
    ) -> Result<Value, BoxError> {
        (**self).invoke_structured(messages, schema).await
    }
}

/// A model replying with the messages it was given, in order, for tests and examples
/// (structured replies from their own list); it records what each call was sent.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    replies: Mutex<VecDeque<AiMessage>>,
    calls: Mutex<Vec<(Vec<Message>, Vec<ToolSpec>)>>,
    structured: Mutex<VecDeque<Value>>,
    structured_calls: Mutex<Vec<(Vec<Message>, Value)>>,
}

/// The value behind `mutex`, even if a thread panicked holding it.
fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ScriptedModel {
    /// A model giving `replies`, one per call; a call after the last is an error.
    pub fn new(replies: impl IntoIterator<Item = AiMessage>) -> Self {
        ScriptedModel {
            replies: Mutex::new(replies.into_iter().collect()),
            ..ScriptedModel::default()
        }
    }

    /// The same model giving `responses`, one per structured call.
    pub fn with_structured(self, responses: impl IntoIterator<Item = Value>) -> Self {
        locked(&self.structured).extend(responses);
        self
    }

    /// What each call was sent: the messages and the tools.
    pub fn calls(&self) -> Vec<(Vec<Message>, Vec<ToolSpec>)> {
        locked(&self.calls).clone()
    }

    /// What each structured call was sent: the messages and the schema.
    pub fn structured_calls(&self) -> Vec<(Vec<Message>, Value)> {
        locked(&self.structured_calls).clone()
    }
}

#[async_trait::async_trait]
impl ChatModel for ScriptedModel {
    async fn invoke(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<AiMessage, BoxError> {
        locked(&self.calls).push((messages.to_vec(), tools.to_vec()));
        locked(&self.replies)
            .pop_front()
            .ok_or_else(|| "the scripted model has no reply left".into())
    }

    async fn invoke_structured(
        &self,
        messages: &[Message],
        schema: &Value,
    ) -> Result<Value, BoxError> {
        locked(&self.structured_calls).push((messages.to_vec(), schema.clone()));
        locked(&self.structured)
            .pop_front()
            .ok_or_else(|| "the scripted model has no structured reply left".into())
    }
}

/// What the agent answers when it runs out of steps (LangGraph's words).
pub const NEED_MORE_STEPS: &str = "Sorry, need more steps to process this request.";

/// The structured response an agent produces after its loop (LangGraph's `response_format`):
/// one more model call, sent the conversation (after `prompt`, if any) and `schema`, whose
/// JSON reply is stored under the state's structured response
/// ([`HasMessages::structured_response_update`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseFormat {
    /// The JSON schema the response fits.
    pub schema: Value,
    /// A system message put before the conversation on that call.
    pub prompt: Option<String>,
}

impl ResponseFormat {
    /// A response fitting `schema`.
    pub fn new(schema: Value) -> Self {
        ResponseFormat {
            schema,
            prompt: None,
        }
    }

    /// The same format with system prompt `prompt` on the structured call.
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = Some(prompt.into());
        self
    }
}

/// How [`create_react_agent`] builds its graph.
#[derive(Debug, Default)]
pub struct AgentOptions {
    /// A system message put before the conversation on each model call (not stored).
    pub prompt: Option<String>,
    /// What the tool node does with failed calls.
    pub handle_tool_errors: HandleToolErrors,
    /// The structured response made after the loop, if any.
    pub response_format: Option<ResponseFormat>,
    /// The checkpointer, store and breakpoints the graph is compiled with.
    pub compile: CompileOptions,
}

impl AgentOptions {
    /// The same options with system prompt `prompt`.
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = Some(prompt.into());
        self
    }

    /// The same options handling failed tool calls as `handle` says.
    pub fn handle_tool_errors(mut self, handle: impl Into<HandleToolErrors>) -> Self {
        self.handle_tool_errors = handle.into();
        self
    }

    /// The same options ending with a structured response as `format` says.
    pub fn response_format(mut self, format: ResponseFormat) -> Self {
        self.response_format = Some(format);
        self
    }

    /// The same options compiling with `compile`.
    pub fn compile(mut self, compile: CompileOptions) -> Self {
        self.compile = compile;
        self
    }

    /// The same options with `checkpointer`.
    pub fn checkpointer(mut self, checkpointer: Arc<dyn CheckpointSaver>) -> Self {
        self.compile = self.compile.checkpointer(checkpointer);
        self
    }

    /// The same options with `store`.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.compile = self.compile.store(store);
        self
    }

    /// The same options pausing before `nodes` (`["tools"]`: a human reviews each tool call).
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.compile = self.compile.interrupt_before(nodes);
        self
    }

    /// The same options pausing after `nodes`.
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.compile = self.compile.interrupt_after(nodes);
        self
    }
}

/// A ReAct agent (LangGraph's `create_react_agent`): node `agent` calls `model` with the
/// conversation (after the prompt) and the tools; a reply calling tools goes to node `tools`
/// (a [`ToolNode`]), which hands back to `agent`, or ends the run when one of the answered
/// tools [returns directly](Tool::return_direct). A reply without tool calls ends the run,
/// after node `generate_structured_response` when options have a [`ResponseFormat`].
/// Without tools the graph has no `tools` node.
///
/// Before its recursion limit stops the run, the agent answers [`NEED_MORE_STEPS`] instead
/// of the model's reply (as LangGraph: when a reply calls tools with fewer than 2
/// [remaining steps](Context::remaining_steps)).
///
/// Fails on two tools with one name, on breakpoints naming other nodes, and on a response
/// format for a state with no place for it.
pub fn create_react_agent<S: HasMessages + Default>(
    model: impl ChatModel + 'static,
    tools: Vec<Arc<dyn Tool<S>>>,
    options: AgentOptions,
) -> Result<CompiledGraph<S>> {
    create_react_agent_with_state(S::default(), model, tools, options)
}

/// [`create_react_agent`] whose runs start from `template`: a [`JsonState`](crate::JsonState)
/// of a schema with a `messages` key (and `structured_response` for a response format), so
/// a schema-less graph runs the agent.
pub fn create_react_agent_with_state<S: HasMessages>(
    template: S,
    model: impl ChatModel + 'static,
    tools: Vec<Arc<dyn Tool<S>>>,
    options: AgentOptions,
) -> Result<CompiledGraph<S>> {
    let model: Arc<dyn ChatModel> = Arc::new(model);
    let specs: Arc<[ToolSpec]> = tools.iter().map(|t| t.spec()).collect();
    let has_tools = !tools.is_empty();
    let return_direct: Arc<HashSet<String>> = Arc::new(
        tools
            .iter()
            .filter(|t| t.return_direct())
            .map(|t| t.name().to_owned())
            .collect(),
    );
    let tool_node = ToolNode::new(tools)?.handle_tool_errors(options.handle_tool_errors);
    let prompt = options.prompt.map(Message::system);
    let mut graph = StateGraph::with_state(template);
    let agent_model = Arc::clone(&model);
    graph.add_node("agent", move |state: Arc<S>, ctx: Context| {
        let (model, specs, prompt) = (Arc::clone(&agent_model), Arc::clone(&specs), prompt.clone());
        async move {
            let mut messages: Vec<Message> = prompt.into_iter().collect();
            messages.extend_from_slice(&state.messages()?);
            let reply = ctx.invoke_model(&*model, &messages, &specs).await?;
            let reply = if needs_more_steps(&reply, &ctx) {
                AiMessage {
                    id: reply.id,
                    content: NEED_MORE_STEPS.into(),
                    ..AiMessage::default()
                }
            } else {
                reply
            };
            NodeResult::Ok(crate::Command::update(S::messages_update(vec![
                Message::Ai(reply),
            ])))
        }
    });
    graph.add_edge(START, "agent");
    let finish = match options.response_format {
        Some(format) => {
            if S::structured_response_update(Value::Null).is_none() {
                return Err(Error::InvalidGraph(
                    "a response_format needs a state with a structured response: implement \
                     `HasMessages::structured_response_update` for it"
                        .into(),
                ));
            }
            graph.add_node(STRUCTURED_NODE, structured_node::<S>(model, format));
            graph.add_edge(STRUCTURED_NODE, END);
            STRUCTURED_NODE
        }
        None => END,
    };
    if has_tools {
        graph.add_node("tools", tool_node.as_node());
        graph.add_conditional_edges(
            "agent",
            move |state: &S| match tools_condition(state) {
                END => finish,
                tools => tools,
            },
            ["tools", finish],
        );
        if return_direct.is_empty() {
            graph.add_edge("tools", "agent");
        } else {
            graph.add_conditional_edges(
                "tools",
                move |state: &S| after_tools(state, &return_direct),
                ["agent", END],
            );
        }
    } else {
        graph.add_edge("agent", finish);
    }
    graph.compile(options.compile)
}

/// The node making the structured response.
const STRUCTURED_NODE: &str = "generate_structured_response";

/// Whether the agent must stop rather than follow `reply` (LangGraph's
/// `_are_more_steps_needed`): the reply calls tools and fewer than 2 steps remain, so the
/// tools and the next model call would not both fit. (LangGraph's other case, tools that all
/// return directly with no step left, falls within it.)
fn needs_more_steps(reply: &AiMessage, ctx: &Context) -> bool {
    !reply.tool_calls.is_empty() && ctx.remaining_steps() < 2
}

/// Where the run goes after the tool node (LangGraph's `route_tool_responses`): [`END`] when
/// one of the last tool messages answers a tool returning directly, else `agent`.
fn after_tools<S: HasMessages>(state: &S, return_direct: &HashSet<String>) -> &'static str {
    let Ok(messages) = state.messages() else {
        return "agent";
    };
    let direct = messages
        .iter()
        .rev()
        .map_while(|m| match m {
            Message::Tool(tool) => Some(tool),
            _ => None,
        })
        .any(|tool| {
            tool.name
                .as_ref()
                .is_some_and(|n| return_direct.contains(n))
        });
    if direct { END } else { "agent" }
}

/// The node calling `model` for the structured response `format` asks for.
fn structured_node<S: HasMessages>(
    model: Arc<dyn ChatModel>,
    format: ResponseFormat,
) -> impl Fn(Arc<S>, Context) -> BoxFuture<'static, NodeResult<crate::Command<S>>> + Send + Sync {
    let prompt = format.prompt.map(Message::system);
    let schema = Arc::new(format.schema);
    move |state: Arc<S>, _ctx: Context| {
        let (model, schema, prompt) = (Arc::clone(&model), Arc::clone(&schema), prompt.clone());
        Box::pin(async move {
            let mut messages: Vec<Message> = prompt.into_iter().collect();
            messages.extend_from_slice(&state.messages()?);
            let response = model.invoke_structured(&messages, &schema).await?;
            let update = S::structured_response_update(response)
                .ok_or("the state has no place for a structured response")?;
            NodeResult::Ok(crate::Command::update(update))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that only chats.
    struct ChatOnly;

    #[async_trait::async_trait]
    impl ChatModel for ChatOnly {
        async fn invoke(&self, _: &[Message], _: &[ToolSpec]) -> Result<AiMessage, BoxError> {
            Ok(AiMessage::default())
        }
    }

    #[tokio::test]
    async fn a_model_without_structured_output_says_so() {
        let err = ChatOnly
            .invoke_structured(&[], &Value::Null)
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("no structured output"), "{err}");
        assert!(err.contains("invoke_structured"), "{err}");
    }
}
