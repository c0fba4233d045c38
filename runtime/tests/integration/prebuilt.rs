//! The prebuilt tool node, router and ReAct agent: answers in call order, parallel calls,
//! errors and panics as tool messages, commands from tools, the injected state and store.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use waypoint_runtime::messages::{AiMessage, ToolCall, ToolMessage, ToolStatus};
use waypoint_runtime::prebuilt::{
    AgentOptions, HandleToolErrors, HasMessages, ScriptedModel, Tool, ToolContext, ToolError,
    ToolNode, create_react_agent, tool, tools_condition,
};
use waypoint_runtime::{
    Command, CompileOptions, END, Error, InMemorySaver, InMemoryStore, Message, MessagesState,
    MessagesStateUpdate, RunConfig, START, State, StateGraph, StoreExt, add_messages,
};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// An AI message calling `calls`.
fn calling(calls: Vec<ToolCall>) -> Message {
    Message::Ai(AiMessage {
        tool_calls: calls,
        ..AiMessage::default()
    })
}

/// The messages a graph running `node` alone after `ask` ends with, or its error.
async fn run_tools(
    node: ToolNode<MessagesState>,
    ask: Message,
) -> waypoint_runtime::Result<Vec<Message>> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("tools", node.as_node());
    graph.add_edge(START, "tools").add_edge("tools", END);
    let graph = graph.compile(CompileOptions::default())?;
    let input = MessagesStateUpdate::default().messages(vec![Message::human("go"), ask]);
    let done = graph.invoke(Some(input), &RunConfig::default()).await?;
    Ok(done.values.messages[2..].to_vec())
}

/// The tool message inside `message`.
fn tool_message(message: &Message) -> &ToolMessage {
    match message {
        Message::Tool(m) => m,
        other => panic!("not a tool message: {other:?}"),
    }
}

fn echo<S: State>() -> Arc<dyn Tool<S>> {
    tool(
        "echo",
        "Says its text back.",
        json!({"type": "object"}),
        |args: Value, _ctx| async move { Ok(args["text"].clone()) },
    )
}

/// A tool that panics.
fn explode() -> Arc<dyn Tool<MessagesState>> {
    tool(
        "explode",
        "Panics.",
        json!({"type": "object"}),
        |_: Value, _ctx| async move {
            if true {
                panic!("kaboom");
            }
            Ok("never")
        },
    )
}

#[derive(Deserialize)]
struct AddArgs {
    a: i64,
    b: i64,
}

fn add() -> Arc<dyn Tool<MessagesState>> {
    tool(
        "add",
        "Adds two integers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
               "required": ["a", "b"]}),
        |args: AddArgs, _ctx| async move { Ok(json!(args.a + args.b)) },
    )
}

