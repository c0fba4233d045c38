//! The rest of LangGraph's `create_react_agent`: stopping before the recursion limit
//! (`remaining_steps`), tools that return directly, a structured response after the loop,
//! and the agent over a schema-less JSON state.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::messages::{AiMessage, ToolCall};
use waypoint_runtime::prebuilt::{
    AgentOptions, HasMessages, NEED_MORE_STEPS, ResponseFormat, ScriptedModel, Tool,
    create_react_agent, create_react_agent_with_state, return_direct, tool,
};
use waypoint_runtime::{
    Error, JsonSchema, JsonState, Message, MessagesState, MessagesStateUpdate, RunConfig,
};

use crate::prebuilt::{kinds, saying};
use crate::{TestResult, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// A tool `name` answering `"{name} done"`.
fn echo<S: waypoint_runtime::State>(name: &str) -> Arc<dyn Tool<S>> {
    let answer = format!("{name} done");
    tool(
        name,
        "Does its job.",
        json!({"type": "object", "properties": {}}),
        move |_args: Value, _ctx| {
            let answer = answer.clone();
            async move { Ok(answer) }
        },
    )
}

/// An AI message with id `id` calling tool `name` once (call id `call-{id}`).
fn calling(id: &str, name: &str) -> AiMessage {
    crate::prebuilt::calling(
        id,
        vec![ToolCall::new(format!("call-{id}"), name, json!({}))],
    )
}

/// A human message input for a [`MessagesState`] agent.
fn ask(text: &str) -> MessagesStateUpdate {
    MessagesStateUpdate::default().messages(vec![Message::human(text)])
}

/// A model that always calls a tool stops before the recursion limit: with a limit of 6
/// (the input's step, then agent, tools, agent, tools, agent), the third model call (no
/// step left after it) is answered with LangGraph's "need more steps" message under the
/// reply's id instead of a recursion error; the next run on the thread gets its own 6 steps.
pub async fn agent_stops_before_the_recursion_limit(saver: Saver) -> TestResult {
    let model = Arc::new(ScriptedModel::new(
        (1..=6).map(|i| calling(&format!("ai-{i}"), "search")),
    ));
    let agent = create_react_agent(
        Arc::clone(&model),
        vec![echo::<MessagesState>("search")],
        AgentOptions::default().checkpointer(saver),
    )?;
    let config = RunConfig::thread(thread()).recursion_limit(6);
    let done = agent.invoke(Some(ask("find it")), &config).await?;
    let messages = &done.values.messages;
    assert_eq!(kinds(messages), ["human", "ai", "tool", "ai", "tool", "ai"]);
    let Message::Ai(last) = &messages[5] else {
        unreachable!("the kinds say ai")
    };
    assert_eq!(last.content.text(), NEED_MORE_STEPS);
    assert_eq!(last.id.as_deref(), Some("ai-3"));
    assert!(last.tool_calls.is_empty());
    assert_eq!(model.calls().len(), 3);
    assert!(agent.get_state(&config).await?.next.is_empty());

    let done = agent.invoke(Some(ask("again")), &config).await?;
    let messages = &done.values.messages;
    assert_eq!(messages.len(), 12);
    assert_eq!(messages[11].text(), NEED_MORE_STEPS);
    assert_eq!(model.calls().len(), 6);

    Ok(())
}

/// After a tool that returns directly the run ends with its answer, without another model
/// call; other tools hand back to the model as before.
pub async fn return_direct_tool_ends_the_run(saver: Saver) -> TestResult {
    let model = Arc::new(ScriptedModel::new([
        calling("ai-1", "lookup"),
        calling("ai-2", "search"),
        saying("ai-3", "found"),
    ]));
    let agent = create_react_agent(
        Arc::clone(&model),
        vec![
            return_direct(echo::<MessagesState>("lookup")),
            echo("search"),
        ],
        AgentOptions::default().checkpointer(saver),
    )?;
    let config = RunConfig::thread(thread());
    let done = agent.invoke(Some(ask("look it up")), &config).await?;
    let messages = &done.values.messages;
    assert_eq!(kinds(messages), ["human", "ai", "tool"]);
    assert_eq!(messages[2].text(), "lookup done");
    assert_eq!(model.calls().len(), 1);
    assert!(agent.get_state(&config).await?.next.is_empty());

    let done = agent.invoke(Some(ask("search it")), &config).await?;
    let messages = &done.values.messages;
    assert_eq!(
        kinds(&messages[3..]),
        ["human", "ai", "tool", "ai"],
        "a tool without return_direct goes back to the model"
    );
    assert_eq!(messages[6].text(), "found");
    assert_eq!(model.calls().len(), 3);
    Ok(())
}

/// The JSON schema the structured response tests ask for.
fn answer_schema() -> Value {
    json!({"type": "object", "properties": {"answer": {"type": "integer"}}})
}

/// A JSON state with a conversation and a structured response.
fn json_agent_schema() -> JsonSchema {
    JsonSchema::new()
        .messages("messages")
        .last_value("structured_response")
}

/// The JSON input asking `text`.
fn json_ask(text: &str) -> Map<String, Value> {
    crate::obj(json!({"messages": [{"role": "user", "content": text}]}))
}

/// With a response format, the loop's end is followed by one structured call (the
/// format's prompt, then the conversation, and the schema), stored under
/// `structured_response` and checkpointed; a state with no place for it is refused at build
/// time.
pub async fn response_format_stores_structured_response(saver: Saver) -> TestResult {
    let model = Arc::new(
        ScriptedModel::new([calling("ai-1", "search"), saying("ai-2", "it is 42")])
            .with_structured([json!({"answer": 42})]),
    );
    let format = ResponseFormat::new(answer_schema()).prompt("Answer in JSON.");
    let agent = create_react_agent_with_state(
        JsonState::new(json_agent_schema()),
        Arc::clone(&model),
        vec![echo("search")],
        AgentOptions::default()
            .response_format(format.clone())
            .checkpointer(Arc::clone(&saver)),
    )?;
    let config = RunConfig::thread(thread());
    let done = agent.invoke(Some(json_ask("what is it?")), &config).await?;
    assert_eq!(
        done.values.get("structured_response"),
        Some(&json!({"answer": 42}))
    );
    assert_eq!(
        kinds(&done.values.messages()?),
        ["human", "ai", "tool", "ai"]
    );
    let calls = model.structured_calls();
    assert_eq!(calls.len(), 1);
    let (sent, schema) = &calls[0];
    assert_eq!(schema, &answer_schema());
    assert_eq!(kinds(sent), ["system", "human", "ai", "tool", "ai"]);
    assert_eq!(sent[0].text(), "Answer in JSON.");
    let saved = agent.get_state(&config).await?;
    assert_eq!(
        saved.values.get("structured_response"),
        Some(&json!({"answer": 42}))
    );

    // MessagesState has no structured response: refused when the agent is built.
    let refused = create_react_agent::<MessagesState>(
        ScriptedModel::new([]),
        vec![],
        AgentOptions::default().response_format(format.clone()),
    );
    assert!(
        matches!(&refused, Err(Error::InvalidGraph(m)) if m.contains("structured response")),
        "{:?}",
        refused.err()
    );

    Ok(())
}

/// The agent and its tool node over a schema-less JSON state: the conversation is the
/// `messages` key (LangChain's dict form), checkpointed and read back as messages.
pub async fn agent_runs_over_json_state(saver: Saver) -> TestResult {
    let model = ScriptedModel::new([calling("ai-1", "search"), saying("ai-2", "found it")]);
    let agent = create_react_agent_with_state(
        JsonState::new(JsonSchema::new().messages("messages")),
        model,
        vec![echo("search")],
        AgentOptions::default().checkpointer(saver),
    )?;
    let config = RunConfig::thread(thread());
    let done = agent.invoke(Some(json_ask("find it")), &config).await?;
    let messages = done.values.messages()?;
    assert_eq!(kinds(&messages), ["human", "ai", "tool", "ai"]);
    assert_eq!(messages[2].text(), "search done");
    assert_eq!(messages[3].text(), "found it");
    let raw = done.values.get("messages").cloned().unwrap_or_default();
    assert_eq!(raw[2]["type"], "tool");
    assert_eq!(raw[2]["tool_call_id"], "call-ai-1");
    assert_eq!(raw[2]["name"], "search");
    let saved = agent.get_state(&config).await?;
    assert_eq!(saved.values.messages()?, messages);
    Ok(())
}
