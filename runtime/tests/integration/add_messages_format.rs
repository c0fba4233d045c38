//! `add_messages` for JSON-state graphs (`JsonSchema::messages`) and with LangGraph's
//! `format="langchain-openai"` (`add_messages_as`), reproducing the guides' examples
//! (seeds 000 and 003, LangGraph's docstring) and, when a Python LangGraph is at hand,
//! checked against its output case by case.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use waypoint_runtime::messages::{Content, ToolStatus};
use waypoint_runtime::{
    CompileOptions, Context, Error, JsonSchema, JsonState, Message, MessagesFormat, RunConfig,
    START, StateGraph, add_messages_as,
};
use waypoint_test_kit::run_with_input;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const OPENAI: MessagesFormat = MessagesFormat::LangChainOpenAi;

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn messages(values: Value) -> Vec<Message> {
    let Value::Array(items) = values else {
        panic!("a list of messages");
    };
    items
        .into_iter()
        .map(|m| Message::from_json(m).expect("a message"))
        .collect()
}

/// `add_messages_as(left, right, format)` on JSON messages, as LangChain dicts.
fn merged(left: Value, right: Value, format: MessagesFormat) -> Result<Vec<Value>, Error> {
    let mut current = messages(left);
    add_messages_as(&mut current, messages(right), format)?;
    Ok(current.iter().map(Message::to_json).collect())
}

/// A JSON-state graph whose one node returns `update` for `messages`; its final messages.
async fn run_json(schema: JsonSchema, input: Value, update: Value) -> Result<Value, Error> {
    let mut g = StateGraph::json(schema);
    g.add_node("chatbot", move |_: JsonState, _: Context| {
        let update = update.clone();
        async move { Ok(obj(json!({ "messages": update }))) }
    })
    .add_edge(START, "chatbot");
    let graph = g.compile(CompileOptions::default())?;
    let out = graph
        .invoke(
            Some(obj(json!({ "messages": input }))),
            &RunConfig::default(),
        )
        .await?;
    Ok(out.get("messages").cloned().unwrap_or(Value::Null))
}