#[tokio::test]
async fn calls_run_in_parallel_and_are_answered_in_call_order() -> TestResult {
    // Each tool waits for the other to have started: run one after the other, they would
    // wait forever (the timeout below fails the test).
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let waiting = |name: &'static str, delay: u64| {
        let barrier = Arc::clone(&barrier);
        tool(
            name,
            "Waits.",
            json!({"type": "object"}),
            move |_: Value, _ctx| {
                let barrier = Arc::clone(&barrier);
                async move {
                    barrier.wait().await;
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    Ok(format!("{name} done"))
                }
            },
        )
    };
    let node = ToolNode::new([waiting("slow", 50), waiting("fast", 0)])?;
    let ask = calling(vec![
        ToolCall::new("call-slow", "slow", json!({})),
        ToolCall::new("call-fast", "fast", json!({})),
    ]);
    let answers = tokio::time::timeout(Duration::from_secs(10), run_tools(node, ask)).await??;
    let answers: Vec<(&str, &str, String)> = answers
        .iter()
        .map(tool_message)
        .map(|m| {
            (
                m.tool_call_id.as_str(),
                m.name.as_deref().unwrap_or(""),
                m.content.text(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        [
            ("call-slow", "slow", "slow done".to_string()),
            ("call-fast", "fast", "fast done".to_string()),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn json_results_become_text_and_strings_stay_as_they_are() -> TestResult {
    let node = ToolNode::new([echo(), add()])?;
    let ask = calling(vec![
        ToolCall::new("1", "echo", json!({"text": "héllo"})),
        ToolCall::new("2", "add", json!({"a": 2, "b": 3})),
        ToolCall::new("3", "echo", json!({"text": {"k": [1, "é"]}})),
    ]);
    let answers = run_tools(node, ask).await?;
    let texts: Vec<String> = answers.iter().map(Message::text).collect();
    assert_eq!(texts, ["héllo", "5", r#"{"k":[1,"é"]}"#]);
    assert!(
        answers
            .iter()
            .all(|m| tool_message(m).status == ToolStatus::Success)
    );
    Ok(())
}

#[tokio::test]
async fn failures_are_error_tool_messages_in_langgraph_words() -> TestResult {
    let failing: Arc<dyn Tool<MessagesState>> = tool(
        "fail",
        "Fails.",
        json!({"type": "object"}),
        |_: Value, _ctx| async move { Err::<Value, _>("The ultimate error".into()) },
    );
    let panicking = explode();
    let node = ToolNode::new([failing, panicking, add()])?;
    let ask = calling(vec![
        ToolCall::new("1", "fail", json!({})),
        ToolCall::new("2", "nope", json!({})),
        ToolCall::new("3", "add", json!({"a": "two"})),
        ToolCall::new("4", "explode", json!({})),
        ToolCall::new("5", "add", json!([1, 2])),
        ToolCall::new("6", "add", json!({"a": 1, "b": 2})),
    ]);
    let answers = run_tools(node, ask).await?;
    let answers: Vec<&ToolMessage> = answers.iter().map(tool_message).collect();
    assert_eq!(
        answers
            .iter()
            .map(|m| m.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["1", "2", "3", "4", "5", "6"]
    );
    assert_eq!(
        answers.iter().map(|m| m.status).collect::<Vec<_>>(),
        [[ToolStatus::Error; 5].as_slice(), &[ToolStatus::Success]].concat()
    );
    assert_eq!(
        answers[0].content.text(),
        "Error: The ultimate error\n Please fix your mistakes."
    );
    assert_eq!(answers[0].name.as_deref(), Some("fail"));
    assert_eq!(
        answers[1].content.text(),
        "Error: nope is not a valid tool, try one of [fail, explode, add]."
    );
    assert_eq!(answers[1].name.as_deref(), Some("nope"));
    let invalid = answers[2].content.text();
    assert!(
        invalid.starts_with(r#"Error invoking tool 'add' with kwargs {"a":"two"} with error:"#)
            && invalid.ends_with("\n Please fix the error and try again."),
        "{invalid}"
    );
    assert_eq!(
        answers[3].content.text(),
        "Error: tool `explode` panicked: kaboom\n Please fix your mistakes."
    );
    assert!(
        answers[4].content.text().contains("must be a JSON object"),
        "{}",
        answers[4].content.text()
    );
    assert_eq!(answers[5].content.text(), "3");
    Ok(())
}

#[tokio::test]
async fn error_handling_can_fail_the_node_or_say_its_own_text() -> TestResult {
    let panicking = explode();
    let ask = || calling(vec![ToolCall::new("1", "explode", json!({}))]);

    // Off: the run fails with the tool's error, and the process goes on.
    let off = ToolNode::new([Arc::clone(&panicking)])?.handle_tool_errors(false);
    let err = run_tools(off, ask()).await.expect_err("the node fails");
    let Error::Node { node, source } = &err else {
        panic!("not a node error: {err}");
    };
    assert_eq!(node, "tools");
    assert!(
        matches!(source.downcast_ref::<ToolError>(), Some(ToolError::Panicked { tool, message })
            if tool == "explode" && message == "kaboom"),
        "{source}"
    );

    let fixed = ToolNode::new([Arc::clone(&panicking)])?.handle_tool_errors("try another way");
    let answers = run_tools(fixed, ask()).await?;
    assert_eq!(answers[0].text(), "try another way");

    let custom = ToolNode::new([panicking])?.handle_tool_errors(HandleToolErrors::With(Arc::new(
        |e: &ToolError| format!("custom: {}", matches!(e, ToolError::Panicked { .. })),
    )));
    let answers = run_tools(custom, ask()).await?;
    assert_eq!(answers[0].text(), "custom: true");
    assert_eq!(tool_message(&answers[0]).status, ToolStatus::Error);

    // An unknown tool is answered even with errors off, as in LangGraph.
    let off = ToolNode::new([echo()])?.handle_tool_errors(false);
    let answers = run_tools(off, calling(vec![ToolCall::new("1", "nope", json!({}))])).await?;
    assert_eq!(
        answers[0].text(),
        "Error: nope is not a valid tool, try one of [echo]."
    );
    Ok(())
}

#[tokio::test]
async fn two_tools_with_one_name_are_refused() {
    let err = ToolNode::<MessagesState>::new([echo(), echo()]).expect_err("duplicate names");
    assert!(
        matches!(&err, Error::InvalidGraph(m) if m.contains("`echo`")),
        "{err}"
    );
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Support {
    #[reducer(add_messages)]
    messages: Vec<Message>,
    user_info: Option<String>,
    #[reducer(append)]
    log: Vec<String>,
}

impl HasMessages for Support {
    fn messages(&self) -> waypoint_runtime::Result<Cow<'_, [Message]>> {
        Ok(Cow::Borrowed(&self.messages))
    }
    fn messages_update(messages: Vec<Message>) -> SupportUpdate {
        SupportUpdate::default().messages(messages)
    }
    fn take_update_messages(
        update: &mut SupportUpdate,
    ) -> waypoint_runtime::Result<Option<Vec<Message>>> {
        Ok(update.messages.take())
    }
    fn set_update_messages(update: &mut SupportUpdate, messages: Vec<Message>) {
        update.messages = Some(messages);
    }
}

/// A tool looking the user up (the guide's `lookup_user_info`): it updates the state
/// through a command and logs.
fn lookup_user_info() -> Arc<dyn Tool<Support>> {
    tool(
        "lookup_user_info",
        "Looks the user up.",
        json!({"type": "object"}),
        |_: Value, ctx| async move {
            let user = ctx
                .context()
                .config()
                .configurable
                .get("user_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let done = Message::tool(
                ctx.tool_call_id(),
                "Successfully looked up user information",
            );
            Ok(Command::update(
                SupportUpdate::default()
                    .user_info(Some(format!("user {user}")))
                    .messages(vec![done])
                    .log(vec!["looked up".to_string()]),
            ))
        },
    )
}

/// The state a graph running `node` then `after` (reached only by a command) ends with.
async fn run_support(
    node: ToolNode<Support>,
    calls: Vec<ToolCall>,
) -> waypoint_runtime::Result<Support> {
    let mut graph = StateGraph::<Support>::new();
    graph.add_node("tools", node.as_node());
    graph.add_node("after", |_s: Arc<Support>, _ctx| async move {
        Ok(SupportUpdate::default().log(vec!["after".to_string()]))
    });
    graph.add_destinations("tools", ["after"]);
    graph.add_edge(START, "tools").add_edge("tools", END);
    let graph = graph.compile(CompileOptions::default())?;
    let input =
        SupportUpdate::default().messages(vec![Message::human("who am I?"), calling(calls)]);
    let config = RunConfig::default().with("user_id", "u1");
    Ok(graph.invoke(Some(input), &config).await?.into_values())
}

#[tokio::test]
async fn commands_from_tools_update_the_state_in_call_order() -> TestResult {
    let node = ToolNode::new([echo(), lookup_user_info()])?;
    let state = run_support(
        node,
        vec![
            ToolCall::new("1", "echo", json!({"text": "first"})),
            ToolCall::new("2", "lookup_user_info", json!({})),
            ToolCall::new("3", "echo", json!({"text": "last"})),
        ],
    )
    .await?;
    let answers: Vec<(&str, Option<&str>, String)> = state.messages[2..]
        .iter()
        .map(tool_message)
        .map(|m| (m.tool_call_id.as_str(), m.name.as_deref(), m.content.text()))
        .collect();
    assert_eq!(
        answers,
        [
            ("1", Some("echo"), "first".to_string()),
            (
                "2",
                Some("lookup_user_info"),
                "Successfully looked up user information".to_string()
            ),
            ("3", Some("echo"), "last".to_string()),
        ]
    );
    assert_eq!(state.user_info.as_deref(), Some("user u1"));
    assert_eq!(state.log, ["looked up"]);
    Ok(())
}

#[tokio::test]
async fn commands_route_and_appending_channels_take_every_write() -> TestResult {
    let routing: Arc<dyn Tool<Support>> = tool(
        "route",
        "Goes on to `after`.",
        json!({"type": "object"}),
        |_: Value, ctx| async move {
            let done = Message::tool(ctx.tool_call_id(), "routed");
            Ok(Command::update(
                SupportUpdate::default()
                    .messages(vec![done])
                    .log(vec!["routed".into()]),
            )
            .and_goto("after"))
        },
    );
    let node = ToolNode::new([routing])?;
    let state = run_support(
        node,
        vec![
            ToolCall::new("1", "route", json!({})),
            ToolCall::new("2", "route", json!({})),
        ],
    )
    .await?;
    assert_eq!(state.log, ["routed", "routed", "after"]);
    assert_eq!(state.messages.len(), 4);
    Ok(())
}

#[tokio::test]
async fn a_command_must_answer_its_call_and_last_values_take_one_write() -> TestResult {
    let silent: Arc<dyn Tool<Support>> = tool(
        "silent",
        "Forgets to answer.",
        json!({"type": "object"}),
        |_: Value, _ctx| async move {
            Ok(Command::update(
                SupportUpdate::default().user_info(Some("x".into())),
            ))
        },
    );
    let state = run_support(
        ToolNode::new([silent])?,
        vec![ToolCall::new("1", "silent", json!({}))],
    )
    .await?;
    let answer = tool_message(&state.messages[2]);
    assert_eq!(answer.status, ToolStatus::Error);
    assert!(
        answer
            .content
            .text()
            .contains("Expected to have a matching ToolMessage"),
        "{:?}",
        answer.content
    );
    assert_eq!(
        state.user_info, None,
        "a refused command's update is not applied"
    );

    // Two commands setting one last-value channel in one step: the node fails naming it.
    let node = ToolNode::new([lookup_user_info()])?;
    let err = run_support(
        node,
        vec![
            ToolCall::new("1", "lookup_user_info", json!({})),
            ToolCall::new("2", "lookup_user_info", json!({})),
        ],
    )
    .await
    .expect_err("two writes of user_info");
    assert!(err.to_string().contains("`user_info`"), "{err}");
    Ok(())
}

#[tokio::test]
async fn tools_see_the_state_the_store_and_their_call_id() -> TestResult {
    let store = Arc::new(InMemoryStore::new());
    store.put(["prefs"], "u1", json!({"color": "blue"})).await?;
    let look: Arc<dyn Tool<MessagesState>> = tool(
        "look",
        "Reads what it may.",
        json!({"type": "object"}),
        |_: Value, ctx: ToolContext<MessagesState>| async move {
            let item = ctx
                .require_store()?
                .get(["prefs"], "u1")
                .await?
                .ok_or("no prefs")?;
            Ok(json!({
                "messages": ctx.state().messages.len(),
                "color": item.value["color"],
                "call": ctx.tool_call_id(),
            }))
        },
    );
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("tools", ToolNode::new([look])?.as_node());
    graph.add_edge(START, "tools");
    let graph = graph.compile(CompileOptions::default().store(store))?;
    let input = MessagesStateUpdate::default().messages(vec![
        Message::human("hi"),
        calling(vec![ToolCall::new("c-9", "look", json!({}))]),
    ]);
    let done = graph.invoke(Some(input), &RunConfig::default()).await?;
    let seen: Value = serde_json::from_str(&done.values.messages[2].text())?;
    assert_eq!(seen, json!({"messages": 2, "color": "blue", "call": "c-9"}));
    Ok(())
}

#[tokio::test]
async fn an_interrupt_in_a_tool_pauses_the_run() -> TestResult {
    let ask: Arc<dyn Tool<MessagesState>> = tool(
        "ask",
        "Asks a human.",
        json!({"type": "object"}),
        |_: Value, ctx| async move {
            let answer = ctx.context().interrupt("approve?")?;
            Ok(answer)
        },
    );
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("tools", ToolNode::new([ask])?.as_node());
    graph.add_edge(START, "tools");
    let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;
    let config = RunConfig::thread("t");
    let input = MessagesStateUpdate::default().messages(vec![calling(vec![ToolCall::new(
        "1",
        "ask",
        json!({}),
    )])]);
    let paused = graph.invoke(Some(input), &config).await?;
    assert!(paused.interrupted);
    assert_eq!(paused.interrupts[0].value, json!("approve?"));
    let done = graph.invoke(Command::resume("yes"), &config).await?;
    assert_eq!(done.values.messages[1].text(), "yes");
    Ok(())
}

#[test]
fn tools_condition_routes_on_the_last_message() {
    let mut state = MessagesState::default();
    assert_eq!(tools_condition(&state), END);
    state
        .messages
        .push(calling(vec![ToolCall::new("1", "echo", json!({}))]));
    assert_eq!(tools_condition(&state), "tools");
    let mut next = Vec::new();
    add_messages(&mut next, vec![Message::ai("done")]).expect("add");
    state.messages.extend(next);
    assert_eq!(tools_condition(&state), END);
}

#[tokio::test]
async fn the_agent_prompts_offers_tools_and_loops_until_the_model_answers() -> TestResult {
    let model = Arc::new(ScriptedModel::new([
        AiMessage {
            tool_calls: vec![ToolCall::new("1", "add", json!({"a": 40, "b": 2}))],
            ..AiMessage::default()
        },
        AiMessage {
            content: "42".into(),
            ..AiMessage::default()
        },
    ]));
    let agent = create_react_agent(
        Arc::clone(&model),
        vec![add()],
        AgentOptions::default().prompt("You add."),
    )?;
    let input = MessagesStateUpdate::default().messages(vec![Message::human("40 + 2?")]);
    let done = agent.invoke(Some(input), &RunConfig::default()).await?;
    let kinds: Vec<&str> = done.values.messages.iter().map(Message::kind).collect();
    assert_eq!(kinds, ["human", "ai", "tool", "ai"]);
    let calls = model.calls();
    assert_eq!(calls.len(), 2);
    let (sent, tools) = &calls[1];
    assert_eq!(
        sent.iter().map(Message::kind).collect::<Vec<_>>(),
        ["system", "human", "ai", "tool"]
    );
    assert_eq!(sent[0].text(), "You add.");
    assert_eq!(tools[0].name, "add");
    assert_eq!(
        tools[0].to_openai()["function"]["parameters"]["required"],
        json!(["a", "b"])
    );
    Ok(())
}

#[tokio::test]
async fn a_model_error_fails_the_agent_node() -> TestResult {
    let agent = create_react_agent::<MessagesState>(
        ScriptedModel::new([]),
        vec![],
        AgentOptions::default(),
    )?;
    let input = MessagesStateUpdate::default().messages(vec![Message::human("hi")]);
    let err = agent
        .invoke(Some(input), &RunConfig::default())
        .await
        .expect_err("no reply");
    assert!(
        matches!(&err, Error::Node { node, .. } if node == "agent"),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn a_handoff_tool_sends_its_command_to_the_parent_graph() -> TestResult {
    // The guide's handoff: a tool of an agent subgraph goes to another agent of the parent,
    // with its tool message in the update; the other call's answer is not written.
    let handoff: Arc<dyn Tool<MessagesState>> = tool(
        "to_b",
        "Hands off to b.",
        json!({"type": "object"}),
        |_: Value, ctx: ToolContext<MessagesState>| async move {
            let done = Message::tool(ctx.tool_call_id(), "Transferred to b");
            Ok(Command::to_parent("b")
                .with_update(MessagesStateUpdate::default().messages(vec![done])))
        },
    );
    let mut team = StateGraph::<MessagesState>::new();
    team.add_node("tools", ToolNode::new([handoff, echo()])?.as_node());
    team.add_edge(START, "tools");
    let team = team.compile(CompileOptions::default())?;

    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_subgraph("a", team);
    graph.add_node("b", |_s: Arc<MessagesState>, _ctx| async move {
        Ok(MessagesStateUpdate::default().messages(vec![Message::ai("b here")]))
    });
    graph.add_destinations("a", ["b"]);
    graph.add_edge(START, "a");
    let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;
    let input = MessagesStateUpdate::default().messages(vec![
        Message::human("help"),
        calling(vec![
            ToolCall::new("1", "echo", json!({"text": "dropped"})),
            ToolCall::new("2", "to_b", json!({})),
        ]),
    ]);
    let done = graph
        .invoke(Some(input), &RunConfig::thread("handoff"))
        .await?;
    let messages = &done.values.messages;
    assert_eq!(
        messages.iter().map(Message::kind).collect::<Vec<_>>(),
        ["human", "ai", "tool", "ai"]
    );
    let answer = tool_message(&messages[2]);
    assert_eq!(
        (answer.tool_call_id.as_str(), answer.name.as_deref()),
        ("2", Some("to_b"))
    );
    assert_eq!(messages[3].text(), "b here");
    Ok(())
}

#[tokio::test]
async fn a_command_from_a_subgraph_a_tool_runs_reaches_the_tools_graph() -> TestResult {
    // A tool running a graph whose node sends a command up: as LangGraph re-raises
    // `ParentCommand`, the tool node's graph applies it.
    let mut inner = StateGraph::<MessagesState>::new();
    inner.add_node("decide", |_s: Arc<MessagesState>, _ctx| async move {
        let done = Message::tool("1", "delegated");
        Ok(
            Command::to_parent("b")
                .with_update(MessagesStateUpdate::default().messages(vec![done])),
        )
    });
    inner.add_edge(START, "decide");
    let inner = inner.compile(CompileOptions::default())?;
    let delegate: Arc<dyn Tool<MessagesState>> = tool(
        "delegate",
        "Runs a graph.",
        json!({"type": "object"}),
        move |_: Value, ctx: ToolContext<MessagesState>| {
            let inner = inner.clone();
            async move {
                ctx.context()
                    .call(&inner, Some(MessagesStateUpdate::default()))
                    .await?;
                Ok("not reached")
            }
        },
    );
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("tools", ToolNode::new([delegate])?.as_node());
    graph.add_node("b", |_s: Arc<MessagesState>, _ctx| async move {
        Ok(MessagesStateUpdate::default().messages(vec![Message::ai("b here")]))
    });
    graph.add_destinations("tools", ["b"]);
    graph.add_edge(START, "tools");
    let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;
    let input = MessagesStateUpdate::default().messages(vec![calling(vec![ToolCall::new(
        "1",
        "delegate",
        json!({}),
    )])]);
    let done = graph.invoke(Some(input), &RunConfig::thread("up")).await?;
    let texts: Vec<String> = done.values.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["", "delegated", "b here"]);
    Ok(())
}
