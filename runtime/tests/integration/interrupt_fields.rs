//! `Interrupt` shows LangGraph 0.x's fields (`ns`, `when`, `resumable`) beside `value` and
//! `id`: read from what LangGraph 0.x stored, kept when written back (Python 1.x and 0.6 read
//! it as their `Interrupt`), and defaulted as LangGraph wrote them for the interrupts
//! Waypoint raises, whose stored form stays LangGraph 1.x's `{value, id}`.

use std::process::Command;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use waypoint_checkpoint::{CheckpointSaver, Format, InMemorySaver, Serde, SerializedValue};
use waypoint_runtime::{
    CompileOptions, Context, Interrupt, JsonSchema, JsonState, RunConfig, START, StateGraph,
};
use waypoint_test_kit::run_with_input;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn xxh3(text: &str) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
}

/// An interrupt as LangGraph 0.4 stored it (its codec's `lc: 2` view): no id, a namespace,
/// `when` and `resumable`.
fn langgraph_0_4(ns: Value, resumable: bool) -> Value {
    json!({
        "lc": 2, "type": "constructor", "id": ["langgraph", "types", "Interrupt"],
        "kwargs": {"value": "old?", "resumable": resumable, "ns": ns, "when": "during"},
    })
}

#[tokio::test]
async fn raised_interrupts_have_langgraphs_defaults_and_no_namespace() -> TestResult {
    let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
    let mut g = StateGraph::json(JsonSchema::new().last_value("answer"));
    g.add_node("ask", |_: JsonState, ctx: Context| async move {
        let answer = ctx.interrupt("name?")?;
        Ok(Map::from_iter([("answer".to_owned(), answer)]))
    })
    .add_edge(START, "ask");
    let graph = g.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(uuid::Uuid::new_v4().to_string());
    let out = graph.invoke(Some(Map::new()), &config).await?;
    let snapshot = graph.get_state(&config).await?;
    for interrupt in [&out.interrupts[0], &snapshot.interrupts[0]] {
        assert_eq!(interrupt.value, json!("name?"));
        assert_eq!(interrupt.when(), "during");
        assert!(interrupt.resumable());
        assert_eq!(interrupt.ns(), None, "only its hash, the id, is kept");
        let task = &snapshot.tasks[0];
        assert_eq!(interrupt.id, xxh3(&format!("ask:{}", task.id)));
        #[allow(deprecated)]
        let old_name = interrupt.interrupt_id();
        assert_eq!(old_name, interrupt.id);
        // The stored and API form is still LangGraph 1.x's.
        assert_eq!(
            serde_json::to_value(interrupt)?,
            json!({"value": "name?", "id": interrupt.id})
        );
    }
    Ok(())
}

#[test]
fn langgraph_0_x_fields_are_read_and_written_back() -> TestResult {
    let read = Interrupt::from_value(langgraph_0_4(json!(["parent:1", "gate:abc"]), true))?;
    assert_eq!(read.ns(), Some(vec!["parent:1", "gate:abc"]));
    assert_eq!(read.when(), "during");
    assert!(read.resumable());
    assert_eq!(read.value, json!("old?"));
    assert_eq!(read.id, xxh3("parent:1|gate:abc"), "0.x's id hashes `ns`");

    // Written back in each format, nothing is lost.
    for format in [Format::LangGraph, Format::Json] {
        let serde = Serde::new(format);
        let again: Vec<Interrupt> = serde.loads(&serde.dumps(&vec![read.clone()])?)?;
        assert_eq!(again, vec![read.clone()], "{format:?}");
        assert_eq!(again[0].ns(), Some(vec!["parent:1", "gate:abc"]));
    }
    let json = serde_json::to_value(&read)?;
    assert_eq!(json["ns"], json!(["parent:1", "gate:abc"]));
    assert_eq!(json["when"], json!("during"));
    assert_eq!(json["resumable"], json!(true));

    // What the stored interrupt says wins over the defaults; a null `ns` is no namespace.
    let not_resumable = Interrupt::from_value(langgraph_0_4(Value::Null, false))?;
    assert!(!not_resumable.resumable());
    assert_eq!(not_resumable.ns(), None);
    Ok(())
}

/// Python's `JsonPlusSerializer` reads `bytes` (a list of interrupts) and prints each as
/// `[value, id]`.
fn python_reads(python: &std::path::Path, bytes: &[u8]) -> serde_json::Result<Value> {
    let script = r#"
import json, sys, warnings
warnings.simplefilter("ignore")
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Interrupt
items = JsonPlusSerializer().loads_typed(("msgpack", bytes.fromhex(sys.stdin.read())))
assert all(type(i) is Interrupt for i in items), items
print(json.dumps([[i.value, i.id] for i in items]))
"#;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let out = run_with_input(Command::new(python).args(["-c", script]), &hex);
    serde_json::from_str(&out)
}

fn check_python_reads_old_fields(python: &std::path::Path) -> TestResult {
    let serde = Serde::new(Format::LangGraph);
    let old = Interrupt::from_value(langgraph_0_4(json!(["gate:abc"]), true))?;
    let fresh = Interrupt::new(json!({"question": "name?"}), xxh3("ask:1"));
    let written: SerializedValue = serde.dumps(&vec![old.clone(), fresh.clone()])?;
    assert_eq!(
        python_reads(python, &written.bytes)?,
        json!([["old?", old.id], [{"question": "name?"}, fresh.id]])
    );
    Ok(())
}

#[test]
fn python_reads_interrupts_carrying_0_x_fields() -> TestResult {
    if let Some(python) = waypoint_test_kit::python() {
        check_python_reads_old_fields(&python)?;
    }
    Ok(())
}

#[test]
fn python_0_6_reads_interrupts_carrying_0_x_fields() -> TestResult {
    if let Some(python) = waypoint_test_kit::python_06() {
        check_python_reads_old_fields(&python)?;
    }
    Ok(())
}
