//! Input, output and node input schemas of typed-state graphs (LangGraph's guide
//! "Glossary", Multiple schemas, with structs instead of `TypedDict`s).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, Error, JsonSchema, JsonState, NodeResult,
    RunConfig, START, State, StateGraph,
};

use crate::{TestResult, obj, thread};

/// The guide's `OverallState`, with its private `bar` (a typed state's channels are its
/// fields; the other schemas below read or write some of them).
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OverallState {
    /// Written by `node_1`.
    pub foo: String,
    /// The run's input.
    pub user_input: String,
    /// The run's output.
    pub graph_output: String,
    /// Private to the nodes: neither input nor output.
    pub bar: String,
}

/// The guide's `InputState`.
#[derive(Debug, Serialize, Deserialize)]
pub struct InputState {
    /// What the user typed.
    pub user_input: String,
}

/// The guide's `OutputState`.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputState {
    /// The answer.
    pub graph_output: String,
}

/// The guide's `PrivateState`.
#[derive(Debug, Serialize, Deserialize)]
pub struct PrivateState {
    /// Passed from `node_2` to `node_3`.
    pub bar: String,
}

/// The guide's graph: `node_1` reads `InputState`, `node_2` the whole state, `node_3` the
/// private `PrivateState`.
fn guide_graph(
    saver: Arc<dyn CheckpointSaver>,
) -> Result<CompiledGraph<OverallState>, waypoint_runtime::Error> {
    let mut g = StateGraph::<OverallState>::new();
    g.add_node_with_input("node_1", |s: InputState, _: Context| async move {
        NodeResult::Ok(OverallStateUpdate::default().foo(s.user_input + " name"))
    })
    .add_node("node_2", |s: OverallState, _: Context| async move {
        NodeResult::Ok(OverallStateUpdate::default().bar(s.foo + " is"))
    })
    .add_node_with_input("node_3", |s: PrivateState, _: Context| async move {
        NodeResult::Ok(OverallStateUpdate::default().graph_output(s.bar + " Lance"))
    })
    .add_edge(START, "node_1")
    .add_edge("node_1", "node_2")
    .add_edge("node_2", "node_3")
    .add_edge("node_3", END);
    g.compile(CompileOptions::default().checkpointer(saver))
}

/// `graph.invoke({"user_input": "My"})` prints `{'graph_output': 'My name is Lance'}`: the
/// run takes an `InputState` and returns an `OutputState`; the checkpoint holds every
/// channel, the private `bar` included.
pub async fn typed_guide_example_returns_only_output(
    saver: Arc<dyn CheckpointSaver>,
) -> TestResult {
    let graph = guide_graph(saver)?;
    let config = RunConfig::thread(thread());
    let input = InputState {
        user_input: "My".into(),
    };
    let out: OutputState = graph.invoke_as(&input, &config).await?;
    assert_eq!(
        serde_json::to_value(&out)?,
        json!({"graph_output": "My name is Lance"})
    );

    let saved = graph.get_state(&config).await?;
    assert_eq!(
        saved.values,
        OverallState {
            foo: "My name".into(),
            user_input: "My".into(),
            graph_output: "My name is Lance".into(),
            bar: "My name is".into(),
        }
    );
    Ok(())
}

/// An input key that is not a channel, or an output field the state does not hold, is an
/// error naming it; the bad input writes nothing.
pub async fn typed_input_and_output_errors_name_the_key(
    saver: Arc<dyn CheckpointSaver>,
) -> TestResult {
    #[derive(Serialize)]
    struct Typo {
        user_inptu: String,
    }
    #[derive(Debug, Deserialize)]
    struct Wrong {
        #[allow(dead_code)]
        answer: String,
    }
    let graph = guide_graph(saver)?;
    let config = RunConfig::thread(thread());
    let typo = Typo {
        user_inptu: "My".into(),
    };
    let err = graph
        .invoke_as::<_, OutputState>(&typo, &config)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("`user_inptu`") && err.contains("`user_input`"),
        "{err}"
    );
    assert!(
        graph
            .get_state(&config)
            .await?
            .config
            .checkpoint_id
            .is_none()
    );

    let input = InputState {
        user_input: "My".into(),
    };
    let err = graph.invoke_as::<_, Wrong>(&input, &config).await.err();
    let err = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("`answer`") && err.contains("Wrong"), "{err}");
    // The run itself went through: only reading its result as `Wrong` failed.
    let saved = graph.get_state(&config).await?;
    assert_eq!(saved.values.graph_output, "My name is Lance");
    Ok(())
}

/// A node whose input type reads a field the state does not declare fails `compile`,
/// naming the node and the field.
pub async fn node_input_of_undeclared_channel_fails_compile(
    saver: Arc<dyn CheckpointSaver>,
) -> TestResult {
    #[derive(Deserialize)]
    struct Baz {
        baz: String,
    }
    let mut g = StateGraph::<OverallState>::new();
    g.add_node_with_input("reader", |s: Baz, _: Context| async move {
        NodeResult::Ok(OverallStateUpdate::default().foo(s.baz))
    })
    .add_edge(START, "reader");
    let err = g
        .compile(CompileOptions::default().checkpointer(saver))
        .err();
    assert!(
        matches!(&err, Some(Error::InvalidGraph(m)) if m.contains("`reader`") && m.contains("`baz`")),
        "{err:?}"
    );
    Ok(())
}

/// A JSON-state node reads the private key `bar` (declared with `merge`) as a typed
/// `PrivateState`, and the run returns only the output key.
pub async fn json_node_reads_private_key_as_typed_input(
    saver: Arc<dyn CheckpointSaver>,
) -> TestResult {
    let schema = JsonSchema::new()
        .last_value("user_input")
        .last_value("graph_output")
        .merge(JsonSchema::new().last_value("bar"))?
        .input_keys(["user_input"])?
        .output_keys(["graph_output"])?;
    let mut g = StateGraph::json(schema);
    g.add_node_with_input("node_2", |s: InputState, _: Context| async move {
        NodeResult::Ok(obj(json!({"bar": s.user_input + " name is"})))
    })
    .add_node_with_input("node_3", |s: PrivateState, _: Context| async move {
        NodeResult::Ok(obj(json!({"graph_output": s.bar + " Lance"})))
    })
    .add_edge(START, "node_2")
    .add_edge("node_2", "node_3");
    let graph: CompiledGraph<JsonState> =
        g.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let input = InputState {
        user_input: "My".into(),
    };
    let out: OutputState = graph.invoke_as(&input, &config).await?;
    assert_eq!(
        out,
        OutputState {
            graph_output: "My name is Lance".into()
        }
    );
    Ok(())
}