/// `(type, content)` of each message.
fn shapes(list: &Value) -> Vec<(String, Value)> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .map(|m| {
                    (
                        m["type"].as_str().unwrap_or("").to_owned(),
                        m["content"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn json_state_reads_every_input_form_of_the_guide() -> TestResult {
    // Seed 000: HumanMessage, {"type": "human"}, {"role": "user"} and ("user", "Hi").
    let forms = json!([
        {"type": "human", "content": "Hi"},
        {"role": "user", "content": "Hi"},
        ["user", "Hi"],
        "Hi",
    ]);
    let out = run_json(JsonSchema::new().messages("messages"), json!([]), forms).await?;
    let list = out.as_array().ok_or("a list")?;
    assert_eq!(list.len(), 4);
    for message in list {
        assert_eq!(message["type"], json!("human"));
        assert_eq!(message["content"], json!("Hi"));
        assert!(
            message["id"].is_string(),
            "every message gets an id: {message}"
        );
    }
    // One message (not in a list) is an update too, as in LangGraph.
    let out = run_json(
        JsonSchema::new().messages("messages"),
        json!([]),
        json!({"role": "assistant", "content": "Hello", "id": "a1"}),
    )
    .await?;
    assert_eq!(shapes(&out), vec![("ai".to_owned(), json!("Hello"))]);
    Ok(())
}

#[tokio::test]
async fn json_state_appends_replaces_and_removes_by_id() -> TestResult {
    let schema = || JsonSchema::new().messages("messages");
    // Seed 003, case 1: a new id is appended.
    let out = run_json(
        schema(),
        json!([{"type": "human", "content": "Hello", "id": "1"}]),
        json!([{"type": "ai", "content": "Hi there!", "id": "2"}]),
    )
    .await?;
    assert_eq!(
        out,
        json!([
            {"type": "human", "content": "Hello", "id": "1"},
            {"type": "ai", "content": "Hi there!", "id": "2"},
        ])
    );
    // Case 2: the same id replaces.
    let out = run_json(
        schema(),
        json!([{"type": "human", "content": "Hello", "id": "1"}]),
        json!([{"type": "human", "content": "Hello again", "id": "1"}]),
    )
    .await?;
    assert_eq!(
        out,
        json!([{"type": "human", "content": "Hello again", "id": "1"}])
    );
    // RemoveMessage, then REMOVE_ALL_MESSAGES.
    let history = json!([
        {"type": "human", "content": "Hello", "id": "1"},
        {"type": "ai", "content": "Hi", "id": "2"},
    ]);
    let out = run_json(
        schema(),
        history.clone(),
        json!([{"type": "remove", "id": "1"}]),
    )
    .await?;
    assert_eq!(out, json!([{"type": "ai", "content": "Hi", "id": "2"}]));
    let out = run_json(
        schema(),
        history.clone(),
        json!([
            {"type": "remove", "id": "__remove_all__"},
            {"type": "human", "content": "New conversation", "id": "3"},
        ]),
    )
    .await?;
    assert_eq!(
        out,
        json!([{"type": "human", "content": "New conversation", "id": "3"}])
    );
    // Removing an unknown id, or writing something that is not a message, fails the run.
    for (bad, needle) in [
        (json!([{"type": "remove", "id": "ghost"}]), "`ghost`"),
        (json!([7]), "`messages`: item 0 is not a message"),
        (json!(null), "`messages`: item 0 is not a message"),
    ] {
        match run_json(schema(), history.clone(), bad).await {
            Err(e) => assert!(e.to_string().contains(needle), "{e}"),
            Ok(out) => panic!("expected an error containing {needle}, got {out}"),
        }
    }
    Ok(())
}

#[tokio::test]
async fn openai_format_turns_the_docstring_example_into_image_url_blocks() -> TestResult {
    // LangGraph's `add_messages` docstring, "Use OpenAI message format".
    let update = json!([{
        "role": "user",
        "content": [
            {"type": "text", "text": "Here's an image:", "cache_control": {"type": "ephemeral"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "1234"}},
        ],
    }]);
    let expected = json!([
        {"type": "text", "text": "Here's an image:"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,1234"}},
    ]);
    let schema = JsonSchema::new().messages_as("messages", OPENAI);
    let out = run_json(schema, json!([]), update.clone()).await?;
    assert_eq!(shapes(&out), vec![("human".to_owned(), expected.clone())]);

    // The same through a derived state's reducer.
    #[derive(waypoint_runtime::State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Chat {
        #[reducer(|c: &mut Vec<Message>, u: Vec<Message>| add_messages_as(c, u, OPENAI))]
        messages: Vec<Message>,
    }
    let mut g = StateGraph::<Chat>::new();
    g.add_node("chatbot", move |_: Chat, _: Context| {
        let update = messages(update.clone());
        async move {
            Ok(ChatUpdate {
                messages: Some(update),
            })
        }
    })
    .add_edge(START, "chatbot");
    let out = g
        .compile(CompileOptions::default())?
        .invoke(Some(ChatUpdate::default()), &RunConfig::default())
        .await?;
    assert_eq!(out.messages.len(), 1);
    assert_eq!(
        out.messages[0].content(),
        &Content::Blocks(messages_blocks(&expected))
    );
    Ok(())
}

fn messages_blocks(blocks: &Value) -> Vec<Value> {
    blocks.as_array().cloned().unwrap_or_default()
}

#[test]
fn openai_format_keeps_ids_so_later_updates_still_match() -> TestResult {
    // Seed 003, case 4, with `format="langchain-openai"`: LangGraph prints the same two
    // messages; unlike LangGraph, their ids survive the formatting.
    let left = json!([
        {"type": "human", "content": "First message", "id": "1"},
        {"type": "ai", "content": "First reply", "id": "2"},
    ]);
    let right = json!([
        {"type": "remove", "id": "1"},
        {"type": "human", "content": "New message", "id": "3"},
    ]);
    let expected = json!([
        {"type": "ai", "content": "First reply", "id": "2"},
        {"type": "human", "content": "New message", "id": "3"},
    ]);
    assert_eq!(
        merged(left.clone(), right.clone(), MessagesFormat::AsIs)?,
        messages_json(&expected)
    );
    assert_eq!(merged(left, right, OPENAI)?, messages_json(&expected));
    Ok(())
}

fn messages_json(list: &Value) -> Vec<Value> {
    list.as_array().cloned().unwrap_or_default()
}

/// Cases whose expected output is Python LangGraph 1.2's, ids aside (it drops them).
fn cases() -> Vec<(Value, Vec<(&'static str, Value)>)> {
    vec![
        // Text blocks only: one string.
        (
            json!([{"type": "human", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]),
            vec![("human", json!("a\nb"))],
        ),
        // An AI message's tool_use block becomes a tool call.
        (
            json!([{"type": "ai", "content": [{"type": "text", "text": "let me"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]}]),
            vec![("ai", json!("let me"))],
        ),
        // A tool_result block leaves as a tool message after its message.
        (
            json!([{"type": "human", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "42"},
                {"type": "text", "text": "and?"}]}]),
            vec![("human", json!("and?")), ("tool", json!("42"))],
        ),
        // ... and its message goes when nothing else is left.
        (
            json!([{"type": "human", "content": [{"type": "tool_result", "tool_use_id": "t1",
                "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}], "is_error": true}]}]),
            vec![("tool", json!("4\n2"))],
        ),
        // Other blocks stay, so the content stays a list.
        (
            json!([{"type": "ai", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "ok"}]}]),
            vec![(
                "ai",
                json!([{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "ok"}]),
            )],
        ),
        (
            json!([{"type": "ai", "content": ["a", "b"]}]),
            vec![("ai", json!("a\nb"))],
        ),
        (
            json!([{"type": "human", "content": [{"type": "guard_content", "guard_content": {"text": "g"}}]}]),
            vec![("human", json!("g"))],
        ),
        (
            json!([{"type": "human", "content": ["plain",
                {"type": "image_url", "image_url": {"url": "https://x.test/cat.png", "detail": "low"}}]}]),
            vec![(
                "human",
                json!([{"type": "text", "text": "plain"},
                {"type": "image_url", "image_url": {"url": "https://x.test/cat.png", "detail": "low"}}]),
            )],
        ),
        (
            json!([{"type": "human", "content": [{"type": "image", "source_type": "url", "url": "https://x.test/cat.png"}]}]),
            vec![(
                "human",
                json!([{"type": "image_url", "image_url": {"url": "https://x.test/cat.png"}}]),
            )],
        ),
        (
            json!([{"type": "human", "content": [{"type": "image", "source_type": "base64", "data": "AAA", "mime_type": "image/png"}]}]),
            vec![(
                "human",
                json!([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]),
            )],
        ),
        (
            json!([{"type": "human", "content": []}]),
            vec![("human", json!(""))],
        ),
        (
            json!([{"type": "tool", "content": [{"type": "text", "text": "42"}], "tool_call_id": "t1"}]),
            vec![("tool", json!("42"))],
        ),
    ]
}

#[test]
fn openai_format_matches_langchains_conversion() -> TestResult {
    for (input, expected) in cases() {
        let out = merged(json!([]), input.clone(), OPENAI)?;
        let got: Vec<(&str, Value)> = out
            .iter()
            .map(|m| (m["type"].as_str().unwrap_or(""), m["content"].clone()))
            .collect();
        assert_eq!(got, expected, "{input}");
        assert!(out.iter().all(|m| m["id"].is_string()), "ids: {out:?}");
        // Formatting is idempotent: a later update leaves formatted messages alone.
        let again = merged(Value::Array(out.clone()), json!([]), OPENAI)?;
        assert_eq!(again, out, "{input}");
    }
    Ok(())
}

#[test]
fn openai_format_moves_tool_use_into_tool_calls_and_keeps_the_rest() -> TestResult {
    let mut current = Vec::new();
    let update = messages(json!([
        {"type": "ai", "id": "a1", "name": "bot", "content": [
            {"type": "text", "text": "x"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
            {"type": "tool_use", "id": "t2", "name": "g", "input": {}}],
         "tool_calls": [{"id": "t1", "name": "f", "args": {"a": 2}}],
         "usage_metadata": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}},
        {"type": "human", "id": "h1", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": "bad", "is_error": true}]},
    ]));
    add_messages_as(&mut current, update, OPENAI)?;
    let Message::Ai(ai) = &current[0] else {
        panic!("an AI message first: {current:?}");
    };
    assert_eq!(ai.id.as_deref(), Some("a1"));
    assert_eq!(ai.name.as_deref(), Some("bot"));
    assert!(ai.usage_metadata.is_some(), "usage stays");
    // A call already there keeps its arguments; a new one is added.
    let calls: Vec<(Option<&str>, &Value)> = ai
        .tool_calls
        .iter()
        .map(|c| (c.id.as_deref(), &c.args))
        .collect();
    assert_eq!(
        calls,
        vec![(Some("t1"), &json!({"a": 2})), (Some("t2"), &json!({}))]
    );
    let Message::Tool(tool) = &current[1] else {
        panic!("the tool result second: {current:?}");
    };
    assert_eq!(
        (tool.tool_call_id.as_str(), tool.status),
        ("t2", ToolStatus::Error)
    );
    assert!(tool.id.is_some());
    assert_eq!(current.len(), 2, "the emptied human message is gone");
    Ok(())
}

#[test]
fn bad_blocks_and_formats_are_clear_errors_that_change_nothing() {
    let mut current = messages(json!([{"type": "human", "content": "kept", "id": "1"}]));
    let before = current.clone();
    for (block, needle) in [
        (json!({"type": "text"}), "text block needs a string `text`"),
        (json!({"no": "type"}), "without a `type`"),
        (
            json!({"type": "tool_use", "id": "t", "name": "f", "input": {}}),
            "belongs to an AI message",
        ),
        (
            json!({"type": "image"}),
            "image block needs a URL or base64 data",
        ),
        (json!(7), "must be text or an object"),
    ] {
        let update = messages(json!([{"type": "human", "content": [block]}]));
        let err = add_messages_as(&mut current, update, OPENAI).expect_err("a bad block");
        let text = err.to_string();
        assert!(
            text.contains("message 1") && text.contains(needle),
            "{text}"
        );
        assert_eq!(current, before);
    }
    let err = "langchain"
        .parse::<MessagesFormat>()
        .expect_err("unknown format");
    assert!(err.to_string().contains("`langchain`"), "{err}");
    assert_eq!(
        "langchain-openai".parse::<MessagesFormat>().ok(),
        Some(OPENAI)
    );
}

#[test]
fn python_langgraph_formats_the_same_contents() -> TestResult {
    let Some(python) = waypoint_test_kit::python() else {
        return Ok(());
    };
    let inputs: Vec<Value> = cases().into_iter().map(|(input, _)| input).collect();
    let script = r#"
import json, sys, warnings
warnings.simplefilter("ignore")
from langchain_core.messages import convert_to_messages
from langgraph.graph.message import add_messages
out = []
for case in json.load(sys.stdin):
    merged = add_messages([], convert_to_messages(case), format="langchain-openai")
    out.append([[m.type, m.content] for m in merged])
print(json.dumps(out))
"#;
    let out = run_with_input(
        std::process::Command::new(python).args(["-c", script]),
        &Value::Array(inputs.clone()).to_string(),
    );
    let python: Vec<Value> = serde_json::from_str(&out)?;
    for (input, theirs) in inputs.into_iter().zip(python) {
        let ours: Vec<Value> = merged(json!([]), input.clone(), OPENAI)?
            .iter()
            .map(|m| json!([m["type"], m["content"]]))
            .collect();
        assert_eq!(Value::Array(ours), theirs, "{input}");
    }
    Ok(())
}
