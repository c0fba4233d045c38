//! Input, output and private schemas of JSON-state graphs: what `invoke` takes and returns,
//! and clear errors for schemas that do not fit together.

use serde_json::{Map, Value, json};
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, Error, JsonSchema, JsonState, MessagesFormat,
    RunConfig, START, StateGraph,
};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A one-node graph over `schema` whose node writes `{"out": "done", "scratch": 1}`.
fn graph(schema: JsonSchema) -> Result<CompiledGraph<JsonState>, Error> {
    let mut g = StateGraph::json(schema);
    g.add_node("work", |_: JsonState, _: Context| async {
        Ok(obj(json!({"out": "done", "scratch": 1})))
    })
    .add_edge(START, "work");
    g.compile(CompileOptions::default())
}

fn keys() -> JsonSchema {
    JsonSchema::new()
        .last_value("question")
        .last_value("out")
        .last_value("scratch")
}

fn message(err: Error) -> String {
    err.to_string()
}

#[tokio::test]
async fn without_io_keys_invoke_returns_every_key() -> TestResult {
    let out = graph(keys())?
        .invoke(Some(obj(json!({"question": "q"}))), &RunConfig::default())
        .await?;
    assert_eq!(
        out.values.to_value(),
        json!({"question": "q", "out": "done", "scratch": 1})
    );
    Ok(())
}

#[tokio::test]
async fn output_keys_narrow_what_invoke_returns() -> TestResult {
    let schema = keys().input_keys(["question"])?.output_keys(["out"])?;
    let out = graph(schema)?
        .invoke(Some(obj(json!({"question": "q"}))), &RunConfig::default())
        .await?;
    assert_eq!(out.values.to_value(), json!({"out": "done"}));
    Ok(())
}

#[tokio::test]
async fn an_input_writing_a_non_input_key_is_an_error_naming_it() -> TestResult {
    let schema = keys().input_keys(["question"])?;
    let err = graph(schema)?
        .invoke(Some(obj(json!({"scratch": 5}))), &RunConfig::default())
        .await
        .err()
        .map(message)
        .unwrap_or_default();
    assert!(
        err.contains("`scratch` is not an input key") && err.contains("`question`"),
        "{err}"
    );
    Ok(())
}

#[test]
fn io_keys_that_are_not_keys_of_the_schema_are_rejected() {
    let err = keys().input_keys(["questoin"]).err().map(message);
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("input key `questoin` is not a key")),
        "{err:?}"
    );
    let err = keys().output_keys(["answer"]).err().map(message);
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("output key `answer` is not a key")),
        "{err:?}"
    );
}

#[test]
fn keys_with_different_reducers_clash() {
    let err = JsonSchema::new()
        .append("log")
        .merge(JsonSchema::new().messages("log"))
        .err()
        .map(message);
    assert!(
        err.as_deref().is_some_and(|e| e.contains("`log`")
            && e.contains("`append`")
            && e.contains("`add_messages(AsIs)`")),
        "{err:?}"
    );
    let err = JsonSchema::new()
        .messages("log")
        .output(JsonSchema::new().messages_as("log", MessagesFormat::LangChainOpenAi))
        .err();
    assert!(err.is_some(), "two message formats clash");
    let custom = || JsonSchema::new().reducer("n", json!(0), |_, _| Ok(()));
    assert!(
        custom().merge(custom()).is_err(),
        "two custom functions clash"
    );
}

#[test]
fn same_or_last_value_declarations_merge() -> TestResult {
    let schema = JsonSchema::new()
        .append("log")
        .merge(JsonSchema::new().append("log").last_value("extra"))?
        .input(JsonSchema::new().last_value("log"))?;
    assert_eq!(schema.keys(), ["log", "extra"]);
    let state = JsonState::new(schema);
    assert_eq!(
        state.to_value(),
        json!({"log": []}),
        "`log` keeps its reducer"
    );
    Ok(())
}

#[tokio::test]
async fn a_subgraph_node_takes_its_input_keys_and_returns_its_output_keys() -> TestResult {
    // The subgraph keeps `scratch` private: the parent's `scratch` is neither sent nor
    // overwritten, and the parent's `out` gets the subgraph's.
    let inner = graph(keys().input_keys(["question"])?.output_keys(["out"])?)?;
    let mut g = StateGraph::json(keys());
    g.add_subgraph("inner", inner).add_edge(START, "inner");
    let out = g
        .compile(CompileOptions::default())?
        .invoke(
            Some(obj(json!({"question": "q", "scratch": 7}))),
            &RunConfig::default(),
        )
        .await?;
    assert_eq!(
        out.values.to_value(),
        json!({"question": "q", "out": "done", "scratch": 7})
    );
    Ok(())
}
