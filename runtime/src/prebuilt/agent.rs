//! The ReAct agent: a chat model and its tools in a loop (LangGraph's `create_react_agent`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use waypoint_checkpoint::{BoxError, CheckpointSaver};
use waypoint_store::Store;

use crate::builder::StateGraph;
use crate::config::CompileOptions;
use crate::context::Context;
use crate::error::Result;
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
}

/// A model replying with the messages it was given, in order, for tests and examples; it
/// records what each call was sent.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    replies: Mutex<VecDeque<AiMessage>>,
    calls: Mutex<Vec<(Vec<Message>, Vec<ToolSpec>)>>,
}

impl ScriptedModel {
    /// A model giving `replies`, one per call; a call after the last is an error.
    pub fn new(replies: impl IntoIterator<Item = AiMessage>) -> Self {
        ScriptedModel {
            replies: Mutex::new(replies.into_iter().collect()),
            calls: Mutex::default(),
        }
    }

    /// What each call was sent: the messages and the tools.
    pub fn calls(&self) -> Vec<(Vec<Message>, Vec<ToolSpec>)> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

#[async_trait::async_trait]
impl ChatModel for ScriptedModel {
    async fn invoke(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<AiMessage, BoxError> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((messages.to_vec(), tools.to_vec()));
        self.replies
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop_front()
            .ok_or_else(|| "the scripted model has no reply left".into())
    }
}

/// How [`create_react_agent`] builds its graph.
#[derive(Debug, Default)]
pub struct AgentOptions {
    /// A system message put before the conversation on each model call (not stored).
    pub prompt: Option<String>,
    /// What the tool node does with failed calls.
    pub handle_tool_errors: HandleToolErrors,
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
/// conversation (after the prompt) and the tools, then [`tools_condition`] routes to node
/// `tools` (a [`ToolNode`]) when the reply calls tools, which hands back to `agent`, or ends.
/// Without tools the graph is `agent` alone.
///
/// Fails on two tools with one name and on breakpoints naming other nodes.
pub fn create_react_agent<S: HasMessages + Default>(
    model: impl ChatModel + 'static,
    tools: Vec<Arc<dyn Tool<S>>>,
    options: AgentOptions,
) -> Result<CompiledGraph<S>> {
    let model: Arc<dyn ChatModel> = Arc::new(model);
    let specs: Arc<[ToolSpec]> = tools.iter().map(|t| t.spec()).collect();
    let has_tools = !tools.is_empty();
    let tool_node = ToolNode::new(tools)?.handle_tool_errors(options.handle_tool_errors);
    let prompt = options.prompt.map(Message::system);
    let mut graph = StateGraph::<S>::new();
    graph.add_node("agent", move |state: Arc<S>, _ctx: Context| {
        let (model, specs, prompt) = (Arc::clone(&model), Arc::clone(&specs), prompt.clone());
        async move {
            let mut messages = Vec::with_capacity(state.messages().len() + 1);
            messages.extend(prompt);
            messages.extend_from_slice(state.messages());
            let reply = model.invoke(&messages, &specs).await?;
            NodeResult::Ok(crate::Command::update(S::messages_update(vec![
                Message::Ai(reply),
            ])))
        }
    });
    graph.add_edge(START, "agent");
    if has_tools {
        graph.add_node("tools", tool_node.as_node());
        graph.add_conditional_edges("agent", tools_condition::<S>, ["tools", END]);
        graph.add_edge("tools", "agent");
    } else {
        graph.add_edge("agent", END);
    }
    graph.compile(options.compile)
}
